"""Roofline terms that follow how vLLM executes a step: tied LM head, attention dtype, MLA prefill path, split
attention kernels, TP all-reduce, measured weight bytes and CPU overlap. Check values from the engine audit's
``roofline_checks.py`` / ``tp_comm.py`` arithmetic, redone here."""

from __future__ import annotations

import numpy as np
import pytest

from kvledger.accounting.plan import build_plan
from kvledger.accounting.roofline import RooflineStepCost
from kvledger.accounting.settings import PlanSettings
from kvledger.accounting.stepcost import StepShape, decode_steps_by_loop
from kvledger.accounting.tp_comm import allreduce_latency_s, allreduce_step_s_array
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model


def rc_for(name, gpu, tp=1, **kw):
    m, g = load_model(name, allow_hub=False), get_gpu(gpu)
    p = build_plan(m, g, PlanSettings(tp=tp), with_roofline=False, with_advice=False)
    return m, g, RooflineStepCost(m, g, p.kv, tp, **kw)


def chunk(n, c):
    """One prefill chunk of n tokens after c computed: KV c + n, causal pairs n·c + n(n+1)/2."""
    return StepShape(n, 1, c + n, n * c + n * (n + 1) / 2, 0, 0)


def test_tied_head_reads_the_embedding_every_step():
    m, g, rc = rc_for("meta-llama/Llama-3.2-3B", "H100-SXM")
    assert m.tie_word_embeddings
    # head = 128,256 × 3,072 × 2 B = 788,004,864 B = 0.7339 GiB, added to the 5.2503 GiB of untied weights read:
    # 5.9842 GiB (the audit: 5.25 → 5.98 GiB).
    assert rc.head_bytes == 128_256 * 3_072 * 2
    assert rc.weight_read_bytes(64) / 2**30 == pytest.approx(5.9842, abs=1e-4)
    # decode batch 1 at 2,048 tokens: 2.19 ms before, + 788,004,864 B / (0.8 × 3.35e12 B/s) = +0.294 ms → 2.485 ms
    assert rc.step_time_s(StepShape(0, 0, 0, 0.0, 1, 2048)) * 1e3 == pytest.approx(2.485, abs=0.001)


def test_attention_at_bf16_peak_for_fp8_weights_with_bf16_kv():
    m, g, rc = rc_for("Qwen/Qwen3-32B-FP8", "H200")
    assert rc.dtype == "fp8" and rc.attn_dtype == "bf16" and rc.attn_peak_flops == g.bf16_flops_per_s
    # 8,192-token chunk after 24,576: 64 heads × 128 × 4 × 64 layers = 2,097,152 FLOP per pair, ×
    # (8192·24576 + 8192·8193/2) = 234,885,120 pairs = 4.926e14 FLOP / (0.7 × 989.5e12 bf16) = 711.2 ms, + the fp8
    # GEMM term ≈ 2 × 31.2e9 params × 8,192 / (0.7 × 1979e12) ≈ 369 ms → 1,080 ms (the audit's figure; at the fp8
    # peak the attention took half: 725 ms).
    c = rc.costs(chunk(8192, 24576))
    assert c.attn_flops == pytest.approx(2_097_152 * (8192 * 24576 + 8192 * 8193 / 2), rel=1e-12)
    assert rc.step_time_s(chunk(8192, 24576)) * 1e3 == pytest.approx(1080.2, abs=0.1)


def test_fp8_kv_cache_prices_attention_at_the_fp8_peak():
    m, g = load_model("Qwen/Qwen3-32B-FP8", allow_hub=False), get_gpu("H200")
    p = build_plan(m, g, PlanSettings(kv_cache_dtype="fp8"), with_roofline=False, with_advice=False)
    rc = RooflineStepCost(m, g, p.kv, 1)
    assert rc.attn_dtype == "fp8" and rc.attn_peak_flops == g.fp8_flops_per_s


def test_mla_prefill_takes_the_non_absorbed_path():
    m, g, rc = rc_for("deepseek-ai/DeepSeek-V3", "H200", tp=8, allreduce_latency_s=0.0)
    # per GPU 128/8 = 16 heads. Absorbed (decode): 2·16·(512+64) + 2·16·512 = 34,816 FLOP per pair per layer;
    # prefill MHA path: 2·16·(128+64) + 2·16·128 = 10,240, over 61 MLA layers.
    assert rc.attn_flops_per_pair == 34_816 * 61 and rc.prefill_flops_per_pair == 10_240 * 61
    # context re-expansion through kv_b_proj: 2 · 512 · 16 · (128 + 128) = 4,194,304 FLOP per cached token per layer
    assert rc.upproj_flops_per_token == 4_194_304 * 61
    assert rc.split_attention  # MLA backends run prefill (forward_mha) and decode (forward_mqa) one after the other
    # 8,192-token chunk after 24,576 on 8×H200: 413 ms before (absorbed FLOPs at the fp8 peak); MHA-path FLOPs at
    # the bf16 peak + the context up-projection: the attention term is 211.8 ms.
    c = rc.costs(chunk(8192, 24576))
    assert rc.attention_s(c) * 1e3 == pytest.approx(211.8, abs=0.1)
    # With the matmuls that made the audit's 269.1 ms (57.3 ms: all 79.40e12 matmul FLOPs at 0.7 × 1,979 TFLOP/s),
    # the routed experts now in the fused-MoE kernel term (moe_kernel.py), the rest unchanged:
    #   dense matmuls: 79.3995e12 − 41.8502e12 expert FLOPs = 37.549e12 / 1,385.3e12 = 27.11 ms (dense bytes
    #     3.15 GB / 3.84 TB/s = 0.82 ms, under it);
    #   58 MoE layers (61 − 3 dense), 256 experts, top-8, 653.9e9 expert weights / TP 8 → 2,554,331,136 per token;
    #     bytes 81.7586 GB (FP8 + block scales), all touched: / (0.859 × 4.8 TB/s) = 19.8 ms; FLOPs: 8,192 > 256 →
    #     BLOCK_M 64, c ~ Bin(8192, 1/32) (mean 256, σ 15.7) → 64 × (4 + 0.483) = 286.9 padded rows per expert,
    #     2 × 2,554,331,136 × 256 × 286.94 / 8 = 46.91e12 at 0.3310 × 286.94/(286.94 + 5.40) = 0.3249 of the BF16
    #     989.5e12 → 145.9 ms, compute-bound; + 58 × 42.6 µs = 2.5 ms → 148.4 ms (no tuned-config lookup here:
    #     block_m's 64-row blocks).
    # 27.11 + 148.39 + 211.82 = 387.3 ms without the all-reduce term.
    assert c.moe_kernel_s * 1e3 == pytest.approx(148.4, abs=0.1)
    assert (c.matmul_flops - c.expert_flops) / (1979e12 * 0.7) * 1e3 == pytest.approx(27.11, abs=0.01)
    assert (rc.time_s(c) - c.allreduce_s) * 1e3 == pytest.approx(387.3, abs=0.1)


def test_split_kernels_add_prefill_and_decode_attention():
    # Llama-3.1-8B on H100: a 2,048-token chunk at 14,336 computed + 256 decodes at 4,096 tokens.
    mix = StepShape(2048, 1, 14336 + 2048, 2048 * 14336 + 2048 * 2049 / 2, 256, 256 * 4096)
    _, _, joint = rc_for("meta-llama/Meta-Llama-3.1-8B", "H100-SXM")
    _, _, split = rc_for("meta-llama/Meta-Llama-3.1-8B", "H100-SXM", split_attention=True)
    assert not joint.split_attention  # FlashAttention's one varlen kernel: one roofline over both
    # joint: one max(FLOPs, bytes) over both = 98.9 ms; split: compute-bound prefill attention + bandwidth-bound
    # decode attention added = 121.9 ms (the audit's figures)
    assert joint.step_time_s(mix) * 1e3 == pytest.approx(98.9, abs=0.05)
    assert split.step_time_s(mix) * 1e3 == pytest.approx(121.9, abs=0.05)
    # pure steps are the same either way
    dec = StepShape(0, 0, 0, 0.0, 256, 256 * 4096)
    assert joint.step_time_s(dec) == split.step_time_s(dec)


def test_tp_all_reduce_term():
    m, g, rc = rc_for("meta-llama/Meta-Llama-3.1-70B", "H100-SXM", tp=8)
    lat = allreduce_latency_s(g, 8)
    # fitted to Vidur's DGX-H100 NCCL medians at 8 ranks (≤ 8 MiB): 34.3 µs per call
    assert lat * 1e6 == pytest.approx(34.32, abs=0.01)
    # batch 64: payload 64 × 8,192 × 2 B = 1,048,576 B; per call 34.32 µs + 2·7/8 · 1,048,576 B / 450 GB/s
    # (NVLink 4: 900 GB/s bidirectional) = 34.32 + 4.08 µs; 2 per layer × 80 layers = 160 calls → 6.144 ms
    c = rc.costs(StepShape(0, 0, 0, 0.0, 64, 64 * 2048))
    assert c.allreduce_s == pytest.approx(160 * (lat + 2 * 7 / 8 * 1_048_576 / 450e9), rel=1e-12)
    assert c.allreduce_s * 1e3 == pytest.approx(6.144, abs=0.001)
    # TP 1: no term
    _, _, one = rc_for("meta-llama/Meta-Llama-3.1-8B", "H100-SXM")
    assert one.costs(StepShape(0, 0, 0, 0.0, 64, 64 * 2048)).allreduce_s == 0.0


def test_vllm_custom_all_reduce_prices_decode_calls():
    m, g = load_model("meta-llama/Llama-2-70b-hf", allow_hub=False), get_gpu("H100-SXM")

    def cost(**kw):
        return build_plan(m, g, PlanSettings(tp=4, **kw), with_roofline=False, with_advice=False).step_cost()

    rc = cost()
    # vLLM (latest) on H100 TP 4, one node, NVSwitch: custom all-reduce on, max_size min(8 MiB, 32 MiB) = 8 MiB
    assert rc.custom_allreduce_max_bytes == 8 * 2**20
    # batch 32: 32 × 8,192 × 2 B = 524,288 B = 512 KiB, not below 512 KiB at 4 ranks → two-shot:
    # 2 × 6 µs + 3 × 524,288 B / 450 GB/s (NVLink 4, one direction) = 12 + 3.4953 µs = 15.4953 µs per call;
    # 2 per layer × 80 layers = 160 calls → 2.4793 ms (NCCL's price: 160 × (33.74 + 1.5 × 1.1651) µs = 5.679 ms)
    assert rc.allreduce_s(32) * 1e3 == pytest.approx(2.4792, abs=1e-4)
    # batch 16: 262,144 B < 512 KiB → one-shot: 6 + 3 × 262,144 / 450e9 = 7.7476 µs; × 160 = 1.2396 ms
    assert rc.allreduce_s(16) * 1e3 == pytest.approx(1.2396, abs=1e-4)
    # a 512-token prefill step: 512 × 16,384 B = 8 MiB, not below max_size → NCCL: 160 × (33.74 + 1.5 × 8,388,608 /
    # 450e9 = 27.96 µs) = 9.873 ms
    assert rc.allreduce_s(512) * 1e3 == pytest.approx(9.873, abs=1e-3)
    # --disable-custom-all-reduce: NCCL's price at batch 32, 5.679 ms
    assert cost(disable_custom_all_reduce=True).allreduce_s(32) * 1e3 == pytest.approx(5.679, abs=1e-3)
    # the array form (step_split.py) agrees call for call
    arr = allreduce_step_s_array([0, 16, 32, 512], 8192, 80, 4, rc.allreduce_latency_s, 450e9, 8 * 2**20)
    assert list(arr) == pytest.approx([0.0] + [rc.allreduce_s(t) for t in (16, 32, 512)], rel=1e-12)


def test_all_reduce_over_pcie_runs_at_its_measured_share_of_the_link():
    # Qwen3-32B at TP 2 on two RTX PRO 6000 (PCIe Gen5 x16, 128 GB/s bidirectional, no NVLink; no peer access by
    # default, so vLLM's custom all-reduce is off and every call is NCCL's): the link is 128e9 / 2 × 0.35 = 22.4e9 B/s
    # a direction (tp_comm.PCIE_ALLREDUCE_SHARE: NCCL's default bus bandwidth on PCIe Gen5, 22.2 of 64 GB/s).
    m, g = load_model("Qwen/Qwen3-32B", allow_hub=False), get_gpu("RTX PRO 6000")
    rc = build_plan(m, g, PlanSettings(tp=2), with_roofline=False, with_advice=False).step_cost()
    assert rc.link_bytes_per_s == pytest.approx(22.4e9)
    assert rc.custom_allreduce_max_bytes == 0
    # a decode step of 128 sequences: 128 × 5,120 × 2 B = 1,310,720 B a call; per call the H100 NCCL latency at 2
    # ranks (31.43 µs, fitted to Vidur's DGX-H100 medians) + 2·1/2 · 1,310,720 / 22.4e9 = 58.51 µs = 89.94 µs;
    # 2 per layer × 64 layers = 128 calls → 11.512 ms
    assert allreduce_latency_s(g, 2) * 1e6 == pytest.approx(31.43, abs=0.01)
    assert rc.allreduce_s(128) * 1e3 == pytest.approx(11.512, abs=1e-3)
    # an NVLink GPU keeps its scale-up link at the catalog figure: H100 SXM 900 / 2 = 450e9 B/s
    h = build_plan(m, get_gpu("H100-SXM"), PlanSettings(tp=2), with_roofline=False, with_advice=False).step_cost()
    assert h.link_bytes_per_s == 450e9


def test_measured_weight_memory_sets_the_bytes_read():
    m, g = load_model("meta-llama/Meta-Llama-3.1-8B", allow_hub=False), get_gpu("H100-SXM")
    base = build_plan(m, g, PlanSettings(), with_roofline=False, with_advice=False)
    # a measured 8 GiB against the computed 14.99 GiB (RoPE cache included): every weight read scales by the ratio
    given = build_plan(m, g, PlanSettings(weights_bytes=8 * 2**30), with_roofline=False, with_advice=False)
    rb, rg = base.step_cost(), given.step_cost()
    computed = 14.99 * 2**30
    assert rg.weight_read_bytes(1) / rb.weight_read_bytes(1) == pytest.approx(8 * 2**30 / computed, rel=1e-3)


@pytest.mark.parametrize("name,tp,kw", [("meta-llama/Meta-Llama-3.1-70B", 4, {}),
                                        ("meta-llama/Meta-Llama-3.1-8B", 1, {"overlap_cpu": True,
                                                                             "cpu_overhead_s": 0.004}),
                                        ("meta-llama/Meta-Llama-3.1-8B", 1, {"cpu_overhead_s": 0.002}),
                                        ("deepseek-ai/DeepSeek-V3", 8, {}),
                                        ("openai/gpt-oss-20b", 1, {"cpu_overhead_s": 0.001}),
                                        ("Qwen/Qwen3-Next-80B-A3B-Thinking", 4, {})])
def test_vectorised_decode_is_bit_identical_to_per_step(name, tp, kw):
    # the simulator's fast path prices decode stretches with decode_steps_s and single steps with step_time_s:
    # they must agree bit for bit (short runs take a float loop, long ones numpy; both are checked)
    _, _, rc = rc_for(name, "H200", tp=tp, **kw)
    for seqs, kv in ((1, 10), (64, 64 * 3000), (3, 7), (37, 123_457)):
        for k in (5, 50):
            assert np.array_equal(rc.decode_steps_s(seqs, kv, k), decode_steps_by_loop(rc, seqs, kv, k))


def test_cpu_overhead_overlaps_the_gpu_under_async_scheduling():
    # overlap: max(GPU, CPU) instead of the sum. Llama-3.1-8B H100 decode batch 1 at 16 tokens ≈ 7.0 ms of GPU:
    # a 2 ms overhead is hidden, a 10 ms one sets the step.
    _, _, sync = rc_for("meta-llama/Meta-Llama-3.1-8B", "H100-SXM", cpu_overhead_s=0.002)
    _, _, hid = rc_for("meta-llama/Meta-Llama-3.1-8B", "H100-SXM", cpu_overhead_s=0.002, overlap_cpu=True)
    _, _, big = rc_for("meta-llama/Meta-Llama-3.1-8B", "H100-SXM", cpu_overhead_s=0.010, overlap_cpu=True)
    sh = StepShape(0, 0, 0, 0.0, 1, 16)
    assert sync.step_time_s(sh) == pytest.approx(hid.step_time_s(sh) + 0.002, rel=1e-12)
    assert big.step_time_s(sh) == 0.010
