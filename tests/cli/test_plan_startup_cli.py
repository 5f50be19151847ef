"""A gpu_memory_utilization vLLM refuses at start-up is refused by every command that plans it (exit 3)."""

from __future__ import annotations

import pytest
from cli_run import run_cli

from kvledger.errors import DoesNotFitError

LLAMA = ("meta-llama/Llama-3.1-8B-Instruct", "--gpu", "H100-SXM", "--max-model-len", "8192")


@pytest.mark.parametrize("command", [("plan",), ("simulate", "--num-requests", "5")])
@pytest.mark.parametrize("util", ["1.0", "0.995"])
def test_utilization_above_what_is_free_does_not_start(command, util):
    # H100 SXM: 79.19 GiB total − 0.51 GiB (0.505–0.515) vLLM's process holds at its snapshot (all 27 TP 1 start-ups
    # of vLLM 0.19.0 in shared/data/vllm-startups-0.19: "Free memory on device (78.68/79.19 GiB)") = 78.68 GiB free,
    # below ceil(79.19 × 0.995) = 78.79 GiB (and the whole total at 1.0): vLLM 0.19.0's init_device raises, so the
    # plan stops with DoesNotFitError (exit 3 from the console entry)
    with pytest.raises(DoesNotFitError) as err:
        run_cli(command[0], *LLAMA, *command[1:], "--engine-version", "0.19.0", "--gpu-memory-utilization", util)
    assert err.value.exit_code == 3
    assert str(err.value).startswith("does not start: vLLM 0.19.0 refuses to start")


def test_inside_the_range_plans_with_the_warning():
    # TP 2: the process holds 1.53 GiB (1.425–2.075: the corpus's TP·PP > 1 start-ups, 1.43–2.07) by the snapshot, so
    # 0.98 asks 77.61 GiB against 77.66 GiB free at the point, 77.11–77.76 over the range: a warning, exit 0
    r = run_cli("plan", *LLAMA, "--tp", "2", "--engine-version", "0.19.0", "--gpu-memory-utilization", "0.98")
    assert r.exit_code == 0
    assert "warning: gpu_memory_utilization 0.98 asks 77.61 GiB" in r.output
    assert "may refuse to start" in r.output
