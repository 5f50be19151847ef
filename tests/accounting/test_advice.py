"""Plans that do not fit: the shortfall and each fix re-planned with numbers; never a zero concurrency passed off as valid."""

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
    fixed = build_plan(load_model("meta-llama/Llama-3.1-8B"), get_gpu("l4"), make_settings(max_model_len=a.estimated_max_model_len), with_roofline=False)
    assert fixed.advice.verdict == "fits" and fixed.row_at(a.estimated_max_model_len).max_requests == 1
