"""The public SGLang start-ups replayed through the SGLang plan (benchmarks/data/sglang_public_startups.csv), worked
by hand from the printed lines."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from kvledger.accounting.sglang_rules import SGLANG_LOAD_EXTRA_GIB
from kvledger.analyses.doctor.sglang_startups import (
    load_rows,
    printed_rest_bytes,
    replay_sglang_row,
    sglang_load_leave_one_out,
)

ROOT = Path(__file__).resolve().parents[2]
ROWS = {r["id"]: r for r in load_rows(ROOT / "benchmarks" / "data" / "sglang_public_startups.csv")}


def test_sg01_tokens_and_k_size_from_the_printed_memory():
    # 4×L4, QwQ-32B TP 4, SGLang 0.4.3.post4, printed: free before load 21.63, after 6.09, mem_fraction_static 0.85:
    # rest = 6.09 − 21.63 × 0.15 = 2.8455 GiB; each print ± 0.005 → ± 0.005 × 1.15 = ± 0.00575 GiB.
    # cell = 64 layers × (K + V) × 8/4 heads × 128 × 2 B = 65,536 B → floor(2.8455 × 2^30 / 65,536) = floor(46,620.7),
    # ends floor(2.83975 × 16,384) = 46,526 and floor(2.85125 × 16,384) = 46,714; the log prints 46,611 (inside).
    # K size 46,611 × 32,768 B / 2^30 = 1.4224 → "1.42 GB" as printed.
    rest, lo, hi = printed_rest_bytes(21.63, 6.09, 0.85)
    assert rest / 2**30 == pytest.approx(2.8455) and (hi - lo) / 2**30 == pytest.approx(0.0115)
    x = replay_sglang_row(ROWS["SG01"], ROOT)
    tok, ksize = x.from_printed
    assert (tok.low, tok.high, tok.printed, tok.inside) == (46_526, 46_714, 46_611, True)
    assert (ksize.predicted, ksize.printed) == (1.42, 1.42)
    # the default fraction at TP 4 in 0.4.3 (0.85) is what the server_args line prints
    assert next(t for t in x.terms if t.term == "mem_fraction_static default").predicted == 0.85


def test_sg02_h200_tp8_inside_the_pre_load_range():
    # H200 TP 8 (0.5.3 rule: chunk 8,192, graphs 512: 512 + 12,288 + 1,024 + 1,024 = 14,848 MiB → f = 0.897), printed
    # K + V = 106.62 GiB. Point: custom all-reduce at TP 8 holds 2.67 GiB before the weights (this row's own figure:
    # sglang_rules.SGLANG_PRELOAD_GIB); the load holds 17,640,734,720 B of weights, the float32 RoPE buffer
    # (131,072 × 128 × 4 = 67,108,864 B), segment tails of 4,702,208 B (embedding and lm_head 250.5 → 252 MiB each,
    # 161 norms of 16 KiB in two 2 MiB small segments: 3 MiB + 1,556,480 B) and 0.065 GiB measured:
    # (150,282,960,896 − 2.67 GiB) × 0.897 − 17,640,734,720 − 71,811,072 − 0.065 GiB = 106.590 GiB (−0.03 %).
    # Low end: (149,915,959,296 − 2.67 GiB) × 0.897 − … − 0.25% of the weights (44,101,836.80 B, vLLM's logged spread
    # transferred) − 0.19 GiB (the measured rest's top) = 106.117 GiB.
    x = replay_sglang_row(ROWS["SG02"], ROOT)
    av = next(t for t in x.terms if t.term == "available KV")
    load = 17_640_734_720 + 67_108_864 + 4_702_208
    assert av.predicted == pytest.approx(((150_282_960_896 - 2.67 * 2**30) * 0.897 - load) / 2**30 - 0.065)
    assert av.low == pytest.approx(((149_915_959_296 - 2.67 * 2**30) * 0.897 - load - 44_101_836.8) / 2**30 - 0.19)
    assert av.inside and av.printed == pytest.approx(106.62)


def test_sg05_sglang_docs_notebook_on_h100_within_a_tenth_of_a_percent():
    # https://docs.sglang.ai/start/send_request.html (run 2025-01-23, 0.4.1.post7): Llama-3.1-8B-Instruct, TP 1, printed
    # mem_fraction_static=0.88 (the 0.4.0–0.4.5 default at TP 1), "Load weight begin. avail mem=78.81 GB", "Load weight
    # end. ... avail mem=63.72 GB", K = V = 27.13 GB, max_total_num_tokens=444500.
    # Free before the load: 85,029,027,840 − 0.42 GiB (no custom all-reduce at TP 1) = 78.769 GiB (printed 78.81);
    # the load: weights 16,060,522,496 B + the RoPE buffer in bf16 (0.4.1.post7 casts it: 131,072 × 128 × 2 B =
    # 33,554,432) + segment tails 1,564,672 B (65 norms of 8 KiB in one 2 MiB small segment) + 0.065 GiB measured
    # = 15.055 GiB (printed 78.81 − 63.72 = 15.09);
    # K + V = (85,029,027,840 − 0.42 GiB) × 0.88 − 16,095,641,600 − 0.065 GiB = 58,263,254,702 B = 54.262 GiB
    # (printed 54.26: +0.00 %) → floor(/131,072 B per token) = 444,513 tokens (printed 444,500).
    x = replay_sglang_row(ROWS["SG05"], ROOT)
    t = {y.term: y for y in x.terms}
    assert t["mem_fraction_static default"].predicted == t["mem_fraction_static default"].printed == 0.88
    assert t["free before load"].predicted == pytest.approx((85_029_027_840 - 0.42 * 2**30) / 2**30)
    assert t["weights"].predicted == pytest.approx(16_095_641_600 / 2**30 + 0.065)
    assert t["available KV"].predicted == pytest.approx(58_263_254_702 / 2**30)
    assert round(t["available KV"].rel_error * 100, 2) == 0.0
    assert (t["KV tokens"].predicted, t["KV tokens"].printed) == (444_513, 444_500)
    assert all(y.inside for y in x.terms)


def test_sg08_pool_from_the_printed_memory_with_the_version_default_fraction():
    # https://github.com/MaxUhl98/Thesis/blob/main/inference_server/readme.md (SGLang of 2025-07-14, a 24 GB GeForce
    # planned as an RTX 4090 of 24,564 MiB): no server_args line, so the 0.4.8–0.5.2 default: 2.8 + 1/10 GiB reserved
    # below 35 GiB → round((24,564 − 2,969.6) / 24,564, 3) = 0.879. Free before the load = 7.37 + 15.02 = 22.39 GiB
    # (after + mem usage); rest = 7.37 − 22.39 × 0.121 = 4.66081 GiB, ± 0.005 × (1 + 0.121) GiB for the two 2-decimal
    # figures; × 8,192 tokens per GiB (131,072 B each): floor(38,135.4)–floor(38,227.3) = 38,135–38,227 ∋ 38,141.
    x = replay_sglang_row(ROWS["SG08"], ROOT)
    tok, ksize = x.from_printed
    assert (tok.low, tok.high, tok.printed, tok.inside) == (38_135, 38_227, 38_141, True)
    assert (ksize.predicted, ksize.printed) == (2.33, 2.33)


def test_sg09_rtx3090_pool_from_the_printed_memory_and_the_default_fraction():
    # https://github.com/jerryzsj/my-deepseek-r1/blob/main/README.md (lmsysorg/sglang:latest on 2025-02-04; the printed
    # server_args fields are 0.4.2.post1's): DeepSeek-R1-Distill-Qwen-7B (Qwen2.5-7B's shapes) on an RTX 3090, TP 1,
    # compose.yaml passes no memory flag. Printed: mem_fraction_static=0.88 (the 0.4.x default at TP 1), "Load weight
    # begin. avail mem=22.76 GB", "Load weight end. ... avail mem=8.37 GB", "K size: 2.82 GB",
    # max_total_num_tokens=105531. rest = 8.37 − 22.76 × 0.12 = 5.6388 GiB ± 0.005 × 1.12;
    # cell = 28 layers × (K + V) × 4 heads × 128 × 2 B = 57,344 B:
    # floor(5.6332 × 2^30 / 57,344) = 105,479 to floor(5.6444 × 2^30 / 57,344) = 105,688 ∋ 105,531;
    # K size 105,531 × 28,672 B / 2^30 = 2.818 → "2.82 GB". Weights: 15,231,233,024 B + RoPE buffer in float32
    # (32,768 × 128 × 4 = 16,777,216 B) + segment tails 105,239,552 B (28 layers × (q/k/v 31.5 → 32, o_proj
    # 24.5 → 26, gate/up 259 → 260, down 129.5 → 130 MiB) = 98 MiB, embedding and lm_head 1,039.5 → 1,040 MiB, the
    # small pool's 666,624 B in one 2 MiB segment) + 0.065 GiB = 14.364 GiB against 22.76 − 8.37 = 14.39 (−0.18 %).
    x = replay_sglang_row(ROWS["SG09"], ROOT)
    tok, ksize = x.from_printed
    assert (tok.low, tok.high, tok.printed, tok.inside) == (105_479, 105_688, 105_531, True)
    assert (ksize.predicted, ksize.printed) == (2.82, 2.82)
    t = {y.term: y for y in x.terms}
    assert t["mem_fraction_static default"].predicted == t["mem_fraction_static default"].printed == 0.88
    load = 15_231_233_024 + 16_777_216 + 105_239_552
    assert t["weights"].predicted == pytest.approx(load / 2**30 + 0.065) and t["weights"].inside


def test_load_overhead_refit_and_leave_one_out():
    # The six start-ups that print "Load weight end. ... mem usage", less the parameters, the RoPE buffer and the
    # segment tails the plan computes: SG01 15.54 − 15.541 = −0.001 (test_sglang_load.py), SG05 0.100, SG06 0.089,
    # SG07 0.041, SG08 −0.001(5), SG09 0.091 GiB. Median (0.041 + 0.089) / 2 ≈ 0.065, the plan's point.
    # Leave one out: SG01's others sort −0.0015, 0.041, 0.089, 0.091, 0.100 → median 0.089, error −0.001 − 0.089 =
    # −0.090; SG08 likewise −0.090; SG05's others −0.0015, −0.001, 0.041, 0.089, 0.091 → 0.041, error +0.059.
    # High end by the docstring's rule: largest residual 0.100 + largest |error| 0.090 = 0.190 → 0.19 GiB.
    loo = {k: (x, e) for k, x, e in sglang_load_leave_one_out(list(ROWS.values()), ROOT)}
    assert sorted(loo) == ["SG01", "SG05", "SG06", "SG07", "SG08", "SG09"]
    res = [x for x, _ in loo.values()]
    assert res == pytest.approx([-0.001, 0.100, 0.089, 0.041, -0.0015, 0.091], abs=0.0015)
    assert sorted(res)[2:4] == pytest.approx([0.041, 0.089], abs=0.001)
    lo, point, hi = SGLANG_LOAD_EXTRA_GIB
    assert (sorted(res)[2] + sorted(res)[3]) / 2 == pytest.approx(point, abs=0.0005)
    errs = {k: e for k, (_, e) in loo.items()}
    assert (errs["SG01"], errs["SG08"], errs["SG05"]) == pytest.approx((-0.090, -0.090, 0.059), abs=0.001)
    assert hi == math.ceil((max(res) + max(abs(e) for e in errs.values())) * 100) / 100 == 0.19
    assert lo < min(res) and max(res) < hi  # every logged residual inside the printed range
