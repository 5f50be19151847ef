"""What SGLang's "Load weight end. ... mem usage" holds beyond the parameters (sglang_load.py), worked by hand and
checked against public start-ups (benchmarks/data/sglang_public_startups.csv)."""

from __future__ import annotations

from pathlib import Path

from kvledger.accounting import notes as N
from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.accounting.sglang_load import sglang_load_buffers, sglang_rank_tensors
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model

MiB, GiB = 1 << 20, 1 << 30
QWQ = str(Path(__file__).parents[2] / "benchmarks" / "data" / "configs" / "QwQ-32B.json")


def test_qwq_32b_tp4_rank_tensors_are_fused():
    # Qwen2 at TP 4 (hidden 5,120, 40 heads, 8 KV heads, head_dim 128, intermediate 27,648, vocab 152,064):
    # embedding 38,016 × 5,120 × 2 B = 371.25 MiB; q/k/v fused (1,280 + 2 × 256) × 5,120 × 2 B = 17.5 MiB and its bias
    # 1,792 × 2 B = 3,584 B; o_proj 5,120 × 1,280 × 2 B = 12.5 MiB; gate/up fused 2 × 6,912 × 5,120 × 2 B = 135 MiB
    t = sglang_rank_tensors(load_model(QWQ), 4)
    assert t[0] == int(371.25 * MiB)
    assert int(17.5 * MiB) in t and 3584 in t and int(12.5 * MiB) in t and 135 * MiB in t and int(67.5 * MiB) in t
    # 2 vocab tensors + 64 layers × (qkv, qkv bias, o, 2 norms, gate_up, down) + the final norm
    assert len(t) == 2 + 64 * 7 + 1


def test_qwq_32b_tp4_load_buffers_explain_sg01():
    # RoPE: 131,072 positions × 128 dims × 4 B (float32 from 0.4.2.post1) = 64 MiB.
    # Tails: 64 layers × (0.5 + 1.5 + 1 + 0.5) MiB = 224 MiB; embedding and lm_head 371.25 → 372 MiB, 0.75 MiB each;
    # the small pool holds 64 × (3,584 + 2 × 10,240) + 10,240 = 1,550,336 B in one 2 MiB segment, 546,816 B left.
    b = sglang_load_buffers(load_model(QWQ), 4, (0, 4, 3, 4))
    assert b.rope_bytes == 64 * MiB
    assert b.tail_bytes == 224 * MiB + int(1.5 * MiB) + 546_816
    # SG01 printed "mem usage=15.54 GB": parameters 15.2578 GiB per rank + RoPE 0.0625 + tails 0.2207 = 15.541 GiB
    m = load_model(QWQ)
    plan = build_plan(m, get_gpu("nvidia_l4"), make_settings(engine="sglang", engine_version="0.4.3.post4", tp=4),
                      with_roofline=False, with_advice=False).memory
    items = {i.name: i.bytes for i in plan.deductions}
    computed = (items["weights"] + items[N.SGLANG_ROPE_BUFFER] + items[N.SGLANG_SEGMENT_TAILS]) / GiB
    assert abs(computed - 15.54) < 0.005


def test_rope_buffer_in_model_dtype_before_0_4_2_post1():
    # 0.4.1.post7 and 0.4.2 cast cos_sin_cache to bf16: Llama-3.1-8B 131,072 × 128 × 2 B = 32 MiB; 0.4.2.post1 keeps
    # float32 (64 MiB). Llama-3.1-8B's tensors are all 2 MiB multiples; its 65 norms (8,192 B each) share one 2 MiB
    # small segment: 2,097,152 − 532,480 = 1,564,672 B of tail.
    m = load_model("meta-llama/Meta-Llama-3.1-8B")
    assert sglang_load_buffers(m, 1, (0, 4, 1, 7)).rope_bytes == 32 * MiB
    assert sglang_load_buffers(m, 1, (0, 4, 2)).rope_bytes == 32 * MiB
    assert sglang_load_buffers(m, 1, (0, 4, 2, 1)).rope_bytes == 64 * MiB
    assert sglang_load_buffers(m, 1, (0, 5, 3)).tail_bytes == 1_564_672


def test_given_weights_skip_the_computed_buffers():
    # --weights-memory is SGLang's own "mem usage", which already holds the buffers: no RoPE or tail line
    m = load_model(QWQ)
    plan = build_plan(m, get_gpu("nvidia_l4"), make_settings(engine="sglang", engine_version="0.4.3.post4", tp=4,
                                                             weights_bytes=int(15.54 * GiB)),
                      with_roofline=False, with_advice=False).memory
    names = {i.name for i in plan.deductions}
    assert N.SGLANG_ROPE_BUFFER not in names and N.SGLANG_SEGMENT_TAILS not in names


def test_rope_buffer_in_model_dtype_on_rocm():
    # rotary_embedding.py casts cos_sin_cache to the model dtype "if not _is_cuda" (is_cuda(): torch.version.cuda set,
    # None on a ROCm build), so on MI300X SGLang 0.5.x holds Llama-3.1-8B's 131,072 positions × 128 dims × 2 B (bf16)
    # = 32 MiB, where an H100 holds the float32 64 MiB; 32 MiB is a 2 MiB multiple, so the tails stay 1,564,672 B.
    m = load_model("meta-llama/Meta-Llama-3.1-8B")
    rocm = sglang_load_buffers(m, 1, (0, 5, 5), rocm=True)
    assert rocm.rope_bytes == 32 * MiB and rocm.tail_bytes == 1_564_672
    assert "× 2 B (bfloat16, cast on ROCm" in rocm.rope_how
    for gpu, rope in (("amd_mi300x", 32 * MiB), ("nvidia_h100_sxm", 64 * MiB)):
        plan = build_plan(m, get_gpu(gpu), make_settings(engine="sglang", engine_version="0.5.5"),
                          with_roofline=False, with_advice=False).memory
        assert {i.name: i.bytes for i in plan.deductions}[N.SGLANG_ROPE_BUFFER] == rope
