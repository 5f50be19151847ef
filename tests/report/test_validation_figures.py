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
