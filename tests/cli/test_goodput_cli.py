"""``kvledger goodput``: JSON keys for scripts, the human table, boundary search, bad input and no overwriting."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.errors import FormatError, InputError, KvLedgerError

DATA = Path(__file__).resolve().parents[1] / "evidence" / "data"
AIPERF = str(DATA / "aiperf/run1_profile_export.jsonl")
runner = CliRunner()


def test_json_keys_for_one_run():
    res = runner.invoke(app, ["goodput", AIPERF, "--slo", "ttft=900ms,tpot=33.2ms", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    # hand-checked in tests/ledgers/test_goodput.py: 5 good of 100 (11 cancelled) over 9.317788951 s
    assert (d["num_requests"], d["num_failed"], d["num_good"], d["attainment"]) == (100, 11, 5, 0.05)
    assert d["goodput_req_per_s"] == pytest.approx(5 / 9.317788951)
    assert d["throughput_req_per_s"] == pytest.approx(89 / 9.317788951)
    assert d["duration_s"] == pytest.approx(9.317788951)
    assert d["effective_cost_multiplier"] == pytest.approx(17.8) and d["estimate"] is False


def test_json_lines_for_several_runs_and_boundary():
    stages = [str(DATA / f"inference-perf/stage_{i}_lifecycle_metrics.json") for i in range(7)]
    res = runner.invoke(app, ["goodput", *stages, "--slo", "ttft=100ms,tpot=10ms", "--json-lines", "--target", "0.9"])
    assert res.exit_code == 0, res.output
    lines = [json.loads(x) for x in res.output.splitlines()]
    assert len(lines) == 8 and all(x["estimate"] for x in lines[:7])
    # TPOT judged on (E2E − TTFT)/63, not the file's field: stage 2 misses (tests/ledgers/test_boundary.py)
    assert lines[-1]["boundary"]["boundary_value"] == pytest.approx(37.97)
    # --json: the same objects as one strict JSON document
    doc = json.loads(runner.invoke(app, ["goodput", *stages, "--slo", "ttft=100ms,tpot=10ms", "--json", "--target",
                                         "0.9"]).output)
    assert doc["runs"] == lines[:7] and doc["boundary"] == lines[-1]["boundary"]


def test_human_output_with_target_opens_with_the_boundary_and_its_unit():
    # the same seven inference-perf stages as above: stage 1 (37.97 req/s) is the highest rate whose lower-bound
    # attainment meets 90%, stage 2 (74.94 req/s) misses on TPOT judged as (E2E − TTFT)/63 (at most 25% meet:
    # tests/ledgers/test_boundary.py); one GPU per stage (manifests.yaml), so 37.97 per GPU
    stages = [str(DATA / f"inference-perf/stage_{i}_lifecycle_metrics.json") for i in range(7)]
    res = runner.invoke(app, ["goodput", *stages, "--slo", "ttft=100ms,tpot=10ms", "--target", "0.9"])
    assert res.exit_code == 0, res.output
    first = " ".join(res.output.split("\nwarning: ")[0].split())  # the lines before the warnings (80 columns)
    assert first == ("answer: SLO boundary on request_rate for attainment ≥ 90%: 37.97 req/s (37.97 req/s per GPU) "
                     "across 7 measured runs (each run's attainment at the end) the measured runs bracket it: between "
                     "37.97 req/s (the last that meets) and 74.94 req/s (the next measured, whose attainment is only "
                     "bounded, [1.0%, 25.0%]: even its upper bound misses); a run in between would narrow it")
    # stage 0's own TPOT field, 3.48 ms, is below the 16.06 GB / 3.35 TB/s = 4.79 ms an H100 needs to read the weights
    assert "is 3.48 ms, below the 4.79 ms one decode step needs" in " ".join(res.output.split())


def test_human_output_names_definitions_and_estimates():
    res = runner.invoke(app, ["goodput", AIPERF,
                              str(DATA / "inferencex/inferencex_glm5_fp8_vllm_tp8_isl1024_osl128_conc4.json"),
                              "--slo", "ttft=600ms,tpot=30ms"])
    assert res.exit_code == 0, res.output
    out = " ".join(res.output.split())
    assert "SLO: ttft ≤ 600.00 ms, tpot ≤ 30.00 ms" in out
    assert "≥38 ≤40" in out and "≥95.0%" in out  # the InferenceX bounds (tests/ledgers/test_estimate.py)
    assert "read as seconds (InferenceX-style client)" in out
    assert "output tokens = output_sequence_length (reasoning tokens included" in out


def test_bad_input_raises_user_errors():
    with pytest.raises(InputError, match="has no unit"):
        runner.invoke(app, ["goodput", AIPERF, "--slo", "ttft=200"], catch_exceptions=False)
    bad = runner.invoke(app, ["goodput", str(DATA / "SOURCES.md"), "--slo", "ttft=200ms"])
    assert isinstance(bad.exception, FormatError) and "`kvledger goodput --help` names them" in str(bad.exception)


def test_out_file_is_never_overwritten(tmp_path):
    out = tmp_path / "g.json"
    out.write_text("mine")
    res = runner.invoke(app, ["goodput", AIPERF, "--slo", "ttft=1s", "--out", str(out)])
    assert isinstance(res.exception, KvLedgerError) and "refusing to overwrite" in str(res.exception)
    assert out.read_text() == "mine"
    res = runner.invoke(app, ["goodput", AIPERF, "--slo", "ttft=1s", "--out", str(out), "--force", "--json"])
    assert res.exit_code == 0 and json.loads(out.read_text())["num_requests"] == 100


def test_console_entry_point_prints_the_error_and_exits_2(tmp_path):
    p = tmp_path / "mystery.json"
    p.write_text('{"hello": 1}')
    proc = subprocess.run([sys.executable, "-m", "kvledger.cli.main", "goodput", str(p), "--slo", "ttft=1s"],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2
    assert "unknown benchmark output format" in proc.stderr and "Traceback" not in proc.stderr


def test_yaml_next_to_the_reports_is_an_unknown_format():
    # the trial passed inference-perf's config.yaml (it sits next to the stage reports) and got "not valid JSON"
    res = runner.invoke(app, ["goodput", str(DATA / "inference-perf/config.yaml"), "--slo", "ttft=1s"])
    assert isinstance(res.exception, FormatError)
    assert "config.yaml: unknown benchmark output format. It is YAML, not JSON, JSON Lines or CSV" in str(res.exception)


def test_an_estimate_whose_bounds_meet_is_shown_as_a_count():
    # inference-perf stage 1 (aggregates only): TTFT max 70.09 ms ≤ 500 ms and TPOT max 4.74 ms ≤ 50 ms, so the
    # percentile bounds give exactly 2,278 good of 2,278; goodput = 2,278 ÷ 60.463 s = 37.676 req/s, multiplier 1.00×.
    # Shown as plain figures (it was "≥2278 ≤2278", "≥100.0%"), counts with separators; the token goodput (mean output
    # length × good/s) keeps "≈".
    res = runner.invoke(app, ["goodput", str(DATA / "inference-perf/stage_1_lifecycle_metrics.json"), "--slo",
                              "ttft=500ms,tpot=50ms"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    row = next(ln for ln in res.output.splitlines() if ln.startswith("│ 1 "))
    cells = [c.strip() for c in row.strip("│").split("│")]
    assert cells == ["1", "2,278", "0", "2,278", "100.0%", "37.676", "37.676", "≈2,366.2", "1.00×"]
    # llmperf's summary states its output-token mean (results_number_output_tokens_mean over the completed requests):
    # its token goodput is a bound like the rest, ≥0.0 at the joint lower bound of 0 good requests
    res = runner.invoke(app, ["goodput", str(DATA / "llmperf/leaderboard_summary_bedrock_70b.json"), "--slo",
                              "ttft=500ms,e2e=6s"], env={"COLUMNS": "200"})
    row = next(ln for ln in res.output.splitlines() if ln.startswith("│ 1 "))
    cells = [c.strip() for c in row.strip("│").split("│")]
    # of 101 completed: TTFT p90 490.43 ms ≤ 500 < p95 542.10 ms → 91–95; E2E min 5.568 s ≤ 6 s < p25 6.922 s → 1–25
    # (⌈0.25 × 100⌉); joint ≥ max(0, 101 − 10 − 100) = 0, ≤ min(95, 25) = 25; the multiplier (completed ÷ good) is then
    # at least 101 / 25 = 4.04, not "∞" (no request is known bad either)
    assert cells[3:5] == ["≥0 ≤25", "≥0.0%"] and cells[7] == "≥0.0" and cells[8] == "≥4.04×"


def test_a_vllm_log_given_to_goodput_is_named_and_sent_to_doctor():
    # vLLM logs were described by whatever their first lines parsed as: a 0.19 start-up log ("DEBUG 04-22 00:03:29
    # [plugins/__init__.py:36] ...") as "Markdown", a 0.14 one as YAML with its lines as keys, and one behind ISO
    # timestamps as broken JSON Lines ("2026-05-12T08:01:39..." starts with the number 2026)
    logs = Path(__file__).resolve().parents[1] / "fixtures" / "vllm_logs"
    for name in ("v0.14_qwen3-1.7b.log", "v1_metrics_iso_timestamps.log", "v0.5_recompute_preemption.log"):
        res = runner.invoke(app, ["goodput", str(logs / name), "--slo", "ttft=1s"])
        assert isinstance(res.exception, FormatError), name
        assert "It is a server log, not a benchmark output (a vLLM log is read by `kvledger doctor LOGFILE`)" in str(
            res.exception
        )


def test_a_simulated_run_at_an_offered_rate_says_why_its_goodput_has_no_band():
    # goodput at an offered rate is that rate × the attainment: the uncertainty is in the latencies (simulate prints
    # their bands) and in the SLO capacity (--target prints its band); the run's output says so instead of nothing
    from kvledger.report.goodput_view import FIXED_RATE_NO_BAND

    res = runner.invoke(app, ["goodput", "--simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--rate", "5",
                              "--num-requests", "40", "--slo", "ttft=500ms,tpot=50ms"])
    assert res.exit_code == 0, res.output
    assert " ".join(FIXED_RATE_NO_BAND.split()) in " ".join(res.output.split())


def test_a_tool_goodput_whose_slo_the_file_states_is_not_said_to_lack_it():
    # the AIPerf 0.11 fixture stores its goodput SLO in input_config.slos (TTFT 500 ms, inter_token_latency 20 ms): the
    # tool's figure is reported "under the SLO the file states", not "its SLO is not in the file" (vLLM's --goodput)
    fixture = (Path(__file__).resolve().parents[1] / "fixtures" / "bench_public"
               / "aiperf_0_11_profile_export_aiperf.json")
    res = runner.invoke(app, ["goodput", str(fixture), "--slo", "ttft=500ms,tpot=20ms"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    assert "tool-reported goodput (under the SLO the file states)" in res.output
    assert "its SLO is not in the file" not in res.output


def test_simulate_s_own_json_is_named_and_sent_to_its_records(tmp_path):
    # simulate's --json (and --out's summary.json, the same document) holds the run's summary (means, p50/p90/p99 per
    # latency), not one row per request, so goodput cannot count requests within an SLO from it: refused (exit 2,
    # a FormatError) saying what it is and what to give; with --out, the records.parquet beside it is named
    sim = ["simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--num-requests", "20"]
    doc = runner.invoke(app, [*sim, "--json"], catch_exceptions=False)
    assert json.loads(doc.stdout)["summary"]["ttft_s"]["count"] == 20  # aggregates only
    path = tmp_path / "sim.json"
    path.write_text(doc.stdout)
    with pytest.raises(FormatError) as err:
        runner.invoke(app, ["goodput", str(path), "--slo", "ttft=1s"], catch_exceptions=False)
    msg = str(err.value)
    assert msg.startswith(f"{path}: this is kvledger simulate's own output (its --json document, or summary.json "
                          "under --out): it holds the run's summary figures (means and percentiles), not each "
                          "request's latencies") and "unknown benchmark output format" not in msg
    assert "run `kvledger simulate ... --out DIR` and give DIR/records.parquet (every request)" in msg
    out = tmp_path / "run"
    assert runner.invoke(app, [*sim, "--out", str(out)], catch_exceptions=False).exit_code == 0
    with pytest.raises(FormatError, match=r"give the records.parquet --out wrote beside it \(.*records.parquet\)"):
        runner.invoke(app, ["goodput", str(out / "summary.json"), "--slo", "ttft=1s"], catch_exceptions=False)
    good = runner.invoke(app, ["goodput", str(out / "records.parquet"), "--slo", "ttft=1s", "--json"])
    assert json.loads(good.stdout)["num_requests"] == 20  # the records read: one per request
