"""Whether the host tier helps (kvledger offload's first line), on the hand-worked two-turn sessions of
tests/dynamics/test_offload_two_turn.py: once with an HBM too small to keep turn 0's prefix, once with one that keeps
it; and the header names the engine version whose rules apply."""

from __future__ import annotations

import pytest

from kvledger.accounting.stepcost import FixedStepCost
from kvledger.analyses.judgments.offload import tier_judgment
from kvledger.dynamics.engine.config import EngineConfig
from kvledger.dynamics.engine.offload import HostTier
from kvledger.dynamics.offload_sim import simulate_offload
from kvledger.dynamics.workload.reuse import reusable_prefix_tokens
from kvledger.dynamics.workload.sessions import Session, SessionLoop, Turn
from kvledger.report.offload_view import tier_verdict_line

# Session A: turn 0 = 1,024 input + 16 output tokens; turn 1, 10 s later, adds 64 input tokens (prompt 1,104, of which
# the first 1,024 are turn 0's prompt). B and C (1,024 + 16 each) arrive at 1 s and 2 s. Prompt tokens at first
# admission: 3 × 1,024 + 1,104 = 4,176. Host tier: 1,000 blocks of Llama-3.1-8B KV (131,072 B/token) at 51.2 GB/s.
HOST = HostTier(1000, 131072, 51.2e9, 51.2e9)
SESSIONS = SessionLoop((Session("A", 0.0, (Turn(1024, 16), Turn(64, 16, think_s=10.0)), 0, 0),
                        Session("B", 1.0, (Turn(1024, 16),), 0, 1), Session("C", 2.0, (Turn(1024, 16),), 0, 2)), 64)


def _run(num_gpu_blocks: int):
    cfg = EngineConfig(num_gpu_blocks=num_gpu_blocks, max_model_len=1200, block_size=16, max_num_batched_tokens=2048)
    return simulate_offload(SESSIONS, cfg, FixedStepCost(0.01, 1e-5), HOST).tiers


# reusable prefix tokens (dynamics/workload/reuse.py): only A-t1 reuses, its first 16 segments of 64 tokens (A-t0's
# prompt; A-t0's 16 output tokens fill no whole segment): 16 × 64 = 1,024 tokens; B and C share nothing
REUSABLE = 1024


def test_the_tier_helps_when_hbm_evicted_the_reused_prefix():
    # 80 blocks (1,264 tokens usable): B and C evict A's 64 blocks; turn 1 loads its 1,024-token prefix from the host:
    # host hit rate 1,024 / 4,176 = 24.5% ≥ 1%, HBM held 0 of the 1,024 reusable tokens, the host served all of them
    assert reusable_prefix_tokens(SESSIONS) == REUSABLE
    j = tier_judgment(_run(80), reusable_tokens=REUSABLE)
    assert j["helps"] and j["host_hit_rate"] == pytest.approx(1024 / 4176)
    assert j["reused_tokens"] == 1024 and j["served_below_hbm_tokens"] == 1024 and j["hbm_share_of_reusable"] == 0.0
    assert j["recomputed_reusable_tokens"] == 0 and j["cause"] == "served_below_hbm"
    assert j["wasted_loads"] == [] and j["overload"] is None
    assert tier_verdict_line(j).startswith("The host tier helps this workload: it serves 24.5% of prompt tokens")


def test_the_tier_adds_nothing_when_hbm_holds_the_working_set():
    # 400 blocks (6,400 tokens) hold all four requests (≤ 1,120 tokens = 70 blocks each, 280 in all): turn 1 finds its
    # 1,024-token prefix in HBM, the host serves 0 tokens: 0% < 1%, HBM held 1,024 of the 1,024 reusable tokens
    j = tier_judgment(_run(400), reusable_tokens=REUSABLE)
    assert not j["helps"] and j["host_hit_rate"] == 0.0
    assert j["reused_tokens"] == 1024 and j["hbm_share_of_reusable"] == 1.0 and j["cause"] == "fits_in_hbm"
    line = tier_verdict_line(j)
    assert line.startswith("The host tier does not help this workload: it served 0.00% of prompt tokens (under 1%)")
    assert "HBM already held 100% of the 1,024 reusable prefix tokens" in line and "(1,024; 0 recomputed)" in line
    assert "more sessions in flight" in line and "longer sessions" in line
    # a trace run (simulate --trace ... with tier flags) has no --sessions to turn: the hint names the trace's load
    line = tier_verdict_line(j, sessions=False)
    assert "--sessions" not in line and "--workload" not in line and "more requests in flight (--rate" in line



def test_report_tier_hints_name_reports_flags():
    # kvledger report's tier run is at the capacity rate its --slo and --target size: report takes no --rate,
    # --rate-scale or --concurrency, so its hints name those two. The 400-block run above (HBM held 100% of the 1,024
    # reusable tokens): "fits in HBM", the more-load hint; the overloaded stats of the next test: the advice
    from types import SimpleNamespace

    j = tier_judgment(_run(400), reusable_tokens=REUSABLE)
    line = tier_verdict_line(j, sessions=False, report=True)
    assert "HBM already held 100% of the 1,024 reusable prefix tokens" in line
    assert "a looser --slo or a lower --target sizes a higher rate" in line
    assert not any(f in line for f in ("--rate,", "--rate-scale", "--concurrency", "--sessions"))
    stats = SimpleNamespace(prompt_tokens=20_000, hbm_hit_tokens=990, host_hit_tokens=10, host_hit_rate=0.0005,
                            evicted_units=0, peak_host_units=10, host_capacity_units=2048, host_unserved_tokens=None,
                            loaded_bytes=1310720.0, disk=None, remote=None)
    overload = {"kind": "queue_growth", "arrived_per_s": 12.0, "finished_per_s": 9.0, "backlog_mid": 300,
                "backlog_last": 700, "note": "…"}
    over = tier_verdict_line(tier_judgment(stats, reusable_tokens=10_000, overload=overload), sessions=False,
                             report=True)
    # 12/s arrived, 9/s finished, the backlog 300 → 700: overload leads the advice, in report's flags
    assert "requests arrived at 12/s and finished at 9/s, the backlog growing 300 → 700" in over
    assert "Serve fewer requests in flight per replica (a stricter --slo or a higher --target sizes a lower" in over
    assert "simulate --replicas" not in over and "--rate-scale" not in over and "--concurrency" not in over
    # simulate keeps its own words for the same judgment
    assert "lower --rate, --rate-scale or --concurrency" in tier_verdict_line(
        tier_judgment(stats, reusable_tokens=10_000, overload=overload), sessions=False)

def test_recomputed_reusable_tokens_count_against_hbm():
    # the user's report: HBM 990 hits, host 10 and the old share 990 / (990 + 10) = 99% "fits in HBM" although
    # 9,000 of 10,000 reusable tokens were recomputed: HBM's share of the reusable ones is 990 / 10,000 = 9.9%
    from types import SimpleNamespace

    disk = SimpleNamespace(hit_tokens=1024, unserved_tokens=17_701_456, loaded_bytes=2_320_299_458_560.0)
    stats = SimpleNamespace(prompt_tokens=20_000, hbm_hit_tokens=990, host_hit_tokens=10, host_hit_rate=0.0005,
                            evicted_units=262_836, peak_host_units=2048, host_capacity_units=2048,
                            host_unserved_tokens=None, loaded_bytes=1310720.0, disk=disk, remote=None)
    overload = {"kind": "session_queue", "ttft_share": 0.7415, "ttft_mean_s": 44.736, "threshold": 0.1, "note": "…"}
    j = tier_judgment(stats, reusable_tokens=10_000, overload=overload, host_unit=("chunk", 256))
    # reused = 990 HBM + 10 host + 1,024 disk = 2,024; recomputed 10,000 − 2,024 = 7,976 (79.76%)
    assert j["reused_tokens"] == 2024 and j["recomputed_reusable_tokens"] == 7976
    assert j["hbm_share_of_reusable"] == pytest.approx(0.099) and j["cause"] == "misses"
    assert j["host_full"] == {"peak_units": 2048, "capacity_units": 2048, "evicted_units": 262_836, "unit": "chunk",
                              "unit_tokens": 256, "evicted_wanted_units": None}
    # the disk read 17,702,480 tokens (1,024 + 17,701,456; 2,160.95 GiB) to serve 1,024: wasted; the host served all
    # it read (10 tokens, none unserved): not
    assert [t["tier"] for t in j["wasted_loads"]] == ["disk"] and j["wasted_loads"][0]["loaded_tokens"] == 17_702_480
    line = tier_verdict_line(j, workload="agent")
    assert "fits in HBM" not in line and "more sessions in flight" not in line
    assert "HBM held 990 (10%)" in line and "7,976 (80%) missed every tier and were recomputed" in line
    assert "The host tier was full (2,048 / 2,048 chunks of 256 tokens held at its peak) and evicted 262,836" in line
    assert "the disk tier read 17,702,480 tokens (2,160.95 GiB) into HBM and served 1,024 of them" in line
    assert "the engine was overloaded: the turns spent 74% of their time waiting" in line and "44.7 s" in line
    assert "Serve fewer sessions per replica (lower --sessions or --session-rate) or add replicas" in line
    # not overloaded: the full host tier leads the advice; no full tier either: the unused loads do
    assert "The host tier is too small for the working set" in tier_verdict_line(tier_judgment(
        stats, reusable_tokens=10_000, host_unit=("chunk", 256)))
    # evictions no later lookup wanted cost nothing: no larger tier advised, and the line says so
    unwanted = tier_verdict_line(tier_judgment(SimpleNamespace(**{**vars(stats), "evicted_wanted_units": 0}),
                                               reusable_tokens=10_000, host_unit=("chunk", 256)))
    assert "too small" not in unwanted and "evicted 262,836 chunks, none of which a later lookup wanted" in unwanted
    wanted = tier_verdict_line(tier_judgment(SimpleNamespace(**{**vars(stats), "evicted_wanted_units": 40}),
                                             reusable_tokens=10_000, host_unit=("chunk", 256)))
    assert "too small for the working set" in wanted and "262,836 chunks, 40 of which a later lookup wanted" in wanted
    full_free = SimpleNamespace(**{**vars(stats), "evicted_units": 0})
    assert "HBM evicted the loaded blocks before their request was admitted" in tier_verdict_line(
        tier_judgment(full_free, reusable_tokens=10_000))


def test_an_overloaded_agent_run_is_not_told_its_working_set_fits():
    # 40 agent sessions at 2 starts/s on one H100 at --gpu-memory-utilization 0.4 with an 8 GiB host tier (4,096
    # blocks of 16 tokens): HBM's hits are 99.9% of the tiers' hits, the old measure's "fits in HBM", yet only a third
    # of the reusable tokens; the host tier filled and the turns queued
    from kvledger.accounting.kv_tier_rules import TierSettings
    from kvledger.accounting.settings import make_settings
    from kvledger.analyses.judgments.offload import analyse_offload
    from kvledger.analyses.serving.plan_pricing import PricingFlags
    from kvledger.catalog.gpu_file import resolve_gpu
    from kvledger.catalog.models import load_model

    rep = analyse_offload(load_model("meta-llama/Llama-3.1-8B"), resolve_gpu("H100"),
                          make_settings(max_model_len=32768, gpu_memory_utilization=0.4),
                          TierSettings(kv_offloading_size_gib=8, kv_offloading_backend="native"), workload="agent",
                          num_sessions=40, session_rate=2.0, pricing=PricingFlags())
    j = rep.judgment
    # the workload alone sets the reusable tokens (seed 0's draw): 8,690,240; every one is reused or recomputed
    assert rep.reusable_tokens == 8_690_240 == j["reused_tokens"] + j["recomputed_reusable_tokens"]
    assert j["hbm_hit_tokens"] / j["reused_tokens"] > 0.99 and j["hbm_share_of_reusable"] < 0.4
    assert j["cause"] == "misses" and j["host_full"]["capacity_units"] == 4096 and j["overload"]["ttft_share"] > 0.1
    line = tier_verdict_line(j, workload="agent")
    assert "fits in HBM" not in line and "more sessions in flight" not in line
    assert "The host tier was full (4,096 / 4,096 blocks of 16 tokens" in line and "Serve fewer sessions" in line


def test_offload_header_names_the_engine_version():
    # the header used to end in a bare "— vllm"; it names the version whose rules the plan applied (here the one given)
    from typer.testing import CliRunner

    from kvledger.cli.main import app

    out = CliRunner().invoke(app, ["offload", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--kv-offloading-size",
                                   "256GiB", "--sessions", "20", "--engine-version", "0.19.0"])
    assert out.exit_code == 0, out.output
    assert "vllm 0.19.0 rules" in " ".join(out.output.split())


def test_a_tier_that_cuts_ttft_helps_whatever_share_it_served():
    # the user's run: 0.74% of prompt tokens from the host (under the 1% share), TTFT mean 389.0 vs 487.2 ms
    # (389.0 / 487.2 − 1 = −20.2%) and p90 262.4 vs 308.4 ms (−14.9%): both cuts over the 5% noise; p50 100.1 vs
    # 101.3 ms is not worse
    from types import SimpleNamespace

    stats = SimpleNamespace(prompt_tokens=43_500_000, hbm_hit_tokens=39_615_600, host_hit_tokens=322_016,
                            host_hit_rate=0.0074, evicted_units=0, peak_host_units=10, host_capacity_units=131_072,
                            host_unserved_tokens=None, loaded_bytes=0.0, disk=None, remote=None)
    with_s = {"mean": 0.3890, "p50": 0.1001, "p90": 0.2624, "p99": 7.67}
    without_s = {"mean": 0.4872, "p50": 0.1013, "p90": 0.3084, "p99": 8.35}
    j = tier_judgment(stats, with_s, without_s, reusable_tokens=41_527_552)
    assert j["helps"] and not j["adds_hits"] and j["ttft_better"] == ["mean", "p90"] and j["ttft_worse"] == []
    line = tier_verdict_line(j, workload="agent")
    assert line.startswith("The host tier helps this workload's TTFT: mean 389 ms with it against 487 ms without "
                           "(−20%), p90 262 ms with it against 308 ms without (−15%)")
    assert "0.74% of prompt tokens" in line
    # a 3% cut is within the noise: the share decides, and 0.74% does not help
    j = tier_judgment(stats, {**with_s, "mean": 0.4726, "p90": 0.2992}, without_s, reusable_tokens=41_527_552)
    assert not j["helps"] and j["ttft_better"] == []


def test_host_caches_count_evicted_keys_a_later_lookup_wanted():
    from kvledger.dynamics.engine.connector_caches import ConnectorLRU, HostARC
    from kvledger.dynamics.engine.offload import HostLRU

    for cache in (ConnectorLRU(2), HostLRU(2), HostARC(2)):
        cache.store_run([1, 2])
        cache.store_run([3])  # full: evicts key 1 (least recent; ARC: T1's front)
        assert cache.evicted == 1 and cache.evicted_wanted == 0
        assert cache.lookup([7, 8], 0, 2) == 0 and cache.evicted_wanted == 0  # never held: not a wanted eviction
        assert cache.lookup([1, 2], 0, 2) == 0 and cache.evicted_wanted == 1  # key 1 was held, evicted, wanted
        cache.lookup([1, 2], 0, 2)
        assert cache.evicted_wanted == 1, type(cache)  # once an eviction
