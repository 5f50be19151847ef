"""simulate's band lines: a band that excludes its prediction (the regime's errors all on one side) is called out above
the fine print, with the direction, so a reader does not take the table's optimistic point at face value."""

from __future__ import annotations

import io

from rich.console import Console

from kvledger.analyses.serving.prediction_bands import PredictionBand
from kvledger.report.simulate_view import render_bands


def _text(bands) -> str:
    buf = io.StringIO()
    render_bands(bands, Console(file=buf, width=300, color_system=None))
    return buf.getvalue()


def test_a_band_wholly_above_the_point_says_under_predicted():
    # TTFT 30.5 ms with an uncalibrated band 37.1–314 ms (the bundled H100 azure-conv run's figures): measured runs
    # were slower than the simulator on this regime's points, so the point is under-predicted.
    out = _text({"ttft_mean": PredictionBand(0.0305, 0.0371, 0.314, "uncalibrated/dense/vllm", 34, "lodo")})
    assert "read the band, not the point: TTFT mean under-predicted" in out


def test_a_band_around_the_point_adds_no_warning():
    out = _text({"tpot_mean": PredictionBand(0.010, 0.009, 0.012, "gpu/dense/vllm", 10, "lodo")})
    assert "TPOT mean 10 ms (80% band 9–12 ms" in out and "read the band" not in out
