"""A gpu_memory_utilization vLLM refuses at start-up is refused by every command that plans it (exit 3)."""

from __future__ import annotations

import pytest
from cli_run import run_cli

from kvledger.errors import DoesNotFitError

LLAMA = ("meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM", "--max-model-len", "8192")


@pytest.mark.parametrize("command", [("plan",), ("simulate", "--num-requests", "5")])
def test_utilization_1_does_not_start(command):
    # H100 SXM: 79.19 GiB total − 0.13 GiB at least (the CUDA context) is free at vLLM's snapshot, below ceil(79.19 ×
    # 1.0): vLLM 0.19.0's init_device raises, so the plan stops with DoesNotFitError (exit 3 from the console entry)
    with pytest.raises(DoesNotFitError) as err:
        run_cli(command[0], *LLAMA, *command[1:], "--engine-version", "0.19.0", "--gpu-memory-utilization", "1.0")
    assert err.value.exit_code == 3
    assert str(err.value).startswith("does not start: vLLM 0.19.0 refuses to start")


def test_inside_the_range_plans_with_the_warning():
    # 0.995 asks 78.79 GiB: free at the snapshot is 78.77 GiB at the plan's point, 78.44–79.06 over the process's
    # 0.13–0.75 GiB: a warning, exit 0
    r = run_cli("plan", *LLAMA, "--engine-version", "0.19.0", "--gpu-memory-utilization", "0.995")
    assert r.exit_code == 0
    assert "warning: gpu_memory_utilization 0.995 asks 78.79 GiB" in r.output
    assert "may refuse to start" in r.output
