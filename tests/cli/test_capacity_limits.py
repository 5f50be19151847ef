"""What limits a capacity, said with its numbers: requests max_model_len rejects (no SLO capacity, exit 1 in `goodput`
and `cost` alike), a running batch held at max_num_seqs with KV to spare, and a target near what light load attains."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_run import strict_json_file
from typer.testing import CliRunner

from kvledger.analyses.serving.rejections import count_rejections
from kvledger.analyses.serving.sim_ledgers import prepare_run, simulate_run
from kvledger.analyses.serving.sim_setup import SimRequestArgs
from kvledger.cli.main import app
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.engine.request_state import accept, refused

MODEL = "meta-llama/Llama-3.1-8B"
SHORT = ["--simulate", MODEL, "--gpu", "H100", "--max-model-len", "512"]
COST = ["--api", "OpenAI:gpt-4.1", "--utilization", "0.5"]
def _ok(*argv: str) -> str:
    """The stdout of a command that exits 0 (the console entry point exits only on a status other than 0)."""
    res = CliRunner().invoke(app, list(argv), catch_exceptions=False)
    assert res.exit_code == 0, res.output
    return res.stdout


GUIDELLM = str(Path(__file__).resolve().parents[1] / "evidence/data/guidellm/"
                                                     "llmd_fixture_guidellm_report_v2_mockserver.json")


@pytest.mark.parametrize("prompt, output, mml, caps, max_req", [
    (511, 4000, 512, True, None),  # vLLM V1: a prompt under max_model_len is served (its output capped)
    (512, 1, 512, True, None),  # … one at max_model_len is refused
    (400, 113, 512, False, None),  # V0: prompt + output 513 > 512, refused
    (400, 112, 512, False, None),  # … 512 fits
    (600, 10, 4096, False, 606),  # SGLang: prompt ≥ max_req_len − 5 = 601, refused
    (600, 10, 4096, False, 607),  # … 600 < 602 served
])
def test_the_counting_rule_is_the_engines_own(prompt, output, mml, caps, max_req):
    spec = RequestSpec("r", 0.0, prompt, output)
    assert refused(prompt, output, mml, caps, max_req) == (not hasattr(accept(0, spec, mml, caps, max_req), "uid"))


def test_rejections_are_counted_off_the_workload_as_the_simulator_rejects_them():
    # azure-conv's first 2,000 requests at --max-model-len 512 (vLLM V1: a prompt ≥ 512 is refused): the count read
    # off the workload is the simulated run's own num_rejected, 1,359, so attainment is at most 641 / 2,000 = 32.05 %
    args = SimRequestArgs(model=MODEL, gpu="H100", trace="azure-conv", num_requests=2000, max_model_len=512, rate=1.0)
    rej = count_rejections(prepare_run(args))
    assert rej.num_rejected == simulate_run(args).result.summary.num_rejected == 1359
    assert rej.attainment_ceiling == 0.3205 and rej.blocks(0.9) and not rej.blocks(0.3)
    # the fix: the longest prompt + output serves every request whole; the longest prompt + 1 rejects none
    assert (rej.longest_prompt_tokens, rej.longest_request_tokens, rej.least_max_model_len) == (7930, 7979, 7931)
    # SGLang refuses prompt + output > max_model_len: 301 of the first 500 at 1,024, as its simulation does; a closed
    # loop's requests are counted too (219 by V1's prompt rule)
    sg = SimRequestArgs(model=MODEL, gpu="H100", trace="azure-conv", num_requests=500, max_model_len=1024, rate=1.0,
                        policy="sglang")
    assert count_rejections(prepare_run(sg)).num_rejected == simulate_run(sg).result.summary.num_rejected == 301
    cl = SimRequestArgs(model=MODEL, gpu="H100", trace="azure-conv", num_requests=500, max_model_len=1024,
                        concurrency=8)
    assert count_rejections(prepare_run(cl)).num_rejected == 219


def test_cost_says_max_model_len_not_the_slo_and_exits_1(cli_entry):
    # the fresh user's run: 1,359 of 2,000 rejected, 32.0 % at most within the SLO < 90 %: no rate can meet it
    rc, out, err = cli_entry("cost", *SHORT, "--slo", "ttft=200ms,tpot=50ms", *COST)
    msg = " ".join(err.split())
    assert rc == 1 and out == ""  # no capacity: an answer a script must not take as complete, not bad input (2)
    assert msg.startswith("error: no SLO capacity: 1,359 of the 2,000 requests per probe (68.0%) are rejected before "
                          "they run (a prompt ≥ max_model_len, max_model_len here 512;")
    assert "attainment is at most 32.0% at any load, below the 90% target" in msg
    assert "raise --max-model-len to at least 7,979 (the workload's longest prompt + output; 7,931" in msg
    assert "loosen the SLO" not in msg
    rc, out, _ = cli_entry("cost", *SHORT, "--slo", "ttft=200ms,tpot=50ms", *COST, "--json")
    e = json.loads(out)["error"]
    assert rc == 1 and e["type"] == "NoAnswerError" and e["exit_code"] == 1
    rej = e["detail"]["rejections"]
    assert (rej["num_rejected"], rej["least_max_model_len"]) == (1359, 7931)


def test_goodput_says_it_first_and_exits_1_as_cost_does(cli_entry):
    rc, out, _ = cli_entry("goodput", *SHORT, "--slo", "ttft=200ms", "--target", "0.9")
    first = " ".join(out.split("\nwarning:")[0].split())
    assert rc == 1 and first.startswith("answer: no SLO capacity on request_rate — 1,359 of the 2,000 requests per "
                                        "probe (68.0%) are rejected")
    assert "raise --max-model-len to at least 7,979" in first
    assert out.count("1,359 of the 2,000") == 1  # said in the answer, not again among the notes
    rc, out, _ = cli_entry("goodput", *SHORT, "--slo", "ttft=200ms", "--target", "0.9", "--json")
    d = json.loads(out)
    assert rc == 1 and d["boundary"]["boundary_value"] is None
    assert (d["rejections"]["num_rejected"], d["rejections"]["attainment_ceiling"]) == (1359, 0.3205)


def test_no_capacity_for_the_slo_is_exit_1_in_both_commands_too(cli_entry):
    # 1 ms TTFT: even 1/1024 req/s misses; no request is rejected, so the SLO's levers are the advice: near idle every
    # request misses the TTFT limit, so the levers are a faster step (GPU, TP) or a looser limit, not more replicas
    sim = ["--simulate", MODEL, "--gpu", "H100", "--num-requests", "300", "--slo", "ttft=1ms"]
    rc, _, err = cli_entry("cost", *sim, *COST)
    msg = " ".join(err.split())
    assert rc == 1 and "no request rate down to 0.000976562 req/s has 90% of requests" in msg
    assert "missed ttft ≤ 1 ms: with the engine nearly idle the step time itself is over the limit" in msg
    assert "a looser limit would" in msg and "--replicas" not in msg
    rc, out, _ = cli_entry("goodput", *sim, "--target", "0.9")  # (rich wraps at the terminal's width: words compared)
    assert rc == 1 and "the lowest value probed already misses 90%" in " ".join(out.split())
    # a measured sweep: both GuideLLM runs (2 and 4 req/s) have 0 % within 1 ms TTFT
    rc, out, _ = cli_entry("goodput", GUIDELLM, "--slo", "ttft=1ms", "--target", "0.9")
    assert rc == 1 and "none (the lowest value already misses)" in " ".join(out.split())
    rc, _, err = cli_entry("cost", GUIDELLM, "--slo", "ttft=1ms", *COST, "--gpu-usd-per-hour", "2", "--num-gpus", "1")
    assert rc == 1 and "there is no SLO capacity to price" in " ".join(err.split())


def test_simulate_names_max_num_seqs_when_the_batch_sat_at_it_with_kv_to_spare():
    # H100, azure-conv at 40 req/s, 3,000 requests, --max-num-seqs 16: overloaded (39.4 req/s in, 6.9 out) with KV
    # at most 6.7 % used; 15.8 requests decoding on average, 16 at most: ≥ 0.9 × 16, the cap held the batch
    out = _ok("simulate", MODEL, "--gpu", "H100", "--trace", "azure-conv", "--rate", "40",
              "--num-requests", "3000", "--max-num-seqs", "16", "--json")
    c = json.loads(out)["overload"]["seq_cap"]
    assert (c["max_num_seqs"], c["running_max"], round(c["running_mean"], 1)) == (16, 16, 15.8)
    assert round(c["kv_usage_max"], 3) == 0.067
    # (28,857 blocks − the null block) × 16 tokens = 461,696 slots ÷ 1,409.5 tokens (prompt 1,150.1 + output 259.4
    # means) = 327 requests the pool holds: raising the cap has room
    assert (c["kv_pool_tokens"], c["kv_pool_requests"]) == (461696, 327)
    out = _ok("simulate", MODEL, "--gpu", "H100", "--trace", "azure-conv", "--rate", "40",
              "--num-requests", "3000", "--max-num-seqs", "16")
    text = " ".join(out.split())
    assert ("the running batch sat at max_num_seqs 16 (15.8 decoding on average, 16 at most) with the KV cache at "
            "most 6.7% used: raise --max-num-seqs (see the note below)") in text
    assert "one replica's KV pool holds about 327 requests of this run's mean length" in text
    # the backlog is said as what it is: 1,229 at the median arrival, where a kept-pace engine would have held them
    assert ("— 1,235 past where an engine keeping pace from the median arrival on would have held them (1,229: the "
            "arrival rate did not change between the halves)") in text


def test_an_overload_with_the_kv_cache_full_is_not_blamed_on_max_num_seqs():
    # 60 req/s on the default max_num_seqs (1,024): the KV cache fills (max 100 %), so the cap is not the limit
    out = _ok("simulate", MODEL, "--gpu", "H100", "--trace", "azure-conv", "--rate", "60",
              "--num-requests", "2000", "--json")
    d = json.loads(out)
    assert d["overload"]["kind"] == "queue_growth" and d["summary"]["kv_usage"]["max"] == 1.0
    assert "seq_cap" not in d["overload"]


def test_a_target_near_what_light_load_attains_is_warned_about(tmp_path):
    # azure-code, TTFT ≤ 200 ms, TPOT ≤ 50 ms, 90 %: 93.0 % at 0.125 req/s (1,859 of 2,000; 136 miss TTFT, 7 TPOT),
    # 58 % of the 0.2148 req/s found, < 90 % + 5 points: the capacity rests on the requests that miss at any load
    # one search: the text on stdout, the --json document in --out's file
    out = _ok("goodput", "--simulate", MODEL, "--gpu", "H100", "--trace", "azure-code",
              "--slo", "ttft=200ms,tpot=50ms", "--target", "0.9", "--out", str(tmp_path / "goodput.json"))
    c = strict_json_file(tmp_path / "goodput.json")["attainment_ceiling"]
    assert (c["lowest_rate_req_per_s"], c["attainment_at_lowest"], c["good_at_lowest"]) == (0.125, 0.9295, 1859)
    assert c["slo_capacity_req_per_s"] == 0.21484375 and c["missed_at_lowest"] == {"ttft": 136, "tpot": 7}
    # 584 of the first 2,000 requests' 1,999 gaps are under 1 % of the mean gap: bursts, kept by rescaling the rate
    assert (c["burst_gaps"], c["num_gaps"]) == (584, 1999)
    head = " ".join(out.split("\nSLO:")[0].split())  # the warnings above the probe table
    assert ("warning: near the attainment ceiling: even at 0.125 req/s, the lowest rate probed (58% of the 0.2148 "
            "req/s capacity), only 93.0% of requests meet the SLO against the 90% target (then 0.1875 → 90.8%, "
            "0.2031 → 90.3%, 0.2109 → 90.3%, 0.2148 → 90.0%; from 0.2168 req/s up at most 89.9%)") in head
    assert "Lower --target, or look at why those requests miss (TTFT mostly, during the bursts" in head
    # cost shows it among its capacity warnings and in --json's capacity search
    out = _ok("cost", "--simulate", MODEL, "--gpu", "H100", "--trace", "azure-code",
              "--slo", "ttft=200ms,tpot=50ms", *COST, "--json")
    cs = json.loads(out)["simulation"]["capacity_search"]
    assert cs["attainment_ceiling"]["attainment_at_lowest"] == 0.9295
    assert any(n.startswith("near the attainment ceiling: ") for n in cs["notes"])


def test_no_ceiling_warning_where_light_load_clears_the_target():
    # azure-conv, 300 requests: 100 % within the SLO at 1 req/s, far above 90 % + 5 points
    out = _ok("goodput", "--simulate", MODEL, "--gpu", "H100", "--num-requests", "300",
              "--slo", "ttft=200ms,tpot=50ms", "--target", "0.9", "--json")
    d = json.loads(out)
    assert d["probes"][0]["attainment"] == 1.0 and d["attainment_ceiling"] is None


def test_no_ceiling_warning_at_a_99_percent_target_where_nothing_missed_at_light_load():
    # azure-conv, 300 requests, target 99 %: 100 % within the SLO at 1, 2, 4 and 8 req/s, capacity 14.875 req/s.
    # 100 % is under 99 % + 5 points, so the warning fired ("only 100.0% of requests meet the SLO") though no request
    # missed; the margin is now min(5 points, (1 − 0.99) ÷ 2 = 0.5 point): 100 % clears 99.5 %
    out = _ok("goodput", "--simulate", MODEL, "--gpu", "H100", "--num-requests", "300",
              "--slo", "ttft=200ms,tpot=50ms", "--target", "0.99", "--json")
    d = json.loads(out)
    assert [(p["value"], p["attainment"]) for p in d["probes"][:4]] == [(1.0, 1.0), (2.0, 1.0), (4.0, 1.0), (8.0, 1.0)]
    assert d["boundary"]["boundary_value"] == 14.875 and d["attainment_ceiling"] is None


def test_the_ceiling_warning_is_a_capacity_warning_everywhere():
    from kvledger.analyses.search.frontier import capacity_caveats
    from kvledger.report.decision_view import not_steady_lines

    note = "near the attainment ceiling: even at 0.125 req/s …"
    assert not_steady_lines({"notes": [note]}) == [f"warning: {note}"]  # report, the web app's capacity_warning
    assert capacity_caveats({"capacity": {"notes": [note]}})[0].startswith("capacity set by requests that miss")
