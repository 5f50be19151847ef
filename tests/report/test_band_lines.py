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


def test_band_sources_said_once_with_each_figures_range_and_whose_errors():
    # the RTX 4090 trial: two sources, the same words but their ranges, each ~1,000 characters, on one line
    from kvledger.report.band_words import band_source_lines

    src = ("GPU profile bundled:rtx-4090.json (fitted on Llama-3.1-8B/vllm; vLLM 0.19.0): calibrated regime "
           "gpu/dense/vllm: errors of GPU profiles fitted on other models, on 31 measured points (on H100; "
           "error_bands.json): {a}; measured on NVIDIA H100 80GB SXM5 only, not on NVIDIA GeForce RTX 4090: its "
           "width a floor for the error there, not a measurement")
    lines = band_source_lines({"TTFT mean": src.format(a="-64.7% … +183.1%"),
                               "TPOT mean": src.format(a="-7.1% … +7.6%")})
    assert lines == [
        "GPU profile bundled:rtx-4090.json (fitted on Llama-3.1-8B/vllm; vLLM 0.19.0)",
        "calibrated regime gpu/dense/vllm: errors of GPU profiles fitted on other models, on 31 measured points (on "
        "H100; error_bands.json): [TTFT mean -64.7% … +183.1%, TPOT mean -7.1% … +7.6%]",
        "the band's errors were measured on NVIDIA H100 80GB SXM5 only, none on NVIDIA GeForce RTX 4090: its width a "
        "floor for the error on the NVIDIA GeForce RTX 4090, not a measurement"]


def test_clauses_only_some_figures_have_name_them():
    from kvledger.report.band_words import band_source_lines

    lines = band_source_lines({"TTFT mean": "lodo errors; 24 deployments", "TPOT mean": "a profile's own band"})
    assert lines == ["TTFT mean only: lodo errors", "TTFT mean only: 24 deployments",
                     "TPOT mean only: a profile's own band"]


def test_render_bands_prints_short_lines():
    # two bands of the same words: no printed line carries a source twice
    src = "regime gpu/dense/vllm: errors on 31 measured points (H100): {a}"
    out = _text({"ttft_mean": PredictionBand(0.1, 0.05, 0.3, "gpu/dense/vllm", 31, src.format(a="-64.7% … +183.1%")),
                 "tpot_mean": PredictionBand(0.01, 0.009, 0.011, "gpu/dense/vllm", 31, src.format(a="-7.1% … +7.6%"))})
    assert out.count("errors on 31 measured points") == 1
    assert "  from: regime gpu/dense/vllm: errors on 31 measured points (H100): [TTFT mean -64.7% … +183.1%, TPOT " \
           "mean -7.1% … +7.6%]" in out
