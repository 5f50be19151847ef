"""The WDDM hold corpus (benchmarks/data/wddm_holds.csv) and the fit the plan's ``wddm.WDDM_HOLD_FIT`` is taken from."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvledger.accounting.wddm import WDDM_CONTEXT_GIB, WDDM_HOLD_FIT, WDDM_HOLD_RANGE_GIB
from kvledger.analyses.doctor.wddm_holds import (
    HoldRecord,
    fit_constant,
    fit_share,
    fit_wddm_hold,
    load_wddm_holds,
    wddm_hold_loco,
)

ROOT = Path(__file__).resolve().parents[2]
CSV = ROOT / "benchmarks" / "data" / "wddm_holds.csv"
RECS = {r.id: r for r in load_wddm_holds(CSV)}


def test_holds_are_total_less_free_less_the_process():
    # hold = total − free − torch memory − other context − 0.45 GiB (a Linux process's CUDA context, WDDM_CONTEXT_GIB):
    # W04 vLLM 0.27.1 on an RTX 5090 under WSL2, "(30.2/31.84 GiB) on startup": 31.84 − 30.2 − 0.45 = 1.19;
    # W20 a torch OOM on a 5090, 16.30 free, 6.74 allocated + 7.02 reserved: 31.84 − 16.30 − 13.76 − 0.45 = 1.33;
    # W17 vLLM 0.28.0 on an RTX 4060 Laptop with a parent's ~90 MB context: 8.0 − 6.93 − 0.084 − 0.45 = 0.536;
    # W15 a fresh torch process on an RTX 4070 SUPER (Windows): 12,282 − 11,071 MiB → 11.994 − 10.812 − 0.45 = 0.732.
    assert WDDM_CONTEXT_GIB[1] == 0.45
    got = [RECS[i].hold_gib for i in ("W04", "W20", "W17", "W15")]
    assert got == pytest.approx([1.19, 1.33, 0.536, 0.732], abs=1e-9)
    assert len(RECS) == 24 and len({r.card for r in RECS.values()}) == 14
    assert {r.board_gib for r in RECS.values()} == {8.0, 11.99, 11.994, 12.0, 15.92, 15.99, 23.99, 24.0, 31.84}


def test_theil_sen_by_hand():
    # (8, 0.6), (8, 0.7), (16, 0.9), (32, 1.3): the two 8 GiB records give no slope; the slopes of the others are
    # 0.3/8 = 0.0375, 0.2/8 = 0.025, 0.7/24 = 0.029167, 0.6/24 = 0.025, 0.4/16 = 0.025 → median 0.025; intercepts
    # 0.6 − 0.2 = 0.4, 0.7 − 0.2 = 0.5, 0.9 − 0.4 = 0.5, 1.3 − 0.8 = 0.5 → median 0.5.
    recs = [HoldRecord("a", "x", 8, 0.6), HoldRecord("b", "y", 8, 0.7), HoldRecord("c", "z", 16, 0.9),
            HoldRecord("d", "w", 32, 1.3)]
    assert fit_wddm_hold(recs) == pytest.approx((0.5, 0.025))
    assert fit_constant(recs) == pytest.approx((0.8, 0.0))  # median of 0.6, 0.7, 0.9, 1.3
    assert fit_share(recs) == pytest.approx((0.0, (0.05625 + 0.075) / 2))  # median of 0.075, 0.0875, 0.05625, 0.040625


def test_the_plans_fit_is_the_corpus_fit_and_covers_every_record():
    # re-fitted: 0.3934 + 0.02827 × board GiB, rounded to the constants (0.393, 0.0283)
    a, b = fit_wddm_hold(list(RECS.values()))
    assert a == pytest.approx(WDDM_HOLD_FIT[0], abs=5e-4) and b == pytest.approx(WDDM_HOLD_FIT[1], abs=5e-5)
    # the range about the line holds every record: residuals from −0.282 (W03) to +1.677 (W09)
    res = {i: r.hold_gib - (a + b * r.board_gib) for i, r in RECS.items()}
    assert min(res, key=res.get) == "W03" and max(res, key=res.get) == "W09"
    assert WDDM_HOLD_RANGE_GIB[0] <= min(res.values()) and max(res.values()) <= WDDM_HOLD_RANGE_GIB[1]
    # the context's range moves the intercept by −0.06 (0.51 GiB) and +0.08 (0.37 GiB), the slope not at all
    for c, shift in ((WDDM_CONTEXT_GIB[0], 0.08), (WDDM_CONTEXT_GIB[2], -0.06)):
        a2, b2 = fit_wddm_hold(load_wddm_holds(CSV, c))
        assert (a2 - a, b2) == pytest.approx((shift, b))


def test_leave_one_card_out_prefers_the_board_size_line():
    # each card's records predicted by the fit on the other 13 cards: the line errs 0.208 GiB per record (0.180 per
    # card); an absolute hold 0.484 (0.448) and a share of the board 0.477 (0.366): small boards hold a larger share
    recs = list(RECS.values())
    line, const, share = (wddm_hold_loco(recs, f) for f in (fit_wddm_hold, fit_constant, fit_share))
    assert (line["per_record"], line["per_card"]) == pytest.approx((0.208, 0.180), abs=0.001)
    assert (const["per_record"], const["per_card"]) == pytest.approx((0.484, 0.448), abs=0.001)
    assert (share["per_record"], share["per_card"]) == pytest.approx((0.477, 0.366), abs=0.001)
