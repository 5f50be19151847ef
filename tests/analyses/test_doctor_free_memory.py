"""``kvledger doctor`` on vLLM's start-up refusal "Free memory on device … on startup is less than desired GPU memory
utilization": its own verdict and the --gpu-memory-utilization that fits, from the log's two printed figures.

The log: tests/fixtures/vllm_logs/constructed_v0.19_startup_free_memory_below_request.log (README there): vLLM 0.19.0
on an RTX 4090 (CUDA total 23.52 GiB) asked for 0.95 × 23.52 = 22.34 GiB with 21.05 GiB free.
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kvledger.analyses.doctor.failure_notes import utilization_that_fits
from kvledger.cli.main import app

LOG = (Path(__file__).parents[2] / "tests" / "fixtures" / "vllm_logs"
       / "constructed_v0.19_startup_free_memory_below_request.log")
runner = CliRunner()


def test_the_refusal_is_its_own_verdict_with_the_utilization_that_fits():
    res = runner.invoke(app, ["doctor", str(LOG), "--json"])
    assert res.exit_code == 1  # the server did not start
    d = json.loads(res.output)
    f = next(f for f in d["findings"] if f["name"] == "startup_failure")
    # it used to be the generic engine_core_init_failed ("read the root cause line"), with no number
    assert f["verdict"] == "free_memory_below_request"
    # 21.05 / 23.52 = 0.8950: 0.89 asks 0.89 × 23.52 = 20.93 GiB ≤ 21.05 free, 0.90 asks 21.17 > 21.05; 23.52 − 21.05
    # = 2.47 GiB in use; the KV cache loses 23.52 × (0.95 − 0.89) = 1.41 GiB
    assert "--gpu-memory-utilization 0.89 at most" in f["message"] and "(0.8950 of the device" in f["message"]
    assert "2.47 GiB in use" in f["message"] and "the KV cache gets 1.41 GiB less than at 0.95" in f["message"]


def test_the_bound_allows_for_the_printed_rounding():
    # 0.11's format (no device name); 70.00 / 80.00 = 0.875 exactly, but the free memory printed 70.00 may be 69.995:
    # (69.995) / (80.005) = 0.87488 → 0.87, the largest 2-decimal utilization the free memory surely covers
    line = ("ValueError: Free memory on device (70.0/80.0 GiB) on startup is less than desired GPU memory utilization "
            "(0.9, 72.0 GiB). Decrease GPU memory utilization or reduce GPU memory used by other processes.")
    assert utilization_that_fits(line).startswith(": --gpu-memory-utilization 0.87 at most")
    assert utilization_that_fits("ValueError: something else") == ""
