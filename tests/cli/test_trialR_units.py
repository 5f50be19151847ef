"""Trial R (one vocabulary, units that say what they hold): the defaults and provenance the help and --json state are
the ones the commands use."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvledger.cli.main import app

runner = CliRunner()
L8 = "meta-llama/Llama-3.1-8B"


def _flops_help(command: str) -> str:
    res = runner.invoke(app, [command, "--help"])
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    start = text.index("--achievable-flops-fraction")
    # the option's own text: up to the next option the commands list after it
    ends = [i for f in ("--achievable-bandwidth-fraction", "--gpu-profile") if (i := text.find(f, start)) > start]
    return text[start:min(ends)]


@pytest.mark.parametrize("command", ["fp8-kv", "spec-decode", "calibrate", "validate"])
def test_flops_fraction_help_states_the_default_that_runs(command):
    # these price a step as simulate does: 1.0 × the measured GEMM efficiency on an H100/A100, flat 0.7 elsewhere; the
    # help once said "default 0.7", and passing 0.7 switches to the flat roofline (fp8-kv: +4.9 % → +5.4 % at 512)
    text = _flops_help(command)
    assert "Default: 1.0 × the measured efficiency" in text and "0.7 elsewhere" in text
    assert "default 0.7" not in text and "else 0.7" not in text


@pytest.mark.parametrize(("gpu", "gemm", "fraction"), [("H100", "measured", 1.0), ("L40S", "flat", 0.7)])
def test_fp8_kv_default_fraction_is_the_helps(gpu, gemm, fraction):
    res = runner.invoke(app, ["fp8-kv", L8, "--gpu", gpu, "--json"])
    assert res.exit_code == 0, res.output
    step = json.loads(res.output)["step_cost"]
    assert (step["gemm_efficiency"], step["flops_fraction"]) == (gemm, fraction)


def test_validate_output_throughput_note_says_tokens():
    res = runner.invoke(app, ["validate", "distserve:vllm-300-3", "--json"])
    assert res.exit_code == 0, res.output
    rows = {r["metric"]: r for r in json.loads(res.output)["comparison"]["rows"]}
    assert rows["throughput"]["note"] == "finished requests / (last finish − first arrival)"
    out = rows["output throughput"]
    assert out["note"] == "output tokens of finished requests / (last finish − first arrival)"
    # DistServe's OPT-13B run at 3 req/s: 2.14 req/s and 378 output tok/s measured (176 tokens per request)
    assert rows["throughput"]["measured"] == pytest.approx(2.1426, abs=1e-3)
    assert out["measured"] == pytest.approx(378.01, abs=0.01)
