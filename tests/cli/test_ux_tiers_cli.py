"""Fresh-user trial of the KV-tier and session features: `offload` and `simulate` agree on the same flags, the tier
verdict weighs TTFT, overload is flagged on session runs, the tier is priced and simulated in `cost`, and the
hints name what to pass."""

from __future__ import annotations

from cli_run import cli_json
from typer.testing import CliRunner

from kvledger.cli.main import app

runner = CliRunner(env={"COLUMNS": "250"})
# priced flat (0.7 of peak FLOP/s for every matmul): the figures below were read off runs priced that way
M = ["meta-llama/Llama-3.1-8B", "--gpu", "H100", "--gemm-efficiency", "flat"]
AGENT8 = ["--workload", "agent", "--sessions", "8", "--session-rate", "1"]


def test_offload_and_simulate_share_the_session_context_cap():
    # 8 agent sessions, seed 0: 165 turns under a 32,768-token cap, 325 under the model's 131,072 (sessions stop
    # before their context would pass the cap; measured with --max-model-len 32K / 128K). Without --max-model-len
    # both commands now use the one session default, 32K, and say so.
    o = cli_json("offload", *M, "--kv-offloading-size", "64GiB", *AGENT8)
    s = cli_json("simulate", *M, "--kv-offloading-size", "64GiB", *AGENT8)
    assert o["workload"]["num_turns"] == s["workload"]["num_requests"] == 165
    assert o["workload"]["context_cap_tokens"] == s["workload"]["sessions"]["context_cap_tokens"] == 32_768
    assert "session default" in s["workload"]["sessions"]["context_cap_source"]
    given = cli_json("simulate", *M, *AGENT8, "--max-model-len", "128K")
    assert given["workload"]["num_requests"] == 325
    assert given["workload"]["sessions"]["context_cap_source"] == "--max-model-len"
    text = runner.invoke(app, ["offload", *M, "--kv-offloading-size", "64GiB", *AGENT8]).output
    assert "context cap 32,768 tokens" in text


def test_tier_verdict_weighs_ttft_and_session_overload_is_flagged():
    # 30 agent sessions at 1/s on 30 % of an H100's memory (the KV pool is small) with a 64 GiB LMCache host tier:
    # the tier serves 64.0 % of prompt tokens (≥ 1 %: it adds hits; 1.48 % before a load waited for the scheduler to
    # reach its request, when most loaded chunks were evicted unused; 64.4 % before the loads shared the host link,
    # loads_in_flight.py); the TTFT mean is 3.757 s against 6.868 s without it (−45 %: not worse) and the p50 3.92 s
    # against 7.15 s, so it helps, in a run that queues either way:
    # the turns spend 71 % of their time in the system before their first token (Σ TTFT ÷ Σ E2E ≥ 10 %): overloaded,
    # and said so
    flags = ["--kv-offloading-size", "64", "--kv-offloading-backend", "lmcache", "--workload", "agent", "--sessions",
             "30", "--session-rate", "1", "--gpu-memory-utilization", "0.3"]
    d = cli_json("simulate", *M, *flags)
    j = d["kv_tiers"]["judgment"]
    assert j["adds_hits"] and 0.640 < j["host_hit_rate"] < 0.641
    assert j["ttft_worse"] == [] and j["ttft_worse_tolerance"] == 0.01 and j["helps"]
    assert 0.54 < j["ttft_s"]["mean"]["with_tier"] / j["ttft_s"]["mean"]["without_tier"] < 0.55  # 3.757 ÷ 6.868
    assert d["overload"]["ttft_share"] > 0.7 and d["overload"]["threshold"] == 0.1
    assert d["overload"]["kind"] == "session_queue"
    text = runner.invoke(app, ["simulate", *M, *flags]).output
    assert "overloaded: the turns spent" in text
    # (2.3 s: the tier run twice, JSON and text, as a user reads it)
    # a run that keeps up (8 agent sessions, TTFT mean 36 ms): no overload in simulate's or offload's JSON
    assert cli_json("simulate", *M, *AGENT8)["overload"] is None
    assert "overload" not in cli_json("offload", *M, "--kv-offloading-size", "64GiB", *AGENT8)


def test_cost_simulate_with_a_host_tier_splits_rental_and_says_the_tier_is_simulated():
    # Nebius H100 $2.95/GPU-h × 730 h = $2,153.50/month; 256 GiB of host memory at the bundled $0.48/GiB-month
    # = $122.88/month; together $2,276.38, which the reason used to call "GPU rental alone".
    args = ["cost", "--simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--trace", "azure-conv",
            "--num-requests", "200", "--slo", "ttft=200ms,tpot=50ms", "--monthly-tokens", "3e9", "--gpu-provider",
            "Nebius", "--kv-tier-host", "256GiB"]
    d = cli_json(*args)
    reason = d["break_even_volume"]["reason"]
    assert "$2,276/month in GPU rental and KV tier alone ($2,154 GPUs + $123 tier)" in reason
    assert "GPU rental alone" not in reason
    # the capacity is now searched with the tier in the simulator (tests/cli/test_cost_tier_capacity_cli.py)
    assert any("is simulated: the capacity priced" in n for n in d["notes"])
    assert not any("priced only" in n for n in d["notes"])


def test_search_does_not_say_a_tier_twin_may_flip_inside_the_capacity_band():
    # H100 TP 1 with and without a 64 GiB host tier: the tier's probes run it in the simulator from 33 req/s, so the
    # two capacities differ by the search's resolution only (boundaries 33.0 and 33.26 req/s; 15.37 and 15.41 good
    # req/s) and size the same replicas, 1, at the capacity and at both ends of its band (×0.84–×1.06 at 5 req/s);
    # they differ by the tier's price only ($1,963.70 vs $1,963.70 + 64 GiB × $0.48 = $1,994.42/month, 1.6 %), which
    # the capacity band cannot flip.
    args = ["search", "meta-llama/Llama-3.1-8B", "--slo", "ttft=500ms,tpot=50ms", "--gpus", "H100", "--tp", "1",
            "--offload", "none,cpu:64GiB", "--num-requests", "100", "--rate", "5"]
    d = cli_json(*args)
    assert d["winner"]["margin"]["gap"] < d["winner"]["margin"]["band"]
    caps = [c["capacity"]["goodput_req_per_s"] for c in d["candidates"]]
    assert caps[0] != caps[1] and [c["sizing"]["replicas"] for c in d["candidates"]] == [1, 1]
    assert d["winner"]["margin"]["could_flip"] is False
    assert not any("may flip" in n for n in d["notes"])
    assert any("cannot flip them" in n for n in d["notes"])
    off = next(e["offload"] for e in d["candidates"] if e.get("offload"))
    assert "(1 GPU + tier, $1,994)" in off["verdict"] and "1 GPUs" not in off["verdict"]
    assert "(1 GPU, $1,964/month) vs 1 GPU + cpu:64GiB" in off["vs_more_gpus"][0]["text"]


def test_sessions_on_several_replicas_suggest_session_affinity():
    # 20 agent sessions on 2 replicas (32K cap): HBM prefix hit rate 0.889 round robin (the default, kept), 0.945
    # with --router session_affinity; the round-robin run says so, the sticky one does not.
    base = ["simulate", *M, "--workload", "agent", "--sessions", "20", "--replicas", "2"]
    rr = cli_json(*base)
    sa = cli_json(*base, "--router", "session_affinity")
    assert round(rr["summary"]["prefix_cache_hit_rate"], 3) == 0.889
    assert round(sa["summary"]["prefix_cache_hit_rate"], 3) == 0.945
    assert any("--router session_affinity keeps each session on one replica" in n for n in rr["notes"])
    assert not any("session_affinity keeps" in n for n in sa["notes"])
    one = cli_json("simulate", *M, *AGENT8)
    assert not any("session_affinity keeps" in n for n in one["notes"])


def test_prices_lists_the_tier_rows_with_source_date_and_the_default():
    d = cli_json("prices", "--kind", "tier")
    assert d["api"] == [] and d["gpu"] == []
    host = {r["key"]: r for r in d["tier"] if r["kind"] == "host"}
    # the default of a kind is its cheapest row: DDR5 RDIMM bought, $17.29/GiB over 36 months = $0.48/GiB-month (as
    # of 2025-12-28), the price `cost --kv-tier-host` and `search --offload` use without --host-memory-usd-per-gib-month
    ddr5 = host["Bought:host:ddr5-rdimm-36mo"]
    assert (ddr5["usd_per_gib_month"], ddr5["as_of"], ddr5["default"]) == (0.48, "2025-12-28", True)
    assert ddr5["source"].startswith("a public hardware-news report (3DNews, 2025-12-28")
    assert host["AWS:host:us-east-1"]["default"] is False
    assert sum(r["default"] for r in d["tier"]) == 2  # one host, one nvme
    aws = cli_json("prices", "--kind", "tier", "--provider", "aws")["tier"]
    assert [r["key"] for r in aws] == ["AWS:host:us-east-1"]
    text = runner.invoke(app, ["prices", "--kind", "tier"]).output
    assert "KV-tier prices, USD per GiB-month" in text and "2025-12-28" in text
    assert "tier" in cli_json("prices")  # --kind all lists them too
    res = runner.invoke(app, ["prices", "--kind", "tier", "--gpu", "H100"])
    assert res.exit_code != 0 and "per GiB-month, not per GPU" in str(res.exception)


def test_minor_wording_agent_hint_default_prefetch_policy_break_even_column_closed_loop_band():
    off = runner.invoke(app, ["offload", *M, "--kv-offloading-size", "64GiB", *AGENT8]).output
    # an agent run whose working set fits in HBM is not told to try --workload agent
    assert "does not help" in off and "(--workload agent)" not in off
    # the break-even table's last columns name their length: max_model_len 32,768 − 1 suffix token
    assert "load path @32,767" in off and "@max" not in off
    # the storage prefetch policy the user did not pass is named as the default, with what to pass
    res = runner.invoke(app, ["simulate", *M, "--policy", "sglang", "--enable-hierarchical-cache", "--kv-tier-nvme",
                              "1TiB", "--workload", "chat", "--sessions", "5"])
    msg = str(res.exception)
    assert "not given here, so the default, timeout" in msg
    assert "Pass --hicache-storage-prefetch-policy wait_complete" in msg
    assert "--hicache-storage-prefetch-policy timeout:" not in msg
    # a closed-loop session run's throughput band is not called "throughput at saturation"
    sim = runner.invoke(app, ["simulate", *M, *AGENT8]).output
    assert "throughput of the sessions' closed loops" in sim and "throughput at saturation" not in sim


def test_tier_judgment_by_hand():
    # the verdict's arithmetic on made-up figures: 5 % host hits add hits (≥ 1 %); a TTFT mean 0.5 % above the run
    # without the tier is inside the 1 % tolerance (helps), 2 % above is worse (does not help); 0.5 % host hits add none
    from types import SimpleNamespace

    from kvledger.analyses.judgments.offload import tier_judgment

    stats = SimpleNamespace(hbm_hit_tokens=900, host_hit_tokens=100, host_hit_rate=0.05, evicted_units=0)
    without = {"mean": 1.000, "p50": 0.800}
    near = tier_judgment(stats, {"mean": 1.005, "p50": 0.700}, without)  # type: ignore[arg-type]
    # no reusable count given: HBM's share is of the 1,000 tokens the tiers reused, 900 / 1,000
    assert near["helps"] and near["ttft_worse"] == [] and near["hbm_share_of_reusable"] == 0.9
    worse = tier_judgment(stats, {"mean": 1.020, "p50": 0.700}, without)  # type: ignore[arg-type]
    assert not worse["helps"] and worse["ttft_worse"] == ["mean"]
    few = SimpleNamespace(hbm_hit_tokens=995, host_hit_tokens=5, host_hit_rate=0.005, evicted_units=0)
    # 0.5 % host hits and a mean 1 % under the run without the tier (inside the 5 % noise): no help; 10 % under: help
    assert not tier_judgment(few, {"mean": 0.99, "p50": 0.7}, without)["helps"]  # type: ignore[arg-type]
    assert tier_judgment(few, {"mean": 0.9, "p50": 0.7}, without)["ttft_better"] == ["mean"]  # type: ignore[arg-type]
