"""``kvledger search``'s defects found by a fresh-user trial: two outputs on one file, the error line under
``| head -1``, duplicate KV dtype spellings, the API verdict's lead, a --plot not written, the CSV's order and
columns, and the smaller input checks."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.errors import InputError

runner = CliRunner()
S8 = ["search", "meta-llama/Llama-3.1-8B", "--slo", "ttft=300ms,tpot=40ms", "--num-requests", "200", "--rate", "5",
      "--gpus", "H100", "--tp", "1", "--max-model-len", "16K"]


@pytest.mark.parametrize("first, second, name", [
    ("--ledger", "--csv", "x.csv"), ("--csv", "--plot", "y.png"), ("--resume", "--csv", "r.jsonl")])
def test_two_outputs_on_one_file_are_refused_before_any_work(tmp_path, monkeypatch, first, second, name):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "r.jsonl").write_text("")  # --resume must name an existing file
    # ./NAME and NAME resolve to one file: the second flag's spelling differs, the file does not
    res = runner.invoke(app, [*S8, first, name, second, f"./{name}"])
    assert isinstance(res.exception, InputError), res.output
    assert str(res.exception) == (f"{first} and {second} both name {name}: each writes its own file, so one would "
                                  "replace the other; give them different file names.")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["r.jsonl"]  # nothing written


def test_the_error_line_of_exit_2_is_said_before_a_reader_that_stopped_reading_ends_it():
    # `| head -1` with the reader gone before the first line: the stdout write fails (EPIPE) and ends the process, so
    # the stderr line must come before the output; the status stays the answer's (2: --tp 3 divides none of
    # Llama-3.1-8B's 32 heads, every candidate an invalid setting)
    import subprocess
    import sys

    argv = [sys.executable, "-m", "kvledger.cli.main", "search", "meta-llama/Llama-3.1-8B", "--slo",
            "ttft=200ms,tpot=50ms", "--gpus", "H100", "--tp", "3", "--rate", "10", "--num-requests", "60"]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # the reader is gone before the command has written anything
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=300) == 2
    assert err.startswith("error: every candidate was refused as an invalid setting "
                          "(e.g. nvidia_h100_sxm:tp3:kv-auto: --tp 3: ")
    assert "Traceback" not in err


@pytest.mark.parametrize("kv, ids", [
    ("auto,auto", ["kv-auto"]),
    ("auto,bf16", ["kv-auto"]),  # Llama-3.1-8B is bfloat16: auto is bf16
    ("fp8,fp8_e4m3", ["kv-fp8"]),  # vLLM's fp8 is e4m3 on CUDA
    ("bf16,fp8,bfloat16,auto,fp8_e4m3", ["kv-bf16", "kv-fp8"]),  # the first spelling of each kept, in order
])
def test_one_kv_cache_spelled_twice_is_one_candidate(kv, ids):
    from kvledger.analyses.search.spec import Axes, make_candidates
    from kvledger.catalog.models import load_model

    model = load_model("meta-llama/Llama-3.1-8B")
    cands = make_candidates(Axes(gpus=("H100",), tps=(1,), kv_cache_dtypes=tuple(kv.split(","))), 8, model=model)
    assert [c.id for c in cands] == [f"nvidia_h100_sxm:tp1:{i}" for i in ids]


def test_a_sparse_attention_model_keeps_fp8_and_fp8_e4m3_apart():
    # vLLM picks DeepSeek-V3.2's sparse MLA backend by the name (fp8 and fp8_e4m3 differ on SM90): only exact repeats go
    import json
    from pathlib import Path

    from kvledger.analyses.search.kv_axis import kv_dtype_axis
    from kvledger.catalog.modelspec import parse_config

    config = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "oracle_configs" / "deepseek_v32.json"
    model = parse_config(json.loads(config.read_text()), source="deepseek_v32")
    assert kv_dtype_axis(("fp8", "fp8_e4m3", "fp8", "auto", "bf16"), model) == ("fp8", "fp8_e4m3", "auto", "bf16")


@pytest.mark.parametrize("args, status, why", [
    # TTFT 5 ms: an 8B prefill of the workload's prompts takes longer on an H100 alone, so nothing meets the SLO
    # (exit 1: no answer meets the target, as goodput --target and cost end)
    (["--slo", "ttft=5ms,tpot=1ms", "--gpus", "H100"], 1, "no candidate meets the SLO or could be evaluated"),
    # 70B in bf16 is ~141 GB of weights, above an L4's 24 GB at TP 1: nothing can start (exit 3)
    (["--slo", "ttft=300ms,tpot=40ms", "--gpus", "L4", "70B"], 3, "no candidate can start (every one rejected for "
                                                                   "memory)"),
])
def test_a_plot_with_nothing_ranked_is_said_not_written(tmp_path, args, status, why):
    model = "meta-llama/Llama-3.1-70B" if "70B" in args else "meta-llama/Llama-3.1-8B"
    plot = tmp_path / "f.png"
    res = runner.invoke(app, ["search", model, *[a for a in args if a != "70B"], "--tp", "1", "--max-model-len", "16K",
                              "--num-requests", "200", "--rate", "5", "--plot", str(plot)])
    assert res.exit_code == status, res.output
    assert not plot.exists()
    assert f"note: --plot {plot} not written: {why}, so there is no ranking or frontier to draw." in res.stderr


def test_csv_rows_in_rank_order_with_the_settings_run_and_the_tier_bill(tmp_path):
    import csv

    out = tmp_path / "c.csv"
    res = runner.invoke(app, ["search", "meta-llama/Llama-3.1-8B", "--slo", "ttft=300ms,tpot=40ms", "--num-requests",
                              "200", "--rate", "5", "--gpus", "T4,H100", "--tp", "1", "--max-model-len", "16K",
                              "--offload", "none,cpu:256GiB", "--csv", str(out)])
    assert res.exit_code == 0, res.output
    rows = list(csv.DictReader(out.open()))
    # ranked first in rank order, then the T4 (16 GB: 8B's bf16 weights leave no KV cache), though the ledger has it
    # first (--gpus T4,H100)
    assert [(r["rank"], r["id"]) for r in rows] == [
        ("1", "nvidia_h100_sxm:tp1:kv-auto"), ("2", "nvidia_h100_sxm:tp1:kv-auto:offload-cpu-256GiB"),
        ("", "nvidia_t4:tp1:kv-auto")]
    # vLLM's defaults on an H100, as the launch line passes them (--max-num-seqs 1024 --max-num-batched-tokens 8192);
    # prefix caching on (vLLM's default for plain attention, what the simulator ran)
    assert {(r["max_num_seqs"], r["max_num_batched_tokens"], r["enable_prefix_caching"]) for r in rows[:2]} == {
        ("1024", "8192", "True")}
    # GPUs × $/GPU-h × 730 h + KV tier = monthly: 1 × 2.69 × 730 = 1,963.70, + 0 colocated, + the CPU tier: 256 GiB ×
    # $0.48/GiB-month (tier_prices.csv, DDR5 RDIMM bought, 36 months) = $122.88 offloaded
    for r in rows[:2]:
        gpus = int(r["num_gpus"]) * float(r["usd_per_gpu_hour"]) * 730
        assert gpus + float(r["kv_tier_usd_per_month"]) == pytest.approx(float(r["rental_usd_per_month"]))
    assert [r["kv_tier_usd_per_month"] for r in rows] == ["0.0", "122.88", ""]


@pytest.mark.parametrize("extra, message", [
    # left out, --gpus means every priced GPU; an empty list must not mean it too
    (["--gpus", ""], "--gpus '' names no value; give at least one, comma-separated (e.g. --gpus H100,L40S), or "
                     "leave --gpus out for its default"),
    (["--gpus", "H100", "--kv-cache-dtype", ","], "--kv-cache-dtype ',' names no value; give at least one"),
    (["--gpus", "H100", "--workers", "2", "--backend", "serial"],
     "--workers 2 with --backend serial: serial runs one capacity search at a time, in process; drop --workers, or "
     "use --backend pool (or auto) to run 2 at once"),
])
def test_an_empty_list_and_workers_for_the_serial_backend_are_refused(extra, message):
    res = runner.invoke(app, [*S8[:8], "--tp", "1", "--max-model-len", "16K", *extra])  # S8 without its --gpus
    assert isinstance(res.exception, InputError), res.output
    assert str(res.exception).startswith(message)


@pytest.mark.parametrize("kind, words", [("dir", "is a folder"), ("dev", "is not a regular file"),
                                         ("none", "no such file")])
def test_resume_names_what_is_wrong_with_the_path(tmp_path, kind, words):
    path = {"dir": str(tmp_path), "dev": "/dev/null", "none": str(tmp_path / "gone.jsonl")}[kind]
    res = runner.invoke(app, [*S8, "--resume", path])
    assert isinstance(res.exception, InputError), res.output
    assert str(res.exception) == (f"--resume {path}: {words}; give the ledger file of the search to continue (the "
                                  "FILE its --ledger wrote)")


def test_the_footnote_says_which_good_rate_is_which_json_field():
    import json

    res = runner.invoke(app, S8, env={"COLUMNS": "250"})
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert ("the good req/s there, offered × attainment, is goodput_req_per_s in --json, what the cost is priced at, "
            "as cost --simulate's; its goodput_at_boundary_req_per_s counts the probe from first arrival to last "
            "finish, the drain included, so it can be lower") in text
    cap = json.loads(runner.invoke(app, [*S8, "--json"]).stdout)["candidates"][0]["capacity"]
    # the winner line's "(14.50 good req/s there)": 14.5 req/s offered × attainment 1.0; the drain-inclusive goodput
    # of the same probe is below it
    assert f"({cap['goodput_req_per_s']:.2f} good req/s there)" in text
    assert cap["sustained_good_req_per_s_at_boundary"] is None  # no bound binds: it is goodput_req_per_s, not repeated
    assert cap["goodput_req_per_s"] == pytest.approx(cap["slo_capacity_req_per_s"] * cap["attainment"])
    assert cap["goodput_at_boundary_req_per_s"] < cap["goodput_req_per_s"]
