"""What a sixth new-user trial found: a benchmark run in which every request failed shown as a plain 0-goodput row
(now a warning, ``no_request_completed`` in JSON and exit 1, as ``simulate`` when no request finished; ``cost``
refuses it naming why); cost's break-even utilization, one replica's with the whole people line, read as contradicting
a break-even volume on several replicas (now each says whose it is)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_run import refused, run_cli

#: ``vllm bench serve --save-result`` (vLLM 0.25.1, aggregate only) of a run in which all 8 requests failed: the
#: layout and the zeros vLLM writes then (synthetic; modelled on er0080/vllm-benchmarking's
#: bench_serve_all_requests_failed_v0.25.1.json)
ALL_FAILED = {
    "date": "20260818-041350", "endpoint_type": "vllm", "backend": "vllm", "label": None,
    "model_id": "facebook/opt-125m", "tokenizer_id": "facebook/opt-125m", "num_prompts": 8, "request_rate": "inf",
    "burstiness": 1.0, "max_concurrency": None, "duration": 0.005, "completed": 0, "failed": 8,
    "total_input_tokens": 0, "total_output_tokens": 0, "request_throughput": 0.0, "request_goodput": None,
    "output_throughput": 0.0, "total_token_throughput": 0.0, "max_output_tokens_per_s": 0.0,
    "max_concurrent_requests": 0, "rtfx": 0.0,
    **{f"{s}_{m}_ms": 0.0 for m in ("ttft", "tpot", "itl") for s in ("mean", "median", "std", "p99")},
}
#: the same layout with 8 of 8 completed in 1.544 s, every percentile given inside ttft ≤ 200 ms, tpot ≤ 20 ms
ALL_GOOD = {**ALL_FAILED, "duration": 1.544, "completed": 8, "failed": 0, "total_input_tokens": 256,
            "total_output_tokens": 128, "request_throughput": 8 / 1.544, "output_throughput": 128 / 1.544,
            **{f"{s}_ttft_ms": 50.0 for s in ("mean", "median", "p99")},
            **{f"{s}_{m}_ms": 11.0 for m in ("tpot", "itl") for s in ("mean", "median", "p99")}}
SLO = ["--slo", "ttft=200ms,tpot=20ms"]
STAGE_3 = str(Path(__file__).resolve().parents[1] / "evidence/data/inference-perf/stage_3_lifecycle_metrics.json")


def _file(tmp_path: Path, name: str, doc: dict) -> str:
    f = tmp_path / name
    f.write_text(json.dumps(doc))
    return str(f)


def test_goodput_of_a_run_in_which_every_request_failed_warns_and_exits_1(tmp_path):
    bad = _file(tmp_path, "all_failed.json", ALL_FAILED)
    res = run_cli("goodput", bad, *SLO)
    assert res.exit_code == 1  # as simulate when no request finished (cli/simulate_run.py)
    first = " ".join(res.output.split("\nSLO: ")[0].split())  # the warning, before the SLO and the table
    assert first.startswith("warning: no request completed (8 of 8 failed): there is nothing to measure")
    assert first.endswith("(the server down, a wrong endpoint, model name or key) and run the benchmark again")
    # the per-metric bounds "between 0 and 0 of 0 completed requests" said nothing: gone
    assert "of 0 completed" not in res.output and res.output.count("no request completed") == 2  # warning, pointer
    doc = json.loads(run_cli("goodput", bad, *SLO, "--json").output)
    assert doc["no_request_completed"] is True and doc["notes"][0].startswith("no request completed (8 of 8 failed)")
    assert (doc["num_requests"], doc["num_failed"], doc["num_completed"], doc["num_good"]) == (8, 8, 0, 0)


def test_of_several_runs_only_the_empty_one_is_warned_about(tmp_path):
    good, bad = _file(tmp_path, "good.json", ALL_GOOD), _file(tmp_path, "all_failed.json", ALL_FAILED)
    res = run_cli("goodput", good, bad, *SLO)
    assert res.exit_code == 1
    warnings = [x for x in res.output.splitlines() if x.startswith("warning:")]
    assert warnings == [x for x in warnings if x.startswith("warning: run #2 all_failed.json: no request completed")]
    assert len(warnings) == 1
    runs = json.loads(run_cli("goodput", good, bad, *SLO, "--json").output)["runs"]
    assert [r["no_request_completed"] for r in runs] == [False, True]
    assert not any("no request completed" in n for n in runs[0]["notes"])
    # alone, the good run: exit 0, no warning
    alone = run_cli("goodput", good, *SLO)
    assert alone.exit_code == 0 and "warning" not in alone.output
    # p99 ≤ SLO of 8 values (numpy's linear rule) puts the 7th inside, the 8th unknown: 7 to 8 of 8 per metric,
    # jointly at least 8 − 1 − 1 = 6 and at most min(8, 8) = 8
    assert (runs[0]["num_good"], runs[0]["num_good_upper"]) == (6, 8)


def test_cost_refuses_a_run_with_no_completed_request_saying_so(tmp_path):
    bad = _file(tmp_path, "all_failed.json", ALL_FAILED)
    msg = refused("cost", bad, *SLO, "--api", "OpenAI:gpt-4.1-nano", "--gpu", "H100", "--num-gpus", "1")
    # it used to say "goodput per second is unknown (run duration not stated)" of a file that states 0.005 s
    assert "all_failed.json: nothing to price: no request completed (8 of 8 failed)" in msg
    assert "duration" not in msg and "run the benchmark again" in msg  # a measured run's fix, not a simulated one's


def test_cost_simulate_with_no_completed_request_gives_the_simulators_fix():
    # every 4,096-token prompt is past a 2,048-token max_model_len: the simulated engine rejects all 20 (a review
    # found the benchmark's advice, "run the benchmark again", given for a simulated run)
    msg = refused("cost", "--simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--prompt-lengths", "fixed:4096",
                  "--output-lengths", "fixed:16", "--num-requests", "20", "--rate", "1", "--max-model-len", "2048",
                  "--at-offered-load", *SLO, "--api", "OpenAI:gpt-4.1-nano")
    assert msg.startswith("the simulated run: nothing to price: no request completed (20 of 20 failed)")
    assert "a longer --max-model-len, or shorter prompts" in msg and "benchmark" not in msg


def test_cost_says_the_break_even_utilization_is_one_replicas_and_the_volume_shares_the_people_line():
    args = ["cost", STAGE_3, "--model", "meta-llama/Llama-3.1-8B-Instruct", "--slo", "ttft=200ms,tpot=50ms", "--api",
            "OpenAI:gpt-4.1-nano", "--team-capability", "none", "--gpu-usd-per-hour", "2.69"]
    doc = json.loads(run_cli(*args, "--json").output)
    bu, bv = doc["break_even_utilization"], doc["break_even_volume"]
    # one replica, no volume: u* = (R + P) ÷ (C × 3600 × 730 × a), R = 2.69 × 730 = $1,963.70, P = 0.5 × $20,000
    # (team 'none'); C = 55.39 good req/s, a = $0.0000452 a request: 11,963.70 ÷ 6,581 ≈ 182%, out of reach — while
    # 4 replicas, sharing P, break even (the numbers are as before; only the words change)
    c, a = doc["capacity"]["goodput_req_per_s"], doc["inputs"]["api_usd_per_request"]
    assert bu["required_utilization"] == pytest.approx((2.69 * 730 + 10_000) / (c * 3600 * 730 * a))
    assert round(bu["required_utilization"], 3) == 1.818
    assert bu["utilization"] is None  # 182% is no utilization a replica can run at: the figure is required_utilization
    assert bu["replicas"] == 1 and not bu["reachable"] and bv["replicas_at_break_even"] == 4
    util = doc["factors"][0]
    assert util["value"] == "80% of billed hours; one replica's break-even at 182%"  # was "break-even at 182%"
    # was "below break-even: the API costs less for the same requests", beside a volume at which self-hosting wins
    assert util["effect"] == ("below break-even: one replica costs more than the API for the same requests; at a "
                              "higher volume more replicas share the people line, and self-hosting wins above the "
                              "break-even volume")
    text = " ".join(run_cli(*args).output.split())
    # the break-even volume counts requests offered (a replica takes sizing req/s × 3600 × 730 × max utilization of
    # them, ledgers/breakeven.py), every one billed by the API: not "good requests", as the line read before
    assert ("break-even utilization of one replica, carrying the whole people line: 181.8% = (replica + people "
            "USD/month) ÷ (good req/s × 3600 × 730 × API USD per request) — above 100%: not reachable by one replica; "
            "at a higher volume the people cost is shared over more replicas (the break-even volume below) "
            "break-even volume: 394,904,764 offered requests/month") in text


def test_the_break_even_volume_states_the_utilization_of_its_own_replicas():
    # bug: the headline's "self-hosting is cheaper above V* (U utilization of one replica)" took U from the break-even
    # utilization, at a volume the u* of the replicas that volume needs: at 200B tokens/month it said "51.5%
    # utilization of one replica" (u* of its 7 replicas) of a V* reached on 4. V* = 394,904,764 requests/month with 4
    # replicas: (4 × $1,963.70 + $10,000) ÷ a = $17,854.80 ÷ a, of 4 × C × 3600 × 730 at full load = 67.8%
    args = ["cost", STAGE_3, "--model", "meta-llama/Llama-3.1-8B-Instruct", "--slo", "ttft=200ms,tpot=50ms", "--api",
            "OpenAI:gpt-4.1-nano", "--team-capability", "none", "--gpu-usd-per-hour", "2.69"]
    doc = json.loads(run_cli(*args, "--monthly-tokens", "200B", "--json").output)
    c, a = doc["capacity"]["goodput_req_per_s"], doc["inputs"]["api_usd_per_request"]
    bv = doc["break_even_volume"]
    assert bv["first_cheaper_utilization"] == pytest.approx((4 * 2.69 * 730 + 10_000) / a / (4 * c * 3600 * 730))
    assert round(bv["first_cheaper_utilization"], 3) == 0.678 and bv["first_cheaper_replicas"] == 4
    assert doc["break_even_utilization"]["replicas"] == 7  # the volume's replicas, sharing the people line
    # --monthly-tokens alone is split by the run's mix, and so is the break-even: the sentence names it
    assert doc["headline"][3] == ("  break-even: self-hosting is cheaper above 104B tokens/month (67.8% utilization "
                                  "of 4 replicas) at the run's mix, 76% input tokens")
    at = " ".join(run_cli(*args, "--monthly-tokens", "200B").output.split())
    assert "break-even utilization of the 7 replicas, sharing the people line: 51.5% = (7 replicas × replica" in at
    assert "utilization: 74% of billed hours; break-even of the 7 replicas the volume needs at 52% — above" in at
    # without a volume it said "(more than one replica's full capacity)"
    assert json.loads(run_cli(*args, "--json").output)["verdict"] == (
        "depends on volume: self-hosting is cheaper above 104B tokens/month (67.8% utilization of 4 replicas) at the "
        "run's mix, 76% input tokens; below 104B tokens/month the API (OpenAI:gpt-4.1-nano) is cheaper")


def test_doctor_summary_gives_the_available_kv_comparison_without_verbose():
    logs = Path(__file__).resolve().parents[1] / "fixtures" / "vllm_logs"
    log = str(logs / "constructed_v1_preemptions_at_full_kv.log")
    row = next(r for r in json.loads(run_cli("doctor", log, "--gpu", "H100", "--json").output)["startup"]["rows"]
               if r["term"] == "available KV memory")
    gib = 2**30
    # the log's 51.38 GiB (line 6) against the ledger's own plan: (ledger − log) ÷ log, shown to 0.1%
    assert row["log_value"] / gib == pytest.approx(51.38) and row["log_line"] == 6
    assert round(row["ledger_value"] / gib, 2) == 51.40
    err = (row["ledger_value"] - row["log_value"]) / row["log_value"]
    # judged by the plan's own range for its figure (the range `kvledger plan` prints: its terms' and the device
    # total's low/high), here vLLM 0.11.0's, wide above: 54,605,244,969–59,847,437,918 B = 50.86–55.74 GiB, −1.06% …
    # +8.44% of the ledger's 55,187,534,971 B = 51.40 GiB
    line = (f"start-up: available KV memory: log 51.38 GiB (line 6), kvledger 51.40 GiB (+0.02 GiB, {err:+.1%}; inside "
            "the plan's range 50.86–55.74 GiB (−1.06% … +8.44%, from its terms' and the device's ranges))")
    assert line in run_cli("doctor", log, "--gpu", "H100").output.splitlines()  # was only in --verbose's table
    # no ledger figure without a GPU: the log's alone, and what to pass (Qwen3-14B of LMCache#1739, 6.51 GiB, line 1)
    o6 = run_cli("doctor", str(logs / "v0.10.2_qwen3-14b_lmcache.log"), "--model",
                 str(logs.parent / "configs" / "Qwen3-14B.json")).output
    assert "start-up: available KV memory: log 6.51 GiB (line 1); no ledger figure: pass --gpu" in o6.splitlines()
    # a miss beyond 2% is said by its own "but" line, with both figures: no second line (Llama-2-7B on H100, +3.6%)
    miss = run_cli("doctor", str(logs / "v0.8-v0engine_llama-2-7b_h100.log"), "--model", "meta-llama/Llama-2-7b-hf",
                   "--gpu", "H100").output
    assert "available KV memory:" not in miss and "gives 58.19 GiB of KV memory against the log's 56.18 GiB" in miss


def test_validate_marks_the_rows_it_shows_only_in_the_table_itself():
    # inference-perf stage 0: its time_per_output_token (3.5 ms) disagrees with (E2E − TTFT)/(output − 1) (7.1 ms),
    # so its rows are shown beside the TPOT judged, never judged: each "TPOT (file's field)" row carries †, with its
    # one-line legend under the table (it was said only in a note further down, while the rows showed +95% errors)
    stage = str(Path(STAGE_3).with_name("stage_0_lifecycle_metrics.json"))
    out = run_cli("validate", stage, "--gpu", "H100-SXM", "--model", "meta-llama/Llama-3.1-8B-Instruct").output
    metrics = [x.split("│")[1].strip() for x in out.splitlines() if x.startswith("│")]
    assert [m for m in metrics if "†" in m] == [f"TPOT (file's field) {s} †" for s in ("mean", "p50", "p90", "p99")]
    assert "TPOT mean" in metrics and "TTFT mean" in metrics  # the rows judged: unmarked
    legend = next(x for x in out.splitlines() if x.startswith("†"))
    assert legend == ("†: shown only, not judged — inference-perf's own time_per_output_token disagrees with the "
                      "file's TTFT, E2E and output length; the TPOT judged is the row \"TPOT mean\" (see the TPOT note "
                      "below)")
    assert out.index("└") < out.index(legend) < out.index("note: TPOT: inference-perf's time_per_output_token")
