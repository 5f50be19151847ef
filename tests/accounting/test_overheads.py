"""The fitted activation-peak model against the public H100 start-up logs it was fitted on."""

from __future__ import annotations

import csv
from importlib import resources
from pathlib import Path

import pytest

from kvledger.accounting.overheads import (
    SAMPLER_FP32_COPIES,
    activation_peak_bytes,
    cudagraph_capture_sizes,
    fit_sampler_copies,
)
from kvledger.catalog.models import load_model
from kvledger.units import GiB

CONFIGS = {"meta-llama/Llama-3.1-8B-Instruct": "meta-llama/Llama-3.1-8B-Instruct",
           "openai/gpt-oss-20b": "openai/gpt-oss-20b",
           "Qwen/Qwen3-0.6B": str(Path(__file__).parents[1] / "fixtures" / "configs" / "Qwen3-0.6B.json")}


def rows():
    with (resources.files("kvledger.catalog") / "data" / "vllm_memory_observations.csv").open() as fh:
        return [(load_model(CONFIGS[r["model"]]), float(r["peak_activation_gib"]) * GiB, 8192,
                 1024) for r in csv.DictReader(fh)]


def test_constant_is_the_least_squares_fit_of_the_logs():
    # All three runs used vLLM's H100 server defaults: 8,192 batched tokens, 1,024 sequences.
    assert fit_sampler_copies(rows()) == pytest.approx(SAMPLER_FP32_COPIES, abs=0.005)


def test_each_log_reproduced_within_0_02_gib():
    for model, peak, mnbt, seqs in rows():
        est, src = activation_peak_bytes(model, mnbt, seqs)
        assert abs(est - peak) / GiB <= 0.02 and "sampler" in src


def test_fewer_sequences_shrink_the_sampler_peak():
    # 256 sequences: 9.57 × 256 × 128,256 × 4 B + 8,192 × 4,096 × 2 B = 1.17 + 0.06 GiB.
    est, _ = activation_peak_bytes(load_model("meta-llama/Llama-3.1-8B"), 8192, 256)
    assert est / GiB == pytest.approx(9.57 * 256 * 128_256 * 4 / GiB + 0.0625, abs=1e-6)


def test_capture_sizes():
    # vLLM default list up to min(2 × 1,024, 512): 1, 2, 4, 8..248 step 8 (31), 256..512 step 16 (17) = 51 sizes.
    sizes = cudagraph_capture_sizes(1024, 8192)
    assert len(sizes) == 51 and sizes[:4] == [1, 2, 4, 8] and sizes[-1] == 512
    assert cudagraph_capture_sizes(4, 8192) == [1, 2, 4, 8]
