"""Plans that do not fit: the shortfall and each fix re-planned with numbers; never a zero concurrency passed off as
valid."""

from __future__ import annotations

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model
from kvledger.units import GiB


def test_70b_on_one_h100_does_not_fit_and_tp4_fixes_it():
    p = build_plan(load_model("meta-llama/Llama-3.1-70B"), get_gpu("h100"), make_settings(), with_roofline=False)
    a = p.advice
    # 72.88 GiB allowed (0.92 × 79.22) against 131.45 GiB of weights alone: short by more than 58 GiB.
    assert a.verdict == "weights_do_not_fit" and a.shortfall_bytes > 58 * GiB
    assert p.memory.available_kv_bytes < 0 and p.memory.num_gpu_blocks == 0
    # TP 2 leaves ~2 GiB of KV per GPU, less than one 131,072-token request (20 GiB at 160 KiB/token per GPU);
    # TP 4 leaves ~35 GiB per GPU and one request needs 10 GiB: 3 fit.
    assert a.options[0].action == "--tp 4" and a.options[0].max_requests == 3
    assert all(o.max_requests >= 1 for o in a.options)


def test_long_max_model_len_on_a_small_gpu_gives_the_engine_error_and_estimate():
    p = build_plan(load_model("meta-llama/Llama-3.1-8B"), get_gpu("l4"), make_settings(), with_roofline=False)
    a = p.advice
    assert a.verdict == "max_model_len_does_not_fit"
    assert "one 131,072-token request needs 16.00 GiB of KV cache (8,192 blocks)" in a.message
    # The estimate is the largest L whose cdiv(L, 16) blocks fit the usable pool: 16 × usable blocks.
    assert a.estimated_max_model_len == 16 * p.memory.usable_blocks
    assert p.row_at(131072).max_requests == 0
    fixed = build_plan(load_model("meta-llama/Llama-3.1-8B"), get_gpu("l4"),
                       make_settings(max_model_len=a.estimated_max_model_len), with_roofline=False)
    assert fixed.advice.verdict == "fits" and fixed.row_at(a.estimated_max_model_len).max_requests == 1


def test_verdict_does_not_depend_on_the_reported_contexts():
    # --context 8K leaves max_model_len (131,072) out of the table; the verdict is still about max_model_len.
    m, g = load_model("meta-llama/Llama-3.1-70B"), get_gpu("h100")
    full = build_plan(m, g, make_settings(tp=2), with_roofline=False)
    only8k = build_plan(m, g, make_settings(tp=2, contexts=(8192,)), with_roofline=False)
    assert full.advice.verdict == only8k.advice.verdict == "max_model_len_does_not_fit"
    assert full.advice.shortfall_bytes == only8k.advice.shortfall_bytes
    # The --max-model-len option names the length it leaves: one request of that length fits even at the low end of
    # the plan's block range (a start the advice can promise), not only at the point figure.
    opt = next(o for o in only8k.advice.options if o.action.startswith("--max-model-len"))
    assert opt.context_tokens == only8k.advice.estimated_max_model_len_low and opt.max_requests == 1
    assert "fits even at the low end of the range" in opt.detail
    # ... and it can be pasted: the flag value is a plain integer (a grouped "47,040" is refused by --max-model-len,
    # whose lists elsewhere split on commas)
    from kvledger.units import parse_tokens

    assert parse_tokens(opt.action.split()[-1], what="--max-model-len") == opt.context_tokens


def test_settings_that_cannot_be_meant_are_refused():
    import pytest

    from kvledger.errors import InputError
    m, g = load_model("meta-llama/Llama-3.1-8B"), get_gpu("h100")
    for kw, text in ((dict(engine="sglang", engine_version="v-next"), "not an SGLang version"),
                     (dict(available_kv_memory_bytes=500 * GiB), "more than the whole device"),
                     (dict(block_size=7), "vLLM accepts 1, 8, 16")):
        with pytest.raises(InputError, match=text):
            build_plan(m, g, make_settings(**kw))


def test_low_concurrency_that_fits_still_lists_the_fixes():
    """Issue 21: Llama-3.1-70B at TP 2 on H100 fits one 8K request (980 blocks ÷ 512 per request = 1.91x): under 8, so
    the fixes that raise it are listed, each re-planned: FP8 KV doubles the blocks (1,960 ÷ 512 = 3.83x), FP8 weights
    and TP 4 free far more memory for KV."""
    p = build_plan(load_model("meta-llama/Llama-3.1-70B"), get_gpu("H100"), make_settings(tp=2, max_model_len=8192))
    a = p.advice
    assert a.verdict == "fits" and "only 1 at once at max_model_len (under 8, kvledger lists fixes)" in a.message
    by = {o.action: o for o in a.options}
    assert set(by) == {"--tp 4", "--kv-cache-dtype fp8", "-q fp8"}
    assert by["--kv-cache-dtype fp8"].max_concurrency == 2 * p.memory.num_gpu_blocks / 512
    assert by["-q fp8"].max_requests > 8 and by["--tp 4"].max_requests > by["-q fp8"].max_requests
    # 8B on H100 holds dozens of 8K requests: no advice to act on
    q = build_plan(load_model("meta-llama/Llama-3.1-8B"), get_gpu("H100"), make_settings(max_model_len=8192))
    assert q.advice.verdict == "fits" and q.advice.options == ()


def test_sglang_plan_short_of_max_model_len_says_sglang_starts_and_caps_requests():
    # RTX 4090, Llama-3.1-8B, SGLang 0.5.23 rules: a pool of 9,613 token slots, below 16,384 (mem_fraction_static
    # 0.704: 24,564 MiB, reserved 512 + 1.5 × 4,096 + 2 × 48 + 400 (50 prefill graph sizes up to 4,096 × 8 MiB)
    # + 128 = 7,280 MiB, round(17,284 / 24,564, 3) = 0.704; 12,640 slots at 0.72 without the prefill graphs).
    # SGLang warns and starts (tp_worker.py get_worker_info): max_req_len = min(16,383, 9,612) = 9,612, prompts
    # ≥ 9,612 − 5 = 9,607 aborted.
    p = build_plan(load_model("meta-llama/Llama-3.1-8B"), get_gpu("RTX 4090"),
                   make_settings(engine="sglang", max_model_len=16384), with_roofline=False)
    assert (p.memory.pool_tokens, p.memory.fraction) == (9613, 0.704)
    assert p.advice.verdict == "served_at_lower_len" and p.advice.estimated_max_model_len == 9613
    assert "SGLang starts" in p.advice.message and "= 9,612 (managers/tp_worker.py" in p.advice.message
    assert "prompts of 9,607 tokens or more" in p.advice.message


def test_fp8_weights_are_offered_when_max_model_len_does_not_fit():
    # Llama-3.1-70B at TP 2 on H100: 2.36 GiB of KV per GPU, one 131,072-token request needs 20.00 GiB
    # (2 × 80 layers × 4 KV heads per GPU × 128 × 2 B = 160 KiB/token per GPU). vLLM's --quantization fp8 halves the
    # weights (65.74 → 33.87 GiB per GPU): 34.24 GiB of KV, 34.24 / 20.00 = 1.71 requests, so one fits
    # (fresh-user trial: the fix was offered only when the plan already fitted).
    p = build_plan(load_model("meta-llama/Llama-3.1-70B"), get_gpu("h100"), make_settings(tp=2), with_roofline=False)
    assert p.advice.verdict == "max_model_len_does_not_fit"
    fp8 = next(o for o in p.advice.options if o.action == "-q fp8")
    assert fp8.max_requests == 1 and round(fp8.max_concurrency, 2) == 1.71 and "34.24 GiB KV per GPU" in fp8.detail


def test_fp8_kv_fix_cites_vllm_code_only_for_vllm():
    # without the prefill graphs' 400 MiB (their default reserve leaves 6,668 slots, too few for FP8 KV to help)
    sg = build_plan(load_model("Qwen/Qwen3-8B"), get_gpu("rtx4090"),
                    make_settings(engine="sglang", max_model_len=16384, disable_prefill_cuda_graph=True),
                    with_roofline=False)
    # SGLang names its FP8 KV formats fp8_e4m3 and fp8_e5m2: the fix is spelt as SGLang takes it
    kv = next(o for o in sg.advice.options if o.action == "--kv-cache-dtype fp8_e4m3")
    assert "kv_cache_interface.py" not in kv.detail and "halve" in kv.detail
    assert all(o.action != "-q fp8" for o in sg.advice.options)  # --quantization fp8 is a vLLM flag


def test_max_model_len_advice_uses_the_block_range_low_end():
    # 70B at TP 2 on H100: the plan's block range is 398–1,202 blocks of 16 tokens (point 969). vLLM keeps block 0 as
    # its null block (block_pool.py), so the low end leaves 397 usable blocks: 397 × 16 = 6,352 tokens for one
    # full-attention request; the point's 968 usable blocks give 968 × 16 = 15,488.
    p = build_plan(load_model("meta-llama/Llama-3.1-70B"), get_gpu("h100"), make_settings(tp=2), with_roofline=False)
    assert p.memory.ranges["num_gpu_blocks"] == (398, 1202) and p.memory.num_gpu_blocks == 969
    a = p.advice
    assert a.estimated_max_model_len == 968 * 16 == 15488
    assert a.estimated_max_model_len_low == 397 * 16 == 6352
    assert "--max-model-len 6352" in [o.action for o in a.options]
    # the two figures of the pool are reconciled in the message: 969 blocks less the null block = 968 usable
    assert "968 usable blocks hold (969 blocks, 2.37 GiB available, less vLLM's null block" in a.message
    assert "at the range's low end 6,352, the length that starts for sure" in a.message


def test_a_tp_past_one_server_says_its_all_reduces_cross_the_network():
    # DeepSeek-V3 (FP8, 671B) on RTX PRO 6000s at TP 8: 79.55 GiB of weights per GPU leave 2.92 GiB of KV, too little
    # for one 163,840-token request, and the first TP that fits is 16 — two 8-GPU servers, so the advice names the
    # network between them and the layout that keeps TP within one (PP 2 × TP 8); a 70B at TP 4 says nothing of it
    p = build_plan(load_model("deepseek-ai/DeepSeek-V3"), get_gpu("RTX PRO 6000"), make_settings(tp=8))
    tp = next(o for o in p.advice.options if o.action.startswith("--tp"))
    # 16 PCIe cards: more than a 10-slot server holds, so the re-plan assumed 2 nodes and the fix says so (node_size.py)
    assert tp.action == "--tp 16 --nnodes 2"
    assert "TP 16 spans 2 servers of 8 GPUs" in tp.detail and "--pp 2 --tp 8" in tp.detail
    small = build_plan(load_model("meta-llama/Llama-3.1-70B"), get_gpu("H100"), make_settings())
    assert all("servers" not in o.detail for o in small.advice.options)
