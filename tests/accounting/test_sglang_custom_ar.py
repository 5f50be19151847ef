"""SGLang's custom all-reduce in the step cost (sglang_rules.sglang_custom_ar_max_bytes): on by default for a TP group
inside one node with NVLink between every pair, up to 16 MiB in 0.5.23 (v2) and 8 MiB in 0.5.3 (legacy kernel)."""

from __future__ import annotations

import pytest

from kvledger.accounting.plan import build_plan
from kvledger.accounting.roofline_breakdown import decode_shape
from kvledger.accounting.settings import make_settings
from kvledger.accounting.sglang_rules import sglang_custom_ar_max_bytes
from kvledger.accounting.tp_comm import CA_LATENCY_S, link_bytes_per_s
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model


def test_the_custom_all_reduce_bound_by_release_and_topology():
    h200, l40s = get_gpu("h200-sxm"), get_gpu("L40S")
    # 0.5.23: SGLANG_CUSTOM_ALL_REDUCE_V2_MAX_SIZE_KB 16,384 KiB = 16 MiB; 0.5.3: _MAX_CAR_SIZE 8,192 KiB = 8 MiB
    assert sglang_custom_ar_max_bytes((0, 5, 23), 8, 1, h200, False) == 16 * 2**20
    assert sglang_custom_ar_max_bytes((0, 5, 3), 8, 1, h200, False) == 8 * 2**20
    # off: --disable-custom-all-reduce, a TP group over two nodes, TP 1, world size 3, 4 PCIe GPUs (no NVLink mesh)
    assert sglang_custom_ar_max_bytes((0, 5, 23), 8, 1, h200, True) == 0
    assert sglang_custom_ar_max_bytes((0, 5, 23), 8, 2, h200, False) == 0
    assert sglang_custom_ar_max_bytes((0, 5, 23), 1, 1, h200, False) == 0
    assert sglang_custom_ar_max_bytes((0, 5, 23), 3, 1, h200, False) == 0
    assert sglang_custom_ar_max_bytes((0, 5, 23), 4, 1, l40s, False) == 0
    # TP 2 needs no NVLink, only peer access (L40S: yes), but v2 wants NVLink between every pair: the legacy 8 MiB
    assert sglang_custom_ar_max_bytes((0, 5, 23), 2, 1, l40s, False) == 8 * 2**20
    assert sglang_custom_ar_max_bytes((0, 5, 23), 2, 1, get_gpu("RTX PRO 6000"), False) == 0  # no peer access


def test_sglang_and_vllm_decode_at_batch_1_pay_the_same_custom_all_reduce():
    # DeepSeek-V3 at TP 8 on H200, 4,096-token context, one sequence: each of 2 × 61 all-reduces carries 1 × 7,168 ×
    # 2 B = 14,336 B, under vLLM's 256 KiB (sm90, TP 8) and SGLang's 16 MiB: one-shot custom kernel, CA latency +
    # 7 × 14,336 B / link. Before, SGLang's step priced NCCL's 34.3 µs per call: 4.19 ms of all-reduces against 0.76.
    m, g = load_model("deepseek-ai/DeepSeek-V3"), get_gpu("h200-sxm")
    rcs = {e: build_plan(m, g, make_settings(tp=8, engine=e, contexts=(4096,)), with_advice=False).step_cost()
           for e in ("vllm", "sglang")}
    sg = getattr(rcs["sglang"], "inner", rcs["sglang"])
    link = link_bytes_per_s(g, None)
    expect = 122 * (CA_LATENCY_S + 7 * 14_336 / link)
    assert sg.costs(decode_shape(1, 4096)).allreduce_s == pytest.approx(expect, rel=1e-12)
    assert rcs["vllm"].costs(decode_shape(1, 4096)).allreduce_s == pytest.approx(expect, rel=1e-12)
    # batch 32: 458,752 B a call, over vLLM's 256 KiB (NCCL) but under SGLang's 16 MiB (two-shot custom kernel)
    assert sg.costs(decode_shape(32, 4096)).allreduce_s == pytest.approx(
        122 * (2 * CA_LATENCY_S + 7 * 458_752 / link), rel=1e-12)
