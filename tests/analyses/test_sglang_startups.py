"""The public SGLang start-ups replayed through the SGLang plan (benchmarks/data/sglang_public_startups.csv), worked
by hand from the printed lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvledger.analyses.doctor.sglang_startups import load_rows, printed_rest_bytes, replay_sglang_row

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
    # K + V = 106.62 GiB. Low end: (149,915,959,296 − 2.67 GiB) × 0.897 − 17,640,734,720 (weights) = 114,262,279,837 B
    # = 106.415 GiB ≤ 106.62 (with the 2.01 GiB used before, the low end was 107.007 and the log fell outside).
    x = replay_sglang_row(ROWS["SG02"], ROOT)
    av = next(t for t in x.terms if t.term == "available KV")
    assert av.low == pytest.approx(((149_915_959_296 - 2.67 * 2**30) * 0.897 - 17_640_734_720) / 2**30)
    assert av.inside and av.printed == pytest.approx(106.62)
