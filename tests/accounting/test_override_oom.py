"""--num-gpu-blocks-override past the memory the GPU has: vLLM zero-fills the override's blocks after the profile
(``torch.zeros`` of num_blocks × bytes per block: 0.28.0's ``GPUModelRunner._allocate_kv_cache_tensors``, 0.29.0's
``v1/worker/utils.py : allocate_kv_cache``), and from 0.21 its start-up check plans against the override too, so an
override larger than the device can hold runs out of CUDA memory at allocation."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model
from kvledger.cli.main import app
from kvledger.errors import DoesNotFitError
from kvledger.units import GiB

# Qwen3-8B: 36 layers × 2 (K, V) × 8 KV heads × 128 head_dim × 2 B (bf16) = 147,456 B a token; × 16 = 2,359,296 B a
# block (config.json of the bundled model).
BYTES_PER_BLOCK = 36 * 2 * 8 * 128 * 2 * 16


def _plan(override: int):
    s = make_settings(engine_version="0.28.0", num_gpu_blocks_override=override)
    return build_plan(load_model("Qwen/Qwen3-8B"), get_gpu("H100"), s)


def test_an_override_past_the_device_does_not_fit_and_names_the_largest_that_does():
    p = _plan(50_000)
    m = p.memory
    assert m.bytes_per_block == BYTES_PER_BLOCK == 2_359_296
    asked = 50_000 * BYTES_PER_BLOCK  # 117,964,800,000 B = 109.86 GiB
    # the most the allocation can take: the budget's KV bytes + the device total outside gpu_memory_utilization
    free = m.available_kv_bytes + m.gpu_total_bytes - m.requested_bytes
    assert 60 * GiB < free < 66 * GiB  # 79.19 GiB less 15.3 GiB of weights and the activation/non-torch terms
    assert p.advice.verdict == "override_out_of_memory"
    assert p.advice.shortfall_bytes == asked - free
    assert "asks 109.86 GiB of KV cache (50,000 × 2,359,296 B a block)" in p.advice.message
    assert f"At most --num-gpu-blocks-override {free // BYTES_PER_BLOCK:,} can be allocated" in p.advice.message
    assert f"{m.available_kv_bytes // BYTES_PER_BLOCK:,} within the budget" in p.advice.message


def test_an_override_between_the_budget_and_the_device_fits_with_a_note():
    p = _plan(50_000)
    m = p.memory
    budget_blocks = m.available_kv_bytes // BYTES_PER_BLOCK
    free_blocks = (m.available_kv_bytes + m.gpu_total_bytes - m.requested_bytes) // BYTES_PER_BLOCK
    between = (budget_blocks + free_blocks) // 2
    q = _plan(between)
    assert q.advice.verdict == "fits"
    extra = (between * BYTES_PER_BLOCK - q.memory.available_kv_bytes) / GiB
    assert f"{extra:.2f} GiB more than the gpu_memory_utilization 0.92 budget" in q.advice.message
    within = _plan(budget_blocks)  # inside the budget: no note
    assert within.advice.verdict == "fits" and "more than the" not in within.advice.message


def test_simulate_refuses_an_override_past_the_device_with_exit_3():
    argv = ["simulate", "Qwen/Qwen3-8B", "--gpu", "H100", "--engine-version", "0.28.0", "--num-gpu-blocks-override",
            "50000", "--num-requests", "20"]
    with pytest.raises(DoesNotFitError) as err:  # the console entry prints it and exits 3, as plan does
        CliRunner().invoke(app, argv, catch_exceptions=False)
    assert "runs out of CUDA memory; short by 47.05 GiB" in str(err.value)


def test_the_summary_says_the_block_count_is_the_overrides_not_what_the_budget_holds():
    from kvledger.report.plan_summary import summary_lines

    # without the override, vLLM 0.28 on the H100 plans 56.47 GiB of KV = 25,701 blocks of 2,359,296 B; the summary
    # printed 'available KV 56.47 GiB … → 50,000 blocks', a count those 56.47 GiB cannot hold (50,000 blocks are
    # 109.86 GiB)
    budget = _plan(None).memory.num_gpu_blocks
    assert budget == _plan(50_000).memory.available_kv_bytes // BYTES_PER_BLOCK == 25_701
    line = next(x for x in summary_lines(_plan(50_000)) if x.startswith("memory per GPU"))
    assert line.endswith("→ 50,000 blocks of 16 tokens set by --num-gpu-blocks-override (the budget holds 25,701)")
