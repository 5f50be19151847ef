"""vLLM's non-KV memory from its mechanisms (custom all-reduce, NCCL by topology, sampler backend per version), the
engine-history rules of issue 22 (V0 chunked prefill above 32K, MLA before 0.7.1) and the plan's ranges."""

from __future__ import annotations

import math

import pytest

from kvledger.accounting import vllm_profile
from kvledger.accounting.kv_range import kv_ranges
from kvledger.accounting.memory import Deduction
from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.accounting.vllm_collectives import (
    custom_all_reduce,
    custom_all_reduce_bytes,
    custom_all_reduce_max_bytes,
    non_torch_term,
    tp_group_nodes,
)
from kvledger.accounting.vllm_profile import sampler_peak_bytes
from kvledger.accounting.vllm_rules import default_batch_limits
from kvledger.accounting.vllm_sampler import sampler_backends
from kvledger.accounting.vllm_terms import cudagraph_range
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model
from kvledger.units import GiB, MiB

V19, V10, V063 = (0, 19, 0), (0, 10, 1), (0, 6, 3)


@pytest.mark.parametrize("gpu,tp,nnodes,disabled,on", [
    ("h100", 2, 1, False, True),    # world size 2: peer access suffices
    ("h100", 8, 1, False, True),    # NVSwitch: fully connected
    ("l40s", 2, 1, False, True),    # PCIe pair with peer access
    ("l40s", 4, 1, False, False),   # "not supported on more than two PCIe-only GPUs"
    ("rtx-4090", 2, 1, False, False),  # GeForce: _can_p2p fails
    ("rtx-pro-6000", 2, 1, False, False),  # SM120 on a direct-attach host: no peer access without ForceP2P
    ("h100", 3, 1, False, False),   # world size not in [2, 4, 6, 8]
    ("h100", 8, 2, False, False),   # the group spans nodes
    ("h100", 4, 1, True, False),    # --disable-custom-all-reduce
])
def test_custom_all_reduce_rule(gpu, tp, nnodes, disabled, on):
    # vLLM 0.6.3–0.19.0 custom_all_reduce.py CustomAllreduce.__init__: checks in this order.
    assert custom_all_reduce(tp, nnodes, get_gpu(gpu), disabled)[0] is on


def test_tp_group_nodes_follow_the_rank_layout():
    # vLLM 0.10.1 parallel_state.py: ranks = arange(world).reshape(-1, dp, pp, tp), so a TP group is tp consecutive
    # ranks; ray_distributed_executor.py ranks the workers node by node. tp × pp / nnodes GPUs a node:
    #   TP 4 × PP 2 on 2 nodes of 4 → ranks 0–3 (stage 0) on node 0, 4–7 on node 1: each TP group in 1 node;
    #   TP 8 × PP 1 on 2 nodes of 4 → ranks 0–7 span both; TP 8 × PP 2 on 4 nodes of 4 → 2 nodes a group.
    assert (tp_group_nodes(4, 2, 2), tp_group_nodes(8, 1, 2), tp_group_nodes(8, 2, 4), tp_group_nodes(4, 1, 1)) == (
        1, 2, 2, 1)
    # So custom all-reduce stays on for TP 4 × PP 2 over 2 GH200 nodes (the rwood-97/multi_node_inference log
    # registers its CUDA-graph buffers in custom_all_reduce.py): the term is the one-node term, 16 MiB of buffers
    # included (0.10.1 counts meta + buffer, 2 × 8 MiB, as non-torch growth: its init snapshot precedes the TP group's
    # set-up; rank_data is torch memory outside the profile's peak increase), and off when TP 8 spans the 2 nodes.
    gh200 = get_gpu("gh200")
    two_nodes, one_node = non_torch_term(V10, 4, 2, 2, gh200, False), non_torch_term(V10, 4, 2, 1, gh200, False)
    assert two_nodes == one_node and "custom all-reduce on" in two_nodes.source and "16 MiB" in two_nodes.source
    assert "spans 2 nodes" in non_torch_term(V10, 8, 1, 2, gh200, False).source
    # The step-cost side reads the same rule: 0.10.1 max_size 8 MiB with PP 2 over 2 nodes, 0 when TP 4 spans both.
    assert custom_all_reduce_max_bytes(V10, 4, 2, gh200, False, pp=2) == 8 * MiB
    assert custom_all_reduce_max_bytes(V10, 4, 2, gh200, False) == 0


def test_custom_all_reduce_buffer_size_by_version():
    # 0.10.1: max_size 8 MiB → meta (meta_size + 8 MiB) + buffer 8 MiB + rank_data 8 MiB ≈ 24 MiB.
    assert custom_all_reduce_bytes(V10, 2, "sm90") == 24 * MiB
    # 0.19 with symmetric memory on Hopper: max_size = min(8 MiB, CUSTOM_ALL_REDUCE_MAX_SIZES["9.0"][8] = 256 KiB)
    # → 2 × 256 KiB + 8 MiB = 8.5 MiB; at TP 2 the table's 64 MiB is above 8 MiB, so 24 MiB again.
    assert custom_all_reduce_bytes(V19, 8, "sm90") == 2 * 256 * 1024 + 8 * MiB
    assert custom_all_reduce_bytes(V19, 2, "sm90") == 24 * MiB


def test_non_torch_by_topology():
    # H100 (NVSwitch) TP 2 on 0.19: measured 2.06–2.07 GiB → 2.07 (2.04–2.12).
    t = non_torch_term(V19, 2, 1, 1, get_gpu("h100"), False)
    assert t.bytes == pytest.approx(2.07 * GiB) and t.low < 2.06 * GiB and t.high > 2.07 * GiB
    # L40S TP 2 (PCIe, peer access): 0.25 GiB TP-1 part (not measured on L40S: 0.12–0.57 from 0.18, the off-Hopper
    # 0.19 records' unexplained 0.32 GiB; an RTX 4060 printed 0.03 at 0.7.3's 0.13) + NCCL ring 0.2 (0.05–0.6) = 0.45
    # GiB, range 0.17–1.17 GiB (0.57 + 0.6); custom all-reduce's 24 MiB sit before 0.19's init snapshot (no term).
    t = non_torch_term(V19, 2, 1, 1, get_gpu("l40s"), False)
    assert (round(t.bytes / GiB, 4), round(t.low / GiB, 4), round(t.high / GiB, 4)) == (0.45, 0.17, 1.17)
    # before 0.18 (no graph captures in the window) the TP-1 part keeps +0.15: 0.13 GiB, range 0–0.28
    t17 = non_torch_term((0, 17, 0), 1, 1, 1, get_gpu("l40s"), False)
    assert (round(t17.low / GiB, 2), round(t17.high / GiB, 2)) == (0.0, 0.28)
    # RTX 4090 TP 2: no peer access, so no custom all-reduce buffers: 0.25 + 0.2 = 0.45 GiB.
    assert non_torch_term(V19, 2, 1, 1, get_gpu("rtx-4090"), False).bytes == pytest.approx(0.45 * GiB)
    # H100 TP 4 with --disable-custom-all-reduce: the measured 2.13 GiB, since 0.19 allocates the buffers before its
    # init snapshot (test_vllm_flag_terms.py has the rule by version).
    t = non_torch_term(V19, 4, 1, 1, get_gpu("h100"), True)
    assert t.bytes == pytest.approx(2.13 * GiB)


def test_b200_nvswitch_non_torch_measured_from_0_18():
    # B200 TP 4/8 from 0.18 (BLACKWELL_NVSWITCH_GIB): requested − printed weights − printed available KV − code
    # activation on vme_startups.csv's 0.18.0 rows, e.g. Llama-3.3-70B TP 4: the H100 figure 2.13 + the plan's excess
    # 0.344 GiB = 2.474; 2.454–2.474 over 8 rows → 2.46; DeepSeek-R1 TP 8: 2.19 + 0.563 − 0.077 (weights) = 2.676 →
    # 2.68. 0.19 and later (no B200 row): ± 0.3 GiB; before 0.18 the H100 log2 rule stays (2.13 at TP 4).
    b200 = get_gpu("b200")
    t4, t8 = (non_torch_term((0, 18, 0), tp, 1, 1, b200, False) for tp in (4, 8))
    assert (t4.bytes, t4.low, t4.high) == (2.46 * GiB, 2.45 * GiB, 2.47 * GiB) and t8.bytes == 2.68 * GiB
    t = non_torch_term((0, 19, 0), 4, 1, 1, b200, False)
    assert (round(t.low / GiB, 2), round(t.high / GiB, 2)) == (2.15, 2.77)
    assert non_torch_term((0, 16, 0), 4, 1, 1, b200, False).bytes == pytest.approx(2.13 * GiB)
    # --disable-custom-all-reduce keeps the measured basis: 0.18 counts none of its buffers (init snapshot after them)
    assert non_torch_term((0, 18, 0), 4, 1, 1, b200, True).bytes == 2.46 * GiB


def test_h200_nvswitch_tp4_non_torch_from_0_18():
    # vme_startups.csv (ashishkamra/vllm-memory-estimator test_data/validation_db.json), H200 TP 4, vLLM 0.18.0/0.19.0:
    # residual = requested − printed weights − printed available KV − code activation peak, e.g. Llama-3.3-70B bf16
    # (record 18297adf): the 2.13 GiB planned + the plan's +0.214 GiB excess of available KV = 2.344; over 18 rows
    # 2.304–2.354, median 2.344 → 2.34 (2.30–2.36). Before 0.18 the TP-4 figure is 0.80 (0.74–1.82).
    h200, h100 = get_gpu("h200"), get_gpu("h100")
    t = non_torch_term((0, 18, 0), 4, 1, 1, h200, False)
    assert (t.bytes, t.low, t.high) == (2.34 * GiB, 2.30 * GiB, 2.36 * GiB)
    assert non_torch_term((0, 16, 0), 4, 1, 1, h200, False).bytes == 0.80 * GiB
    # H100 logged its own TP-4 figure at 0.19 (2.13, vllm-startups-0.19 Llama-3.1-8B/Qwen2.5-7B): that stays.
    assert non_torch_term(V19, 4, 1, 1, h100, False).bytes == pytest.approx(2.13 * GiB)
    # 0.20 (no H200 row isolates non-torch there): down to the pre-0.18 0.74, up 0.3 GiB → 2.66.
    t = non_torch_term((0, 20, 0), 4, 1, 1, h200, False)
    assert (t.bytes, round(t.low / GiB, 2), round(t.high / GiB, 2)) == (2.34 * GiB, 0.74, 2.66)


def test_cudagraph_estimate_range_holds_every_logged_019_estimate():
    # profile_cudagraph_memory (0.19 = 0.20 = 0.21): max(first captures) + Σ modes (n − 1) × per-graph. The rule:
    # 244 MiB + 2 × 50 × 5 MiB = 744 MiB = 780,140,544 B (0.7266 GiB) for 51 sizes. shared/data/vllm-startups-0.19
    # logs 0.49 GiB (Llama-3.1-8B PP 4) to 1.69 GiB (Llama-3.1-8B TP 2, PIECEWISE 26 MiB per graph): ×0.66 → 0.4795 GiB
    # and ×2.34 → 1.7002 GiB hold both (0.485 and 1.695 with the 2-decimal print).
    cg, _ = vllm_profile.cudagraph_estimate(51)
    lo, hi, _ = cudagraph_range(cg)
    assert cg == 744 * MiB and (lo, hi) == (pytest.approx(514_892_759.04), pytest.approx(1_825_528_872.96))
    assert lo / GiB < 0.485 and hi / GiB > 1.695
    # The plan subtracts it from 0.20 with that range: Llama-3.1-8B on H100 at 0.20 (51 sizes at the defaults).
    p = build_plan(load_model("meta-llama/Llama-3.1-8B"), get_gpu("h100"), make_settings(engine_version="0.20.0"),
                   with_roofline=False, with_advice=False)
    d = next(i for i in p.memory.deductions if i.name.startswith("CUDA graphs"))
    assert (d.bytes, d.low_bytes, d.high_bytes) == (cg, lo, hi)


def test_sampler_backend_per_version_and_flashinfer_bytes():
    # topk_topp_sampler.py: V0 env default 0; 0.8.5 FlashInfer only below 0.2.3; 0.9–0.11.0 whenever installed;
    # opt-in from 0.11.1 (`if envs.VLLM_USE_FLASHINFER_SAMPLER:` "Users must opt in explicitly", 0.11.1 and 0.11.2).
    assert sampler_backends(V063, "auto")[:2] == ("pytorch", None)
    assert sampler_backends((0, 8, 5), "auto")[:2] == ("pytorch", "flashinfer")
    assert sampler_backends(V10, "auto")[:2] == ("pytorch", "flashinfer")
    assert sampler_backends((0, 11, 0), "auto")[:2] == ("pytorch", "flashinfer")
    assert sampler_backends((0, 11, 1), "auto")[:2] == ("pytorch", None)
    assert sampler_backends((0, 12, 0), "auto")[:2] == ("pytorch", None)
    assert sampler_backends(V19, "flashinfer")[:2] == ("flashinfer", None)
    m = load_model("meta-llama/Llama-3.1-8B")
    # FlashInfer: 1,024 requests × 128,256 vocab × (2 bf16 logits + 4 fp32 copy + 4 masked + 4 probs) = 1,838,678,016 B
    fi, _ = sampler_peak_bytes(m, V10, 1024, backend="flashinfer")
    assert fi == 1024 * 128_256 * 14 == 1_838_678_016
    # the sort sampler up to 0.16 keeps 2 + 35.95 B per logit: 4.64 GiB, 2.5× FlashInfer's 1.71 GiB
    srt, _ = sampler_peak_bytes(m, V10, 1024)
    assert srt == pytest.approx(1024 * 128_256 * 37.95) and round(fi / GiB, 2) == 1.71


def test_v0_turns_chunked_prefill_on_above_32k():
    # 0.6.3 arg_utils.py: max_model_len > 32,768 without a sliding window → chunked prefill, SchedulerConfig 512 tokens;
    # 0.7.3: 2,048. At 32,768 exactly, no chunking: max(32,768, 2,048).
    assert default_batch_limits(V063, 24 * GiB, "RTX 3090", 35_000)[:2] == (512, 256)
    assert default_batch_limits((0, 7, 3), 24 * GiB, "RTX 4090", 131_072)[:2] == (2048, 256)
    assert default_batch_limits(V063, 24 * GiB, "RTX 3090", 32_768)[:2] == (32_768, 256)
    assert default_batch_limits(V063, 24 * GiB, "RTX 3090", 35_000, sliding_window=True)[:2] == (35_000, 256)


def test_the_160_gib_server_default_starts_at_0_28():
    # engine/arg_utils.py get_batch_defaults: the "device_memory >= 160 * GiB_bytes" branch (16,384 tokens, 1,024
    # sequences for the OpenAI server) is in the 0.28.0–0.31.0 wheels and absent from 0.20.0–0.27.0, where a 179 GiB
    # B200 takes the ≥ 70 GiB non-A100 branch: 8,192 tokens, 1,024 sequences
    b200 = 179 * GiB
    assert default_batch_limits((0, 27, 0), b200, "NVIDIA B200", 32_768)[:2] == (8192, 1024)
    assert default_batch_limits((0, 28, 0), b200, "NVIDIA B200", 32_768)[:2] == (16384, 1024)


def test_llama8b_on_rtx3090_v063_at_35k_now_starts():
    # issue 22: vLLM 0.6.3 started Llama-3.1-8B at 35K on an RTX 3090; with the 512-token profile run the plan fits one
    # 35K request (35,000 × 128 KiB = 4.27 GiB of KV needed, 4.89 GiB available).
    p = build_plan(load_model("meta-llama/Llama-3.1-8B"), get_gpu("rtx-3090"),
                   make_settings(engine_version="0.6.3", max_model_len=35_000), with_roofline=False, with_advice=False)
    assert p.memory.max_num_batched_tokens == 512 and p.fits


def test_mla_cached_as_full_kv_before_0_7_1():
    # vLLM 0.6.3 models/deepseek_v2.py: Attention(num_local_heads, 256, ..., num_kv_heads=num_local_heads).
    # DeepSeek-V2-Lite (DeepseekV2ForCausalLM, in vLLM's registry from 0.5.1; DeepSeek-V3's class arrives in 0.6.6,
    # so 0.6.3 cannot load V3) at TP 1: 27 layers × 2 (K, V) × 16 heads × 256 × 2 B = 442,368 B/token;
    # from 0.7.1 MLA caches the latent: 27 × (512 + 64) × 2 B = 31,104 B/token.
    m, g = load_model("deepseek-ai/DeepSeek-V2-Lite"), get_gpu("h200")
    old, new = (build_plan(m, g, make_settings(engine_version=v, max_model_len=16_000), with_roofline=False,
                           with_advice=False) for v in ("0.6.3", "0.7.1"))
    assert old.kv.bytes_per_token == 442_368 and new.kv.bytes_per_token == 31_104


def test_ranges_propagate_from_terms_and_device_total():
    # total 80,000–80,100 MiB at util 0.9; terms 10 GiB exact and 2 GiB (1.5–2.5); blocks of 2 MiB of 16 tokens.
    items = [Deduction("weights", 10 * GiB, ""), Deduction("x", 2 * GiB, "", 1.5 * GiB, 2.5 * GiB)]
    r = kv_ranges(80_000 * MiB, 80_100 * MiB, 0.9, items, 2 * MiB, num_groups=1, block_size=16, blocks_per_request=512)
    lo = math.ceil(80_000 * MiB * 0.9) - 12.5 * GiB
    hi = math.ceil(80_100 * MiB * 0.9) - 11.5 * GiB
    assert r["available_kv_bytes"] == (lo, hi)
    assert r["num_gpu_blocks"] == (int(lo // (2 * MiB)), int(hi // (2 * MiB)))
    assert r["max_concurrency"][0] == r["num_gpu_blocks"][0] / 512


def test_plan_prints_the_range_and_holds_the_019_log():
    # Llama-3.1-8B-Instruct on H100, vLLM 0.19.0, util 0.95, 8K: the corpus log prints 60.75 GiB available
    # (vllm-startups-0.19); the plan's range must hold it.
    p = build_plan(load_model("meta-llama/Llama-3.1-8B-Instruct"), get_gpu("h100"),
                   make_settings(engine_version="0.19.0", gpu_memory_utilization=0.95, max_model_len=8192),
                   with_roofline=False, with_advice=False)
    lo, hi = p.memory.ranges["available_kv_bytes"]
    assert lo <= p.memory.available_kv_bytes <= hi and hi - lo < 0.5 * GiB


def test_mxfp4_on_the_marlin_path_pads_experts_and_gpt_oss_120b_does_not_start_on_h100_in_0_10_1():
    # vllm#23278 (0.10.1, one H100): "Marlin kernel" warning, "Model loading took 65.9651 GiB", "Available KV cache
    # memory: -2.14 GiB". mxfp4.py _should_use_marlin (0.10.1): Hopper with torch 2.7.1 (< 2.8) takes Marlin, which
    # rounds hidden 2,880 → 3,072 (256) and intermediate 2,880 → 2,944 (128): expert bytes × 3,072·2,944 / 2,880² =
    # × 1.0904, so 60.82 GiB of tensors load as 65.95 GiB; 0.9 × 79.19 − 65.95 − 7.37 (sort sampler, 1,024 × 201,088
    # vocab) − 0.13 = −2.18 GiB: no KV cache, as the engine found.
    m, h100 = load_model("openai/gpt-oss-120b"), get_gpu("h100")
    p = build_plan(m, h100, make_settings(engine_version="0.10.1"), with_roofline=False, with_advice=False)
    w = next(d for d in p.memory.deductions if d.name == "weights")
    assert w.bytes / GiB == pytest.approx(65.97, rel=0.001)
    assert p.memory.available_kv_bytes / GiB == pytest.approx(-2.14, abs=0.06) and not p.fits
    # 0.11+ pins torch 2.8: Hopper leaves Marlin (no padding at 2,880, a multiple of 64); Ampere stays on it.
    w14 = build_plan(m, h100, make_settings(engine_version="0.14.1"), with_roofline=False, with_advice=False)
    a100 = build_plan(m, get_gpu("a100-80gb"), make_settings(engine_version="0.14.1"), with_roofline=False,
                      with_advice=False)
    assert w14.memory.deductions[0].bytes < a100.memory.deductions[0].bytes == pytest.approx(w.bytes)


def test_off_hopper_0_19_record_inside_the_widened_range():
    # LLMServingSim's RTX 4090 run (../shared/data/measured-runs/llmservingsim/bench/examples/RTX4090/Llama-3.1-8B,
    # vLLM 0.19.0, TP 1, max_num_seqs 256, max_num_batched_tokens 2048, 25,250,627,584 B device = the catalog's):
    # the engine allocated 2,588 blocks of 2 MiB (5.055 GiB). The plan's point stays 2,750 (requested
    # ceil(0.9 × total) − weights 14.99 − activation 0.55 − non-torch 0.25 = 5.37 GiB); its low end takes the highs
    # of every term, non-torch now 0.25 + 0.32 = 0.57 GiB, so 2,536 blocks (it was 2,623, which left the record out).
    from kvledger.accounting.plan import build_plan
    from kvledger.accounting.settings import make_settings
    from kvledger.catalog.models import load_model

    s = make_settings(engine_version="0.19.0", max_model_len=32768, max_num_seqs=256, max_num_batched_tokens=2048,
                      gpu_memory_utilization=0.9)
    m = build_plan(load_model("meta-llama/Llama-3.1-8B"), get_gpu("rtx-4090"), s, with_roofline=False,
                   with_advice=False).memory
    lo, hi = m.ranges["num_gpu_blocks"]
    assert m.num_gpu_blocks == 2750 and lo == 2536 and lo <= 2588 <= hi
