"""SGLang 0.5.23's decode CUDA-graph padding, torch.compile sizes and the padded step price, worked by hand."""

from __future__ import annotations

import pytest

from kvledger.accounting.kvcache import kv_ledger
from kvledger.accounting.roofline import RooflineStepCost
from kvledger.accounting.roofline_breakdown import decode_shape
from kvledger.accounting.sglang_steps import (
    GraphPaddedStepCost,
    decode_capture_sizes,
    padded_decode_batch,
    sglang_capture_sizes,
    torch_compile_sizes,
)
from kvledger.accounting.stepcost import StepShape
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model


def test_capture_sizes_and_padding():
    # cuda_graph_hook.py: [1, 2, 4, 8, 12] + 16..256 by 8 (31 sizes) = 36 sizes at cuda_graph_max_bs 256 (H100, TP 1).
    sizes = decode_capture_sizes(256)
    assert len(sizes) == 36 and sizes[:8] == (1, 2, 4, 8, 12, 16, 24, 32) and sizes[-1] == 256
    assert padded_decode_batch(37, sizes) == 40  # the next captured size
    assert padded_decode_batch(9, sizes) == 12 and padded_decode_batch(40, sizes) == 40
    assert padded_decode_batch(257, sizes) == 257  # above the largest: eager, unpadded
    # max_bs 512 (TP ≥ 4): 272..496 by 16, then 512: a batch of 500 runs at 512
    assert padded_decode_batch(500, decode_capture_sizes(512)) == 512
    # max_bs 48 (a 24 GiB GPU at TP < 4): ..., 40, 48
    assert decode_capture_sizes(48) == (1, 2, 4, 8, 12, 16, 24, 32, 40, 48)
    # speculative decoding: 1..8, then by 2 to 32: 9 runs at 10 (12 without)
    assert padded_decode_batch(9, decode_capture_sizes(256, speculative=True)) == 10
    # a request pool of 100: sizes above it dropped, 100 added (get_batch_sizes_to_capture): 97 → 100
    assert padded_decode_batch(97, decode_capture_sizes(256, pool_requests=100)) == 100
    # --enable-torch-compile compiles the sizes up to torch_compile_max_bs 32
    assert torch_compile_sizes(sizes) == (1, 2, 4, 8, 12, 16, 24, 32)


def test_default_sizes_follow_the_gpu_memory_tier():
    # H100 (80 GiB, TP 1): cuda_graph_max_bs 256; older releases' lists were not read
    sizes, src = sglang_capture_sizes(get_gpu("H100-SXM"), 1, 1, None)
    assert sizes[-1] == 256 and "0.5.23" in src
    assert sglang_capture_sizes(get_gpu("H100-SXM"), 1, 1, "0.5.10") is None


def test_padded_decode_step_by_hand():
    # Llama-3.1-8B on an H100 SXM (3.35 TB/s at 80%), TP 1, bf16 KV: 131,072 B per token. A decode batch of 37 at
    # 1,024 tokens runs at 40: three padding rows, each attending 1 token. The step stays bandwidth-bound
    # (40 rows × 2 × 6.98e9 matmul params = 5.6e11 FLOP = 0.81 ms at 70% of 989.5 TFLOP/s, under 15.0 GB of weights
    # ÷ 2.68e12 B/s = 5.6 ms), so the padding adds only 3 × 131,072 B = 393,216 B of KV: 1.467e-7 s.
    m, g = load_model("meta-llama/Llama-3.1-8B"), get_gpu("H100-SXM")
    rc = RooflineStepCost(m, g, kv_ledger(m, "auto", 1), 1)
    padded = GraphPaddedStepCost(rc, decode_capture_sizes(256))
    t = padded.step_time_s(decode_shape(37, 1024))
    assert t == rc.step_time_s(StepShape(num_decode_seqs=40, decode_kv_tokens=37 * 1024 + 3))
    assert t - rc.step_time_s(decode_shape(37, 1024)) == pytest.approx(393_216 / (3.35e12 * 0.8))
    # a prefill step is not padded; a stretch of decode steps prices each step as the step alone does, bit for bit
    pf = StepShape(num_prefill_tokens=512, num_prefill_seqs=1, prefill_kv_tokens=512, prefill_attn_pairs=131_328)
    assert padded.step_time_s(pf) == rc.step_time_s(pf)
    for n_steps in (5, 200):
        assert padded.decode_steps_list(37, 37 * 1024, n_steps) == [
            padded.step_time_s(StepShape(num_decode_seqs=37, decode_kv_tokens=37 * 1024 + 37 * i))
            for i in range(n_steps)]


def test_running_cap_and_request_pool_bound_the_sizes():
    # --max-running-requests 64 caps the default cuda_graph_max_bs 256 (memory_hook.py): sizes end at 64; a request
    # pool of 60 (the resolved max_running_requests) drops 64 and adds 60 (get_batch_sizes_to_capture): 57 → 60
    sizes, _ = sglang_capture_sizes(get_gpu("H100-SXM"), 1, 1, None, 64)
    assert sizes[-3:] == (48, 56, 64)
    sizes, _ = sglang_capture_sizes(get_gpu("H100-SXM"), 1, 1, None, 64, 60)
    assert sizes[-2:] == (56, 60) and padded_decode_batch(57, sizes) == 60
