"""The MI300X start-ups counted leave-one-out: each refitted on the others at its TP (doctor/rocm_loo.py)."""

from __future__ import annotations

import pytest

from kvledger.analyses.doctor.public_startups import PublicReplay, PublicTerm
from kvledger.analyses.doctor.rocm_loo import in_rocm_fit, leave_one_out_rocm


def _row(i: int, tp: int, note: str = "") -> dict[str, str]:
    return {"id": f"R{i}", "gpu": "amd_mi300x", "vllm_version": "0.14.1", "tp": str(tp), "pp": "1",
            "version_note": note, "checks": "weights;available;tokens", "weights_gib": "60.0"}


def _rep(avail_pred: float, avail_printed: float, w_pred: float = 60.0) -> PublicReplay:
    return PublicReplay("R", "", "0.14.1", "AMD Instinct MI300X", "TP4 PP1", (
        PublicTerm("weights", w_pred, 60.0, w_pred, w_pred),
        PublicTerm("available KV", avail_pred, avail_printed, avail_pred - 1.0, avail_pred + 1.0),
        PublicTerm("KV tokens", 1000.0, 1000.0, 900.0, 1100.0)))


def test_each_start_up_is_predicted_from_the_others_at_its_tp():
    # TP 4 table: point 1.62, low 1.55, high 1.74 GiB. Residual = 1.62 + (pred − printed avail) + (pred − printed w):
    # R0: 1.62 + 0.10 + 0 = 1.72; R1: 1.62 − 0.05 + 0 = 1.57; R2: 1.62 + 0 + 0.20 = 1.82 (its weights 0.2 high)
    rows = [_row(0, 4), _row(1, 4), _row(2, 4), _row(3, 4, note="0.13.1.dev8")]
    reps = [_rep(50.10, 50.0), _rep(49.95, 50.0), _rep(50.0, 50.0, w_pred=60.2), _rep(50.0, 52.0)]
    out, recs = leave_one_out_rocm(rows, reps)
    assert [r["id"] for r in recs] == ["R0", "R1", "R2"]  # the development build is not in the fit
    assert [r["residual_gib"] for r in recs] == pytest.approx([1.72, 1.57, 1.82])
    # R0 from R1 and R2: median 1.695, min 1.57, max 1.82 → available 50.10 + (1.62 − 1.695) = 50.025;
    # low 49.10 + (1.74 − 1.82) = 49.02; high 51.10 + (1.55 − 1.57) = 51.08
    av = out[0].terms[1]
    assert (av.predicted, av.low, av.high) == pytest.approx((50.025, 49.02, 51.08))
    assert recs[0]["loo_rel_error"] == pytest.approx(0.025 / 50.0)
    # tokens follow available KV, each end by its own ratio: 1000 × 50.025 / 50.10
    assert out[0].terms[2].predicted == pytest.approx(1000 * 50.025 / 50.10)
    assert out[3] is reps[3]  # outside the fit set: unchanged
    assert not in_rocm_fit(rows[3]) and in_rocm_fit(rows[0])
