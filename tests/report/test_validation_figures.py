"""The figures validate prints: a request rate to 4 significant figures, so a sweep's rate column reads alike."""

from __future__ import annotations

import pytest

from kvledger.report.validation_figures import fmt_rate, fmt_value


@pytest.mark.parametrize(("rate", "shown"), [
    (1.0, "1.000"),        # inference-perf's first stage (tests/evidence/data/inference-perf, requested_rate 1.0)
    (37.97, "37.97"),      # its second: 4 significant figures, all kept
    (111.92, "111.9"),     # its fourth: rounded to 4 figures
    (0.25, "0.2500"),
    (9.9996, "10.00"),     # rounds up a decade: still 4 figures, not 10.000
    (1250.0, "1,250"),
    (0.0, "0"),
])
def test_a_rate_has_four_significant_figures(rate, shown):
    assert fmt_rate(rate) == shown


@pytest.mark.parametrize(("v", "beside", "shown"), [
    (14.67, 9.5334, "14.67 s"),    # DistServe vllm-400-4's E2E p90 measured beside the replay's: both in s
    (9.5334, 14.67, "9.53 s"),     # …and the predicted beside it, not "9,533.4 ms"
    (9.5334, None, "9,533.4 ms"),  # alone, below 10 s: ms
    (0.0412, 0.0398, "41.2 ms"),   # both below 10 s: ms
])
def test_a_measured_and_predicted_latency_share_one_unit(v, beside, shown):
    assert fmt_value(v, "s", beside) == shown


def test_slow_rates_keep_three_significant_figures():
    from kvledger.report.validation_figures import fmt_value

    # a GuideLLM synchronous run on an Intel XPU: 19 requests in 760 s, 0.0250 req/s, against a simulated 0.0202: at two
    # decimals both read "0.03 req/s" (and "0.02") beside an error of −19%; below 1 the figure keeps 3 significant ones
    assert fmt_value(0.0250, "req/s") == "0.0250 req/s"
    assert fmt_value(0.0202, "req/s", 0.0250) == "0.0202 req/s"
    assert fmt_value(0.5, "req/s") == "0.500 req/s" and fmt_value(6.55, "req/s") == "6.55 req/s"
    assert fmt_value(0.0, "req/s") == "0.00 req/s"  # nothing served: as before


def test_a_sub_second_latency_in_a_seconds_column_keeps_three_significant_figures():
    from kvledger.analyses.serving.prediction_bands import PredictionBand
    from kvledger.report.validation_figures import band_span

    # inference-sim-training's Llama-2-7B sweep on H100 replayed at vLLM 0.11.0: the 8 req/s stage measured a mean TTFT
    # of 27.1 ms against a simulated 14.5 ms (−46.4%), while the 20 req/s stage's replay queued to 11.66 s, so the
    # column is in s. At two decimals the row read "0.03 s │ 0.01 s │ −46.4%" beside a band "12.8–50.4 ms": two
    # figures 46% apart printed one digit each, the band in another unit than the figures it judges
    assert fmt_value(0.0271, "s", 11.66) == "0.0271 s"
    assert fmt_value(0.01452, "s", 11.66) == "0.0145 s"
    assert fmt_value(0.0519, "s", 11.66) == "0.0519 s"
    assert fmt_value(11.66, "s", 0.0519) == "11.66 s" and fmt_value(0.0, "s", 11.66) == "0.00 s"
    band = PredictionBand(predicted=0.01452, low=0.0128, high=0.0504, regime="uncalibrated/dense/vllm", num_runs=31,
                          source="error_bands.json", unit="s")
    assert band_span(band, "s", 11.66) == "0.0128–0.0504 s"


def test_a_sweep_band_takes_the_unit_of_the_figures_it_judges():
    from types import SimpleNamespace as NS

    from kvledger.report.sweep_table import column_tops as _column_tops

    # the same sweep: its TTFT column tops at the 11.66 s replay, its TTFT bands at 0.0504 s; the band column used to
    # take its own top (ms: "12.8–50.4 ms") beside figures in s; now it takes the larger, 11.66 s, as its figures do
    rows = [[NS(metric="TTFT mean", measured=0.0271, predicted=0.01452), NS(metric="TPOT mean", measured=0.0082,
                                                                            predicted=0.0091)],
            [NS(metric="TTFT mean", measured=0.0519, predicted=11.66), NS(metric="TPOT mean", measured=0.0166,
                                                                          predicted=0.0265)]]
    runs = [NS(comparison=NS(rows=r)) for r in rows]
    bands = NS(ttft_mean=[NS(low=0.0128, high=0.0504), None], tpot_mean=[NS(low=0.0081, high=0.0097),
                                                                        NS(low=0.0237, high=0.0282)])
    top = _column_tops(NS(runs=runs, bands=bands), ["TTFT mean", "TPOT mean"])
    assert top == {"TTFT mean": 11.66, "TPOT mean": 0.0265, "ttft_mean": 11.66, "tpot_mean": 0.0282}
