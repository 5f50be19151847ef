"""Data-parallel attention in the plan, hand-worked on DeepSeek-V3 (8 × H200): SGLang 0.5.23's --enable-dp-attention
--dp-size 8 against plain TP 8, vLLM 0.33.0's --data-parallel-size 8 --enable-expert-parallel, and the refusals.

DeepSeek-V3's config: 61 layers (3 dense, 58 MoE), MLA with kv_lora_rank 512 + qk_rope_head_dim 64, hidden 7,168,
vocab 129,280, 256 routed experts of intermediate 2,048, FP8 e4m3 weights with one fp32 scale per 128 × 128 block;
embedding and LM head in bfloat16.
"""

from __future__ import annotations

import pytest

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.catalog.gpu_file import resolve_gpu
from kvledger.catalog.models import load_model
from kvledger.errors import InputError

DSV3 = "deepseek-ai/DeepSeek-V3"
KV_PER_TOKEN = 61 * (512 + 64) * 2  # one latent head per layer, bf16: 70,272 B, on every GPU at any TP
H200_MIB = 143_771  # nvidia-smi's H200 total, MiB (the catalog's)


def _plan(model=DSV3, **kw):
    return build_plan(load_model(model), resolve_gpu("H200"), make_settings(**kw))


def _weights(p) -> float:
    return next(d.bytes for d in p.memory.deductions if d.name == "weights")


def _fp8(rows: int, cols: int) -> int:
    """An FP8 block-quantized matrix: 1 B per weight + 4 B per 128 × 128 block."""
    return rows * cols + 4 * -(-rows // 128) * -(-cols // 128)


@pytest.fixture(scope="module")
def sglang_pair():
    return (_plan(engine="sglang", tp=8),
            _plan(engine="sglang", tp=8, data_parallel_size=8, enable_dp_attention=True))


def test_sglang_dp_attention_replicates_attention_and_embedding(sglang_pair):
    tp8, dp8 = sglang_pair
    # TP-sliced attention per layer: q_b_proj 24,576 × 1,536, kv_b_proj 32,768 × 512, o_proj 7,168 × 16,384
    # (q_a_proj, kv_a_proj_with_mqa and the norms are whole at TP 8 already)
    attn = 61 * (_fp8(24_576, 1_536) + _fp8(32_768, 512) + _fp8(7_168, 16_384))  # 10,492,515,328 B
    embed = 129_280 * 7_168 * 2  # bf16 input embedding: 1,853,358,080 B, split over attention TP (1) under DP
    # TP 8 holds 1/8 of each; DP attention (attention TP 1) holds them whole: 7/8 more per GPU (10.06 GiB);
    # the LM head, dense MLPs and experts stay split over all 8
    assert _weights(dp8) - _weights(tp8) == pytest.approx(7 / 8 * (attn + embed), rel=1e-9)
    assert dp8.kv.bytes_per_token == tp8.kv.bytes_per_token == KV_PER_TOKEN


def test_sglang_dp_attention_reserve_pool_and_limits(sglang_pair):
    tp8, dp8 = sglang_pair
    # reserve_for_graph_mb: 512 + 1.5 × 8,192 + 8/8 × 1,024 + 2 × 512 + 1,536 (MLA's prefill graphs, on by default,
    # which DP attention leaves on from 0.5.17) = 16,384 MiB, + 512 × 8 × (3 + 1.5) under DP attention (max_bs
    # 512 > 300) = 34,816 MiB
    assert tp8.memory.fraction == round((H200_MIB - 16_384) / H200_MIB, 3) == 0.886
    assert dp8.memory.fraction == round((H200_MIB - 34_816) / H200_MIB, 3) == 0.758
    # page size 1: tokens = floor(available / 70,272 B), one pool per GPU = per DP rank. Both hold MLA's w_kc/w_vc
    # copies in bfloat16 (sglang_mla_copies.py): heads on the rank × 256 × 512 × 2 B × 61 layers, 16 heads at TP 8
    # (255,852,544 B = 3,641 tokens: 643,295 without them), all 128 under DP attention (2,046,820,352 B = 29,127
    # tokens: 221,051 without them)
    assert dp8.memory.num_gpu_blocks == dp8.memory.available_kv_bytes // KV_PER_TOKEN
    assert tp8.memory.num_gpu_blocks == tp8.memory.available_kv_bytes // KV_PER_TOKEN == 639_654
    d = dp8.data_parallel
    assert (d.ranks, d.gpus, d.attention_tp) == (8, 8, 1)
    assert d.kv_tokens_per_rank == dp8.memory.num_gpu_blocks == 191_924
    assert d.kv_tokens_total == 8 * 191_924  # 1,535,392 tokens on the node: 2.40× the TP-8 replica's 639,654
    # the prefill chunk 8,192 ÷ 8 per rank; max_running_requests per rank min(max(int(T / 163,840 × 512), 2,048),
    # 4,096) = 2,048
    assert dp8.memory.max_num_batched_tokens == 1_024 and dp8.memory.max_num_seqs == 2_048
    at32k = next(r for r in d.requests if r.context_tokens == 32_768)
    assert at32k.per_rank == 191_924 // 32_768 == 5 and at32k.total == 40
    assert dp8.roofline is None and tp8.roofline is not None
    assert tp8.data_parallel is None


def test_mla_at_tp8_names_dp_attention_with_its_computed_figure(sglang_pair):
    tp8, _ = sglang_pair
    assert "--attn-dp-size 8" in tp8.dp_remedy  # SGLang 0.5.23's spelling (0.5.22 on)
    assert "8 × 191,924 = 1,535,392 KV tokens" in tp8.dp_remedy and "639,654" in tp8.dp_remedy
    assert "2.40×" in tp8.dp_remedy


def test_sglang_given_max_running_requests_is_divided_per_rank():
    p = _plan(engine="sglang", tp=8, data_parallel_size=8, enable_dp_attention=True, max_num_seqs=1_000)
    assert p.memory.max_num_seqs == 125  # resolve_max_num_reqs: 1,000 // 8


def test_vllm_dp8_ep_on_the_same_gpus():
    dp = _plan(tp=1, data_parallel_size=8, enable_expert_parallel=True)
    one = _plan(tp=1)  # the same TP-1 rank without DP: every expert whole on one GPU (does not fit)
    # EP 8 = DP 8 × TP 1: 32 of 256 experts per GPU, each expert 3 FP8 matrices of 2,048 × 7,168 (58 MoE layers);
    # attention, dense layers, shared experts, embedding and LM head whole (TP 1)
    experts = 58 * 256 * 3 * _fp8(2_048, 7_168)  # 218,022,805,504 B
    assert _weights(one) - _weights(dp) == pytest.approx(7 / 8 * experts, rel=1e-6)
    assert dp.kv.bytes_per_token == KV_PER_TOKEN
    d = dp.data_parallel
    assert (d.ranks, d.gpus, d.attention_tp) == (8, 8, 1)
    assert d.kv_tokens_per_rank == dp.memory.num_gpu_blocks * 16 and d.kv_tokens_total == 8 * d.kv_tokens_per_rank
    assert dp.memory.available_kv_bytes // (16 * KV_PER_TOKEN) == dp.memory.num_gpu_blocks
    assert any("allgather_reducescatter" in n for n in dp.memory.notes)  # the unmodelled gather, said


def test_vllm_dense_model_dp_ranks_are_replicas():
    one = build_plan(load_model("Qwen/Qwen3-8B"), resolve_gpu("H100-SXM"), make_settings(tp=1))
    dp = build_plan(load_model("Qwen/Qwen3-8B"), resolve_gpu("H100-SXM"), make_settings(tp=1, data_parallel_size=4))
    assert dp.memory.num_gpu_blocks == one.memory.num_gpu_blocks
    assert dp.data_parallel.kv_tokens_total == 4 * one.memory.num_gpu_blocks * one.memory.block_size


def test_sglang_allows_dp_attention_for_a_dense_model_its_file_builds_on_attention_tp():
    p = build_plan(load_model("Qwen/Qwen3-32B"), resolve_gpu("H100-SXM"),
                   make_settings(engine="sglang", tp=4, data_parallel_size=2, enable_dp_attention=True))
    assert p.data_parallel.attention_tp == 2
    assert p.kv.bytes_per_token == 64 * 2 * (8 // 2) * 128 * 2  # 8 KV heads over attention TP 2


@pytest.mark.parametrize(("model", "kw", "words"), [
    (DSV3, dict(engine="sglang", tp=8, data_parallel_size=3, enable_dp_attention=True), "does not divide --tp 8"),
    (DSV3, dict(engine="sglang", tp=8, data_parallel_size=8), "without --enable-dp-attention"),
    (DSV3, dict(engine="sglang", tp=8, data_parallel_size=8, enable_dp_attention=True, engine_version="0.5.3"),
     "0.5.23's rules"),
    ("meta-llama/Llama-3.1-8B", dict(engine="sglang", tp=2, data_parallel_size=2, enable_dp_attention=True),
     "whole TP group"),
    (DSV3, dict(tp=8, enable_dp_attention=True), "SGLang's flag"),
    (DSV3, dict(tp=1, data_parallel_size=8), "without --enable-expert-parallel"),
    (DSV3, dict(engine="trtllm", tp=8, data_parallel_size=8), "TensorRT-LLM"),
])
def test_refusals(model, kw, words):
    with pytest.raises(InputError, match=words.replace("(", r"\(")):
        _plan(model, **kw)


def test_a_dp_plans_fixes_say_their_gpus_and_the_ranks_total(sglang_pair):
    _, dp8 = sglang_pair
    # one 163,840-token request per rank (1.49x), so the fixes that raise it: --tp 16 keeps the 8 DP ranks inside a
    # TP group of 16 GPUs (attention TP 16 / 8 = 2), two nodes of 8 H200s (--nnodes 2); FP8 KV keeps the 8 GPUs
    fixes = {o.action: o for o in dp8.advice.options}
    tp16 = fixes["--tp 16 --nnodes 2"]
    assert tp16.max_requests == 5
    assert tp16.detail.endswith("; 16 GPUs (TP 16, 8 DP ranks of attention TP 2), the figures one rank's: 8 × 5 = 40 "
                                "requests in all")
    assert fixes["--kv-cache-dtype fp8_e4m3"].detail.endswith(
        "; 8 GPUs (TP 8, 8 DP ranks of attention TP 1), the figures one rank's: 8 × 2 = 16 requests in all")


def test_vllm_dp_fixes_count_each_ranks_tp_group():
    # Llama-3.1-70B (131.45 GiB of bf16 weights) at TP 1 × DP 2 on H100 does not fit; each fix keeps DP 2
    p = build_plan(load_model("meta-llama/Llama-3.1-70B"), resolve_gpu("H100-SXM"), make_settings(data_parallel_size=2))
    fixes = {o.action: o for o in p.advice.options}
    assert p.advice.verdict == "weights_do_not_fit"
    assert fixes["--tp 4"].detail.endswith("; 8 GPUs (2 DP ranks × TP 4), the figures one rank's: 2 × 3 = 6 requests "
                                           "in all")
    # TP 2 with FP8 weights: 2 ranks × TP 2 = 4 GPUs, where TP alone needs 2 × 4 = 8
    assert "; 4 GPUs where TP alone needs 8; 4 GPUs (2 DP ranks × TP 2)" in fixes["--tp 2 -q fp8"].detail
    assert fixes["--gpu b300"].detail.endswith("; 2 GPUs (2 DP ranks × TP 1), the figures one rank's: 2 × 2 = 4 "
                                               "requests in all")
    # without DP the same fixes count one TP group and say nothing of ranks
    one = build_plan(load_model("meta-llama/Llama-3.1-70B"), resolve_gpu("H100-SXM"), make_settings())
    plain = {o.action: o.detail for o in one.advice.options}
    assert plain["--tp 2 -q fp8"].endswith("; 2 GPUs where TP alone needs 4")
    assert not any("DP ranks" in d for d in plain.values())


def test_the_simulator_line_says_which_dp_the_simulator_steps(sglang_pair):
    # simulate's note on an MLA model at TP 8: vLLM's alternative (DP 8 + EP, TP 1) is what `kvledger simulate
    # --data-parallel-size 8 --enable-expert-parallel` steps in lock-step (analyses/serving/sim_dp.py), so the line
    # must not say "the simulator does not" (it did); SGLang's DP attention simulate steps too, at --ep-size = --tp
    # (analyses/serving/sim_sglang_dp.py refuses EP 1).
    # Figures: vLLM TP 8 holds 40,354 blocks × 16 = 645,664 tokens; DP 8 8 × 25,387 × 16 = 3,249,536 (5.03×);
    # SGLang TP 8 639,654 slots against 8 × 191,924 = 1,535,392 (2.40×) — the plans above.
    from kvledger.accounting.dp_node import dp_hint

    vllm = dp_hint(_plan(tp=8), build_plan)
    assert "(3,249,536 against 645,664, vLLM 0.33.0 rules; `kvledger simulate` with those flags simulates its DP " \
           "ranks in lock-step)" in vllm and "5.03×" in vllm and "simulator does not" not in vllm
    sgl = dp_hint(sglang_pair[0], build_plan)
    assert sgl.endswith("(1,535,392 against 639,654, SGLang 0.5.23 rules; `kvledger simulate` with those flags and "
                        "--ep-size 8 simulates its DP ranks in lock-step)") and "2.40×" in sgl
