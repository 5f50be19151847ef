"""A model-scope fit compared with the step cost it started from on its own runs (the kubecon stages' trial: TPOT
fitted at +27.6% where the uncalibrated default gave +1.8%, with no comparison printed)."""

from __future__ import annotations

import pytest

from kvledger.calibration.model_default import against_default


def rows(*errors: tuple[float, float, float]) -> list[dict]:
    return [{"label": f"s{i}", "ttft_mean_rel_error": t, "tpot_mean_rel_error": p, "throughput_rel_error": x}
            for i, (t, p, x) in enumerate(errors)]


def test_each_metrics_mean_abs_error_under_both_and_where_the_fit_is_worse():
    fitted = rows((-0.276, 0.276, -0.001), (-0.210, 0.277, 0.0), (-0.391, -0.063, -0.002))
    default = rows((0.40, 0.018, -0.05), (0.30, 0.020, -0.04), (0.50, -0.016, -0.03))
    a = against_default(fitted, default)
    # TTFT: (0.276 + 0.210 + 0.391)/3 = 0.2923 fitted, (0.40 + 0.30 + 0.50)/3 = 0.40 default
    # TPOT: (0.276 + 0.277 + 0.063)/3 = 0.2053 fitted, (0.018 + 0.020 + 0.016)/3 = 0.018 default: worse
    assert a["metrics"]["TTFT mean"] == pytest.approx({"fitted": 0.29233, "default": 0.4}, rel=1e-4)
    assert a["metrics"]["TPOT mean"] == pytest.approx({"fitted": 0.20533, "default": 0.018}, rel=1e-4)
    assert a["worse"] == ["TPOT mean"]


def test_within_a_point_of_the_default_is_not_worse():
    a = against_default(rows((0.105, 0.05, 0.0)), rows((0.10, 0.05, 0.0)))
    assert a["worse"] == []


def test_no_default_rows_no_comparison():
    assert against_default(rows((0.1, 0.1, 0.1)), []) is None
