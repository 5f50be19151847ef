"""A batch of small user-facing fixes: each test fails before its fix."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvledger.cli.main import app

runner = CliRunner()


def test_report_json_writes_no_default_html(tmp_path, monkeypatch):
    # `kvledger report ... --json` prints the data and writes nothing unless --out/--png is given: the default
    # kvledger-report.html of a user who already has one is neither written nor refused over
    monkeypatch.chdir(tmp_path)
    res = runner.invoke(app, ["report", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--slo", "ttft=200ms,tpot=50ms",
                              "--api", "OpenAI:gpt-4.1", "--num-requests", "60", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["plan"]["kv"]["bytes_per_token_per_gpu"] == 131072  # 2 × 32 layers × 8 KV heads × 128 × 2 B
    assert list(tmp_path.iterdir()) == []


def test_report_json_with_out_writes_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = runner.invoke(app, ["report", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--slo", "ttft=200ms,tpot=50ms",
                              "--api", "OpenAI:gpt-4.1", "--num-requests", "60", "--json", "--out", "mine.html"])
    assert res.exit_code == 0, res.output
    json.loads(res.stdout)
    assert [p.name for p in tmp_path.iterdir()] == ["mine.html"]
    assert (tmp_path / "mine.html").read_text().startswith("<!")


def _into_closed_pipe(args: list[str], stderr_too: bool = False):
    # stdout is a pipe whose reader has already gone (`kvledger plan … | head -1` once head has its line): every
    # write fails with EPIPE, deterministically (a live `head` may take the whole output before it closes)
    import os
    import subprocess
    import sys

    r, w = os.pipe()
    os.close(r)
    code = f"import sys; sys.argv = ['kvledger', *{args!r}]\nfrom kvledger.cli.main import main\nmain()\n"
    try:
        return subprocess.run([sys.executable, "-c", code], stdout=w, stderr=w if stderr_too else subprocess.PIPE,
                              text=True, timeout=120)
    finally:
        os.close(w)


L8 = "meta-llama/Llama-3.1-8B"


@pytest.mark.parametrize("args", [["plan", L8, "--gpu", "H100"],  # rich's console (it raised SystemExit(1))
                                  ["plan", L8, "--gpu", "H100", "--json"],  # typer.echo
                                  ["simulate", L8, "--gpu", "H100", "--num-requests", "30"]])  # the quick path
def test_reader_that_stops_reading_is_status_0_and_quiet(args):
    res = _into_closed_pipe(args)
    assert (res.returncode, res.stderr) == (0, "")


@pytest.mark.parametrize(("args", "status"), [
    # 0.2 of an H100 holds less than the 8B's 16.06 GB of weights: "does not fit", exit 3 (rich's console, then JSON)
    (["plan", L8, "--gpu", "H100", "--gpu-memory-utilization", "0.2"], 3),
    (["plan", L8, "--gpu", "H100", "--gpu-memory-utilization", "0.2", "--json"], 3),
    # a server that died serving (the log's CUDA OOM after start-up): exit 1, as without the pipe
    (["doctor", "tests/fixtures/vllm_logs/constructed_v1_oom_while_serving.log"], 1),
    # every 50,000-token prompt is above the default max_model_len of 8,192 set here: none finishes, exit 1 (quick path)
    (["simulate", L8, "--gpu", "H100", "--max-model-len", "8192", "--prompt-lengths", "fixed:50000",
      "--output-lengths", "fixed:10", "--rate", "1", "--num-requests", "5"], 1)])
def test_reader_that_stops_reading_keeps_the_answers_status(args, status):
    # `plan … | head -1` under `set -o pipefail` must not read "does not fit" or "server died" as a success: the
    # status each command declared for its answer before writing it survives the closed pipe (a fresh-user trial
    # got 0 for all three)
    res = _into_closed_pipe(args)
    assert (res.returncode, res.stderr) == (status, "")


@pytest.mark.parametrize("args", [["goodput", "x.json", "--slo", "ttft=abc"],  # kvledger's own error (bad SLO)
                                  ["plan", L8, "--gpu", "H100", "--bogus"]])  # click's usage error
def test_an_error_said_into_a_closed_pipe_keeps_status_2(args):
    # `kvledger … 2>&1 | head -0`: the error line itself cannot be written; the status is still the error's, 2
    assert _into_closed_pipe(args, stderr_too=True).returncode == 2


def test_broken_pipe_keeps_an_errors_status():
    # an unknown model with --json: the error line on stderr, its JSON object to the closed pipe; the status stays 2
    res = _into_closed_pipe(["plan", "llama-3.1-8", "--gpu", "h100", "--json"])
    assert res.returncode == 2
    assert res.stderr.startswith("error: unknown model 'llama-3.1-8'") and "Traceback" not in res.stderr


def test_models_state_per_seq_is_the_plans():
    # Nemotron-H-56B: 54 Mamba-2 layers, each 61,440 conv elements (model dtype, 2 B) and 4,194,304 SSM elements
    # that vLLM keeps in float32 (4 B; the Nemotron-H config hook): 54 × (61,440 × 2 + 4,194,304 × 4) =
    # 912,605,184 B per sequence at TP 1 (the table read every element at 2 B: 459,620,352)
    nem = "nvidia/Nemotron-H-56B-Base-8K"
    rows = json.loads(runner.invoke(app, ["models", "--json"]).stdout)
    row = next(r for r in rows if r["hf_id"] == nem)
    assert row["state_bytes_per_seq"] == 912_605_184
    plan = json.loads(runner.invoke(app, ["plan", nem, "--gpu", "H100", "--json"]).stdout)
    assert plan["kv"]["state_bytes_per_seq_per_gpu"] == row["state_bytes_per_seq"]
    res = runner.invoke(app, ["models"], env={"COLUMNS": "200"})
    line = next(x for x in res.stdout.splitlines() if nem in x)
    assert "870.3 MiB" in line  # 912,605,184 / 2**20


def test_engine_version_before_0_5_says_what_to_pass():
    # a run record naming 0.2.3 is replayed under 0.5.0's rules, every step eager (CUDA graphs came in 0.2.4): the
    # refusal of --engine-version 0.2.3 names those flags, and the line they make runs
    res = runner.invoke(app, ["plan", L8, "--gpu", "A100", "--engine-version", "0.2.3"])
    assert type(res.exception).__name__ == "InputError"  # exit 2 from the console script (main.run)
    msg = str(res.exception)
    assert msg.startswith("vLLM 0.2.3 predates the rules this tool models (0.5 onwards): pass --engine-version 0.5.0 "
                          "--enforce-eager (0.2.3 had no CUDA graphs: they came in 0.2.4)")
    res = runner.invoke(app, ["plan", L8, "--gpu", "A100", "--engine-version", "0.4.2"])
    assert "pass --engine-version 0.5.0 to apply" in str(res.exception) and "--enforce-eager" not in str(res.exception)
    ok = runner.invoke(app, ["plan", L8, "--gpu", "A100", "--engine-version", "0.5.0", "--enforce-eager", "--json"])
    assert ok.exit_code == 0 and json.loads(ok.stdout)["settings"]["engine_version"] == "0.5.0"


def test_models_flags_sliding_window_models_whose_per_token_figure_is_the_worst_case():
    # gpt-oss-120b: 36 layers, 8 KV heads × 64 head_dim × 2 (K,V) × 2 B = 2,048 B per layer per token, 73,728 B over
    # all 36 — but its 18 sliding-window layers hold at most 128 tokens, so past them a request grows by the 18 full
    # layers' 18 × 2,048 = 36,864 B/token; the table marks the figure (†) and says so
    rows = json.loads(runner.invoke(app, ["models", "--json"]).stdout)
    row = next(r for r in rows if r["hf_id"] == "openai/gpt-oss-120b")
    assert (row["kv_bytes_per_token"], row["windowed_layers"], row["window_tokens"],
            row["growing_bytes_per_token"]) == (73_728, 18, 128, 36_864)
    assert "windowed_layers" not in next(r for r in rows if r["hf_id"] == "meta-llama/Meta-Llama-3.1-8B")
    out = runner.invoke(app, ["models"], env={"COLUMNS": "200"}).stdout
    assert "73,728†" in next(x for x in out.splitlines() if "openai/gpt-oss-120b" in x)
    assert "131,072†" not in next(x for x in out.splitlines() if "meta-llama/Meta-Llama-3.1-8B " in x)
    flat = " ".join(out.split())
    assert ("†: some or all layers are sliding-window or chunked — the figure counts every KV layer for each token, "
            "the full-attention worst case") in flat
    assert "openai/gpt-oss-120b: 18 layers hold at most 128 tokens; past that a request grows by 36,864 B/token" in flat
