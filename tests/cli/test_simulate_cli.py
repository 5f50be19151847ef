"""`kvledger simulate` and `kvledger experiment` end to end: JSON keys for scripts, output files, refusals, errors."""

from __future__ import annotations

import json
import subprocess
import sys

from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.errors import InputError, KvLedgerError, UnknownNameError

runner = CliRunner()
BASE = ["simulate", "meta-llama/Meta-Llama-3.1-8B", "--gpu", "H100", "--num-requests", "40"]


def test_json_has_the_fields_scripts_rely_on():
    res = runner.invoke(app, BASE + ["--json"])
    assert res.exit_code == 0, res.output
    s = json.loads(res.output)["summary"]
    assert s["num_requests"] == 40 and s["num_finished"] + s["num_rejected"] == 40
    for k in ("num_preemptions", "throughput_tok_per_s", "prefix_cache_hit_rate"):
        assert k in s
    for k in ("ttft_s", "itl_s", "tpot_s", "e2e_s"):
        assert set(s[k]) >= {"mean", "p50", "p90", "p99"}
        assert 0 < s[k]["p50"] <= s[k]["p99"] < 60  # seconds, not milliseconds
    engine = json.loads(res.output)["engine"]
    # the pool comes from the vLLM memory plan: Llama-3.1-8B on an H100 holds ~27K blocks of 16 tokens
    assert 20_000 < engine["num_gpu_blocks"] < 35_000 and engine["block_size"] == 16


def test_out_writes_four_files_and_refuses_to_overwrite(tmp_path):
    out = tmp_path / "run"
    res = runner.invoke(app, BASE + ["--out", str(out)])
    assert res.exit_code == 0, res.output
    assert sorted(p.name for p in out.iterdir()) == ["records.json", "steps.jsonl", "summary.json", "trace.json"]
    recs = json.loads((out / "records.json").read_text())
    assert recs["metadata"]["source"] == "simulator" and len(recs["records"]) == 40
    assert "traceEvents" in json.loads((out / "trace.json").read_text())
    first = json.loads((out / "steps.jsonl").read_text().splitlines()[0])
    assert first["step"] == 0 and first["num_scheduled_tokens"] > 0
    again = runner.invoke(app, BASE + ["--out", str(out)])
    assert isinstance(again.exception, InputError) and "refusing to overwrite" in str(again.exception)
    assert runner.invoke(app, BASE + ["--out", str(out), "--force"]).exit_code == 0


def test_policy_presets_and_replicas():
    res = runner.invoke(app, BASE + ["--policy", "static", "--replicas", "2", "--router", "least_loaded", "--json"])
    assert res.exit_code == 0, res.output
    eng = json.loads(res.output)["engine"]
    assert eng["batching"] == "static" and eng["enable_prefix_caching"] is False


def test_bad_names_and_settings_are_clear_errors():
    res = runner.invoke(app, BASE + ["--trace", "azure-conversation"])
    assert isinstance(res.exception, UnknownNameError) and "azure-conv" in str(res.exception)
    res = runner.invoke(app, BASE + ["--no-enable-chunked-prefill", "--max-num-batched-tokens", "2048"])
    assert isinstance(res.exception, InputError)
    assert "max_num_batched_tokens (2048) is smaller than max_model_len" in str(res.exception)
    res = runner.invoke(app, BASE + ["--router", "random"])
    assert isinstance(res.exception, KvLedgerError) and "round_robin" in str(res.exception)


def test_console_entry_point_exits_2_without_a_traceback():
    proc = subprocess.run([sys.executable, "-m", "kvledger.cli.main", *BASE, "--replicas", "0"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "--replicas must be ≥ 1" in proc.stderr and "Traceback" not in proc.stderr


def test_experiment_quick_table():
    res = runner.invoke(app, ["experiment", "batching", "--quick", "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.output)["rows"]
    assert [r["output_cap_tokens"] for r in rows] == [32, 128, 512, 1536]
    # continuous batching's advantage grows with output-length spread (Anyscale)
    ratios = [r["continuous_over_static"] for r in rows]
    assert ratios[0] < ratios[-1] and all(x >= 1 for x in ratios)
