"""SGLang's mem_fraction_static default release by release (server_args.py of 0.4.0, 0.4.3, 0.4.6, 0.4.7,
0.4.8, 0.4.9, 0.5.0rc0–0.5.2, 0.5.3, 0.5.5, 0.5.10; 0.5.23's memory_hook.py), worked by hand; GPU memory as
nvidia-smi shows it, MiB."""

from __future__ import annotations

import pytest

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.accounting.sglang_rules import (
    parse_sglang_version,
    sglang_custom_all_reduce,
    sglang_preload_bytes,
    sglang_version_defaults,
)
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model
from kvledger.errors import InputError

H100_MIB, H200_MIB, RTX4090_MIB = 81_559, 143_771, 24_564


def _frac(v: str, mib: int, tp: int = 1) -> float:
    return sglang_version_defaults(parse_sglang_version(v), mib, tp).mem_fraction_static


def test_04x_fraction_by_tp_alone():
    # 0.4.0/0.4.3 __post_init__: 0.88 at TP 1, 0.87 at TP 2, 0.85 at TP 4, 0.81 at TP 8, 0.79 at TP 16, any GPU
    assert [_frac("0.4.0", H100_MIB, tp) for tp in (1, 2, 4, 8, 16)] == [0.88, 0.87, 0.85, 0.81, 0.79]
    assert _frac("0.4.3", RTX4090_MIB) == 0.88
    # below 25,000 MiB the prefill chunk is 2,048 tokens, else 8,192
    assert sglang_version_defaults((0, 4, 0), RTX4090_MIB, 1).chunked_prefill_size == 2048
    assert sglang_version_defaults((0, 4, 0), H100_MIB, 1).chunked_prefill_size == 8192


def test_046_keeps_13_gib_on_gpus_above_80_gib():
    # 0.4.6: H100 (81,559 ≤ 81,920 MiB) keeps the TP table; H200: (143,771 − 13 × 1,024) / 143,771 = 0.907408
    assert _frac("0.4.6", H100_MIB) == 0.88
    h200 = _frac("0.4.6.post1", H200_MIB)
    assert h200 == pytest.approx((143_771 - 13_312) / 143_771) and round(h200, 6) == 0.907408


def test_045_post3_brings_the_13_gib_rule():
    # 0.4.5.post3's server_args.py has 0.4.6's branch above 81,920 MiB; 0.4.5.post2's the TP table alone. Public
    # check: llm-ie-benchmarks' DeepSeek-R1 logs on 8 × H200 print mem_fraction_static=0.81 under 0.4.5.post2 and
    # 0.9074083090470262 = (143,771 − 13,312) / 143,771 under 0.4.5.post3
    assert _frac("0.4.5.post2", H200_MIB, 8) == 0.81
    assert _frac("0.4.5.post3", H200_MIB, 8) == pytest.approx(0.9074083090470262, abs=1e-12)
    assert _frac("0.4.5.post3", H100_MIB, 8) == 0.81  # at or below 81,920 MiB the table still holds


def test_047_own_rule():
    # 0.4.7: H100 table by TP×PP (0.87 at TP 2); H200 (143,771 MiB > 96 GiB): min(0.88 + 49,152 × 0.12 / 143,771,
    # (143,771 − 18,432) / 143,771) = min(0.92103, 0.87180) = 0.871796; B200-class above 180,000 MiB: 0.79
    assert _frac("0.4.7", H100_MIB, 2) == 0.87
    assert round(_frac("0.4.7", H200_MIB), 6) == round((143_771 - 18_432) / 143_771, 6) == 0.871796
    assert _frac("0.4.7", 183_359) == 0.79


def test_046_post2_takes_the_047_rule():
    # 0.4.6.post2–post5 server_args.py: 0.88 above 81,920 MiB, then above 96 GiB min(0.88 + 49,152 × 0.12 / 143,771,
    # (143,771 − 18,432) / 143,771) = 0.871796120...; sglang#6753 (H200, 2025-05-29) prints 0.8717961202189594.
    # 0.4.6.post1 still reserves 13 GiB (0.907408); the 180,000 MiB branch (0.79) arrives in 0.4.7 only:
    # 0.4.6.post5 on 183,359 MiB: min(0.88 + 49,152 × 0.12 / 183,359, (183,359 − 18,432) / 183,359) = 0.899476
    assert parse_sglang_version("0.4.6.post2") == (0, 4, 6, 2) and parse_sglang_version("0.4.9") == (0, 4, 9)
    assert _frac("0.4.6.post5", H200_MIB) == 0.8717961202189594 == _frac("0.4.6.post2", H200_MIB)
    assert round(_frac("0.4.6.post1", H200_MIB), 6) == 0.907408
    assert round(_frac("0.4.6.post5", 183_359), 6) == 0.899476 and _frac("0.4.7", 183_359) == 0.79
    assert _frac("0.4.6.post2", H100_MIB, 2) == 0.87  # the table by TP×PP below 81,920 MiB, as 0.4.7


def test_048_tier_matches_a_public_start_up():
    # https://github.com/sgl-project/sglang/issues/7478 (2025-06-23, DeepSeek-R1, --tp 16 over two 8×H100 nodes, no
    # --mem-fraction-static): its server_args print mem_fraction_static=0.78. 0.4.8's tier for < 90 GiB reserves
    # 9.5 + 16/2 = 17.5 GiB = 17,920 MiB: round((81,559 − 17,920) / 81,559, 3) = round(0.78029, 3) = 0.78
    # (0.4.7's table would give 0.79)
    assert _frac("0.4.8", H100_MIB, 16) == 0.78 and _frac("0.4.7", H100_MIB, 16) == 0.79


def test_049_to_052_reserve_by_memory_tier():
    # H100: 9.5 + 1/2 = 10 GiB = 10,240 MiB → round((81,559 − 10,240) / 81,559, 3) = round(0.87445, 3) = 0.874
    # H100 TP 8: 9.5 + 8/2 = 13.5 GiB = 13,824 → round(0.83050, 3) = 0.831 (0.5.2 the same code)
    # H200: 12 + 1/2 = 12.5 GiB = 12,800 → round(0.91097, 3) = 0.911; RTX 4090: 2.8 + 0.1 = 2,969.6 MiB → 0.879
    assert _frac("0.4.9", H100_MIB) == 0.874 and _frac("0.5.2", H100_MIB, 8) == 0.831
    assert _frac("0.5.0rc0", H200_MIB) == 0.911 and _frac("0.4.9", RTX4090_MIB) == 0.879


def test_053_reserve_from_chunk_and_graph_batch():
    # 0.5.3 H100: 512 + 1.5 × 8,192 + 2 × 256 + 1/8 × 1,024 = 13,440 MiB (above the 10 GiB floor) → 0.835, as 0.5.23
    # RTX 4090 (< 35 GiB: chunk 2,048, graphs 16 at TP < 4): 512 + 3,072 + 32 + 128 = 3,744 → round(0.84758, 3) = 0.848;
    # 0.5.5 raises the graph batch to 24: 3,760 → 0.847; 0.5.23 uses a 4,096 chunk and 48 graphs: 512 + 6,144 + 96 +
    # 128 = 6,880 → round(0.71992, 3) = 0.720
    assert _frac("0.5.3", H100_MIB) == _frac("0.5.23", H100_MIB) == 0.835
    assert (_frac("0.5.3", RTX4090_MIB), _frac("0.5.5", RTX4090_MIB), _frac("0.5.23", RTX4090_MIB)) == (0.848, 0.847,
                                                                                                         0.72)
    # TP 4 on a 4090: graphs 80, chunk 2,048: 512 + 3,072 + 160 + 512 = 4,256 → round(0.82674, 3) = 0.827
    assert _frac("0.5.10", RTX4090_MIB, 4) == 0.827


def test_0520_moves_the_20_to_35_gib_tier_to_a_4k_chunk():
    # arg_groups/memory_hook.py of the 0.5.19 and 0.5.20 wheels (PyPI): 0.5.19 still gives 20–35 GiB GPUs a 2,048 chunk
    # and 24 graphs (80 at TP ≥ 4); 0.5.20–0.5.23 a 4,096 chunk and 48 graphs (160 at TP ≥ 4). RTX 4090, TP 1:
    # 0.5.20: 512 + 1.5 × 4,096 + 2 × 48 + 128 = 6,880 MiB → round(17,684 / 24,564, 3) = 0.720 (0.5.19: 3,760 → 0.847);
    # TP 4: 512 + 6,144 + 2 × 160 + 512 = 7,488 → round(0.69516, 3) = 0.695 (0.5.19: 4,256 → 0.827).
    d19, d20 = (sglang_version_defaults(parse_sglang_version(v), RTX4090_MIB, 1) for v in ("0.5.19", "0.5.20"))
    assert (d19.chunked_prefill_size, d19.cuda_graph_max_bs, d19.mem_fraction_static) == (2048, 24, 0.847)
    assert (d20.chunked_prefill_size, d20.cuda_graph_max_bs, d20.mem_fraction_static) == (4096, 48, 0.72)
    assert (_frac("0.5.19", RTX4090_MIB, 4), _frac("0.5.20", RTX4090_MIB, 4), _frac("0.5.23", RTX4090_MIB, 4)) == (
        0.827, 0.695, 0.695)
    # other tiers do not move: the H100 keeps 0.835 in both
    assert _frac("0.5.19", H100_MIB) == _frac("0.5.20", H100_MIB) == 0.835


def test_sglang_plan_by_version_on_h100():
    # Llama-3.1-8B, H100 (81,090 MiB to CUDA), SGLang 0.4.9: free before load 85,029,027,840 − 450,971,566.08
    # (0.42 GiB held at TP 1) = 84,578,056,273.92 B; × 0.874 − 16,060,522,496 (weights) − 67,108,864 (float32 RoPE
    # buffer) − 1,564,672 (segment tails) − 69,793,218.56 (0.065 GiB measured load rest) = 57,722,231,932 B
    # → ÷ 131,072 = 440,385 tokens (0.5.23: 0.835 → 415,219, tests/accounting/test_other_engines.py)
    p = build_plan(load_model("meta-llama/Llama-3.1-8B"), get_gpu("h100"),
                   make_settings(engine="sglang", engine_version="0.4.9"), with_roofline=False, with_advice=False)
    assert (p.memory.fraction, p.memory.pool_tokens, p.memory.engine_version) == (0.874, 440_385, "0.4.9 rules")
    with pytest.raises(InputError, match="predates"):
        parse_sglang_version("0.3.6")


def test_sglang_memory_held_before_the_weights_by_custom_all_reduce():
    # custom_all_reduce.py (0.4.4.post1): world sizes 2, 4, 6, 8; above two GPUs only over full NVLink. The plan's point
    # (sglang_rules.SGLANG_PRELOAD_GIB): 0.42 GiB without it (median of 0.31, 0.38, 0.42, 0.60, 0.75 in public logs),
    # 2.67 GiB with it at TP 4–8 (sglang PR #11716, H200 TP 8: 139.96 − 137.29 GiB); TP 2 has no public log → 0.42.
    assert not sglang_custom_all_reduce(4, False) and sglang_custom_all_reduce(4, True)  # 4×L4 over PCIe vs 4×H100
    assert sglang_custom_all_reduce(2, False) and not sglang_custom_all_reduce(3, True)
    assert sglang_preload_bytes(1, True) == pytest.approx(0.42 * 2**30)
    assert sglang_preload_bytes(4, False) == pytest.approx(0.42 * 2**30)
    assert sglang_preload_bytes(2, True) == pytest.approx(0.42 * 2**30)
    assert sglang_preload_bytes(8, True) == pytest.approx(2.67 * 2**30)
