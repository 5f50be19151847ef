"""A ``--trace`` file that does not exist is refused (exit 2) before any planning, in every command taking --trace:
the trial's Llama-3.1-70B at TP 1 on an H100 does not fit, and that memory error (exit 3) used to hide the missing
file."""

from __future__ import annotations

import pytest
from cli_run import refused

BIG = "meta-llama/Llama-3.1-70B"  # 70.6e9 params × 2 B = 141 GB of weights: no plan at TP 1 on an 80 GB H100


@pytest.mark.parametrize("command", [
    ["simulate", BIG, "--gpu", "H100"],
    ["goodput", "--slo", "ttft=2s", "--simulate", BIG, "--gpu", "H100"],
    ["goodput", "--slo", "ttft=2s", "--target", "0.9", "--simulate", BIG, "--gpu", "H100"],
    ["cost", "--simulate", BIG, "--gpu", "H100", "--slo", "ttft=2s"],
    ["search", BIG, "--gpus", "H100", "--tp", "1", "--slo", "ttft=2s,tpot=50ms", "--rate", "1"],
    ["report", BIG, "--gpu", "H100", "--slo", "ttft=2s"],
    ["disagg", BIG, "--gpu", "H100"],
])
def test_a_missing_trace_file_is_named_before_any_plan(command, tmp_path):
    missing = str(tmp_path / "nope.csv")
    assert refused(*command, "--trace", missing) == f"trace file {missing!r} not found"
