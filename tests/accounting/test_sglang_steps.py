"""SGLang 0.5.23's decode CUDA-graph padding, torch.compile sizes and the padded step price, worked by hand; 0.4.0 and
0.4.0.post1's capture lists (``--engine-version``)."""

from __future__ import annotations

import pytest

from kvledger.accounting.kvcache import kv_ledger
from kvledger.accounting.roofline import RooflineStepCost
from kvledger.accounting.roofline_breakdown import decode_shape
from kvledger.accounting.sglang_rules import sglang_version_defaults
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


def test_sglang_040_captures_up_to_160_on_an_h200_at_tp4():
    # SGLang 0.4.0 server_args.py __post_init__ on an H200 (nvidia-smi 143,771 MiB, not below 25,000) at TP 4:
    # cuda_graph_max_bs 160, chunked_prefill_size 8,192, mem_fraction_static 0.85 (TP 4–7); cuda_graph_runner.py
    # captures [1, 2, 4] + [8, 16, …, 160] (i × 8 for i in 1..20): 23 sizes, none above 160
    g = get_gpu("H200")
    d = sglang_version_defaults((0, 4, 0), g.nvidia_smi_mib, 4)
    assert (d.cuda_graph_max_bs, d.chunked_prefill_size, d.mem_fraction_static) == (160, 8192, 0.85)
    sizes, src = sglang_capture_sizes(g, 4, 1, "0.4.0")
    assert sizes == (1, 2, 4, *range(8, 161, 8)) and len(sizes) == 23
    assert "SGLang 0.4.0" in src and "cuda_graph_max_bs 160" in src and "cuda_graph_runner.py" in src
    # 150 replays the graph of 152; 161 is above the largest and runs eager, unpadded. 0.5.23 on the same GPU and TP
    # captures to 512 (memory_hook.py), so its 161 pads to 168 (16..256 by 8)
    assert padded_decode_batch(150, sizes) == 152 and padded_decode_batch(161, sizes) == 161
    latest, _ = sglang_capture_sizes(g, 4, 1, None)
    assert latest[-1] == 512 and padded_decode_batch(161, latest) == 168


def test_sglang_04_request_pool_bounds_the_sizes():
    # --max-running-requests 100: the request pool holds 101 (model_runner.py init_memory_pool: max_num_reqs + 1).
    # 0.4.0 drops the sizes above it (104 … 160): ends at 96. 0.4.0.post1 (and 0.4.1) first adds the pool's size and
    # one less (the
    # list's 160 overshoots 101), then drops the rest: …, 96, 100, 101
    g = get_gpu("H200")
    assert sglang_capture_sizes(g, 4, 1, "0.4.0", 100)[0][-2:] == (88, 96)
    assert sglang_capture_sizes(g, 4, 1, "0.4.0.post1", 100)[0][-3:] == (96, 100, 101)
    assert sglang_capture_sizes(g, 4, 1, "0.4.1", 100)[0][-3:] == (96, 100, 101)
    # 0.4.6 changed the list (and 0.4.9, 0.5.3 again): not modelled, so no padding for 0.4.6–0.5.22
    assert sglang_capture_sizes(g, 4, 1, "0.4.6") is None and sglang_capture_sizes(g, 4, 1, "0.5.22") is None
    # below 25,000 MiB (a 24 GB card at 24,564 MiB) 0.4.0 sets 8 graphs at any TP; 0.4.0.post1 on, 80 at TP ≥ 4
    assert sglang_version_defaults((0, 4, 0), 24_564, 4).cuda_graph_max_bs == 8
    assert sglang_version_defaults((0, 4, 0, 1), 24_564, 4).cuda_graph_max_bs == 80
    assert sglang_version_defaults((0, 4, 1), 24_564, 2).cuda_graph_max_bs == 8


def test_045_post3_capture_list_not_replayed():
    # 0.4.5.post2's cuda_graph_runner.py lists [1, 2, 4] + 8…160 by 8 (the 0.4.0 list, padded to); 0.4.5.post3's lists
    # by GPU memory as 0.4.6 does, so the replay leaves its decode batches unpadded (None), as for 0.4.6
    g = get_gpu("H200")
    sizes, _ = sglang_capture_sizes(g, 8, 1, "0.4.5.post2")
    assert sizes[:4] == (1, 2, 4, 8) and sizes[-1] == 160
    assert sglang_capture_sizes(g, 8, 1, "0.4.5.post3") is None
