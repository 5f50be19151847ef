"""A vLLM DP + EP plan that does not fit gets the largest --max-num-batched-tokens that holds one max_model_len
request (advice_mnbt.py), hand-worked.

Qwen3-235B-A22B (bf16: hidden 4,096, 128 routed experts, top-8, vocabulary 151,936) on an H100 SXM5 (device total
85,029,027,840 B), vLLM 0.33.0, DP 8 × TP 1 with --enable-expert-parallel, --max-model-len 4,096: server defaults
8,192 tokens, 1,024 seqs; the default all2all backend gathers 8 × 8,192 = 65,536 MoE profile rows (8 GiB workspace),
so nothing is left for the KV cache.
"""

from __future__ import annotations

from kvledger.accounting.advice_mnbt import max_num_batched_tokens_fix
from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.catalog.gpu_file import resolve_gpu
from kvledger.catalog.models import load_model

QWEN = "Qwen/Qwen3-235B-A22B"


def _plan(max_model_len=4096, **kw):
    return build_plan(load_model(QWEN), resolve_gpu("H100-SXM"),
                      make_settings(tp=1, data_parallel_size=8, enable_expert_parallel=True,
                                    max_model_len=max_model_len, **kw),
                      with_roofline=False)


def test_largest_token_budget_that_holds_one_request_hand_worked():
    # requested ceil(85,029,027,840 × 0.92) = 78,226,705,613 B; less weights 72,781,207,552, non-torch 268,435,456,
    # CUDA graphs 780,140,544: 4,396,922,061 B before the activation peak.
    # Near T = 1,223 the sampler (+ hidden states) sets the peak over the forward: 1,024 reqs × 151,936 × 14 B
    # + 132 × 151,936 × 4 B = 2,258,376,704, + the 0.05 GiB fixed term 53,687,091, + T × (4,096 × 2 B hidden
    # + DP 8 × top-8 × (4,096 + 4,096) × 2 B kept fused-MoE workspace = 8,192 + 1,048,576 = 1,056,768 B).
    # KV left(T) = 4,396,922,061 − 2,312,063,795 − 1,056,768 T = 2,084,858,266 − 1,056,768 T.
    # One 4,096-token request: 256 blocks of 16 + the null block = 257 × 3,080,192 B = 791,609,344 B
    # → T ≤ 1,293,248,922 / 1,056,768 = 1,223.8 → 1,223 (≥ max_num_seqs 1,024, so vLLM accepts it).
    p = _plan()
    assert p.advice.verdict == "weights_do_not_fit"
    fix = next(o for o in p.advice.options if o.action.startswith("--max-num-batched-tokens"))
    assert fix.action == "--max-num-batched-tokens 1223"
    assert (fix.max_requests, fix.context_tokens) == (1, 4096)
    assert "65,536 → DP 8 × 1,223 = 9,784" in fix.detail and "≥ max_num_seqs 1,024" in fix.detail
    assert "8 × 1 = 8 requests in all" in fix.detail  # the DP wording (advice_dp)
    # the re-plan at 1,223 holds 792,431,002 B = 257 blocks; one more token leaves 256 (no request)
    assert _plan(max_num_batched_tokens=1223).memory.num_gpu_blocks == 257
    assert _plan(max_num_batched_tokens=1224).memory.num_gpu_blocks == 256


def test_no_fix_where_max_num_seqs_tokens_do_not_fit():
    # at max_model_len 40,960 one request needs 2,561 × 3,080,192 B = 7.35 GiB; at T = 1,024 (the floor,
    # max_num_seqs) the KV left is 2,084,858,266 − 1,082,130,432 = 1,002,727,834 B: no value helps
    p = build_plan(load_model(QWEN), resolve_gpu("H100-SXM"),
                   make_settings(tp=1, data_parallel_size=8, enable_expert_parallel=True), with_roofline=False)
    assert p.advice.verdict == "weights_do_not_fit"
    assert max_num_batched_tokens_fix(p, build_plan) == []
    assert not any(o.action.startswith("--max-num-batched-tokens") for o in p.advice.options)


def test_below_max_num_seqs_where_vllm_lowers_its_default_hand_worked():
    # max_model_len 8,192: one request is 512 blocks + the null block = 513 × 3,080,192 = 1,580,138,496 B. Below
    # 1,024 tokens vLLM ≥0.11 lowers the unset max_num_seqs to T (engine/arg_utils.py), and the sampler samples T
    # dummy requests: KV left(T) = 4,396,922,061 − (80,222,208 Triton buffer + 53,687,091 fixed) − T × (151,936 × 14
    # + 8,192 + 1,048,576 = 3,183,872) = 4,263,012,762 − 3,183,872 T ≥ 1,580,138,496 → T ≤ 842.6 → 842.
    p = _plan(max_model_len=8192)
    fix = next(o for o in p.advice.options if o.action.startswith("--max-num-batched-tokens"))
    assert fix.action == "--max-num-batched-tokens 842" and fix.max_requests == 1
    assert "lowers max_num_seqs 1,024 → 842" in fix.detail
    # with --max-num-seqs given, the floor is 1,024 (config/scheduler.py), which leaves 1,002,727,834 B < 1,580,138,496
    assert not any(o.action.startswith("--max-num-batched-tokens")
                   for o in _plan(max_model_len=8192, max_num_seqs=1024).advice.options)


def test_default_max_num_seqs_follows_a_smaller_budget_from_0_11():
    from kvledger.accounting.vllm_seqs_default import default_max_num_seqs

    assert default_max_num_seqs((0, 33, 0), 1024, 512)[0] == 512  # min(1,024, 512)
    assert default_max_num_seqs((0, 11, 0), 1024, 512)[0] == 512
    assert default_max_num_seqs((0, 9, 0), 1024, 512) == (1024, "")  # 0.9.0: the default as it is
    # 0.10.1 and 0.10.2 _set_default_args_v1: min(default_max_num_seqs[usage_context], max_num_batched_tokens or
    # sys.maxsize); 0.10.0's takes default_max_num_seqs[usage_context] as it is
    assert default_max_num_seqs((0, 10, 1), 1024, 512)[0] == 512
    assert default_max_num_seqs((0, 10, 2), 1024, 512)[0] == 512
    assert default_max_num_seqs((0, 10, 0), 1024, 512) == (1024, "")
    assert default_max_num_seqs((0, 33, 0), 1024, 8192) == (1024, "")
    assert default_max_num_seqs((0, 33, 0), 1024, None) == (1024, "")
