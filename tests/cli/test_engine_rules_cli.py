"""`kvledger simulate` with the engine rules: async scheduling by --engine-version, SGLang's scheduler, refusals."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.errors import InputError

runner = CliRunner()
BASE = ["simulate", "meta-llama/Meta-Llama-3.1-8B", "--gpu", "H100", "--num-requests", "40", "--json"]


def run(*extra):
    res = runner.invoke(app, BASE + list(extra))
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def test_async_scheduling_follows_the_engine_version():
    # vLLM 0.33 schedules asynchronously by default; 0.20 does not; the flag overrides either
    assert run()["engine"]["async_scheduling"] is True
    assert run("--engine-version", "0.20.0")["engine"]["async_scheduling"] is False
    assert run("--no-async-scheduling")["engine"]["async_scheduling"] is False
    on, off = run()["summary"], run("--no-async-scheduling")["summary"]
    # the same arrivals: every request waits one step more for its first token under async (same step prices)
    assert on["ttft_s"]["mean"] > off["ttft_s"]["mean"] and on["num_finished"] == off["num_finished"] == 40


def test_sglang_policy_runs_sglangs_scheduler_and_refuses_async():
    d = run("--policy", "sglang")
    assert d["engine"]["batching"] == "sglang" and d["engine"]["scheduling_policy"] == "fcfs"
    assert d["engine"]["async_scheduling"] is False
    res = runner.invoke(app, BASE + ["--policy", "sglang", "--async-scheduling"])
    # a clear InputError (the CLI's entry point turns it into one paragraph and exit status 2)
    assert isinstance(res.exception, InputError) and "batching='continuous'" in str(res.exception)
