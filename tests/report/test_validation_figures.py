"""The figures validate prints: a request rate to 4 significant figures, so a sweep's rate column reads alike."""

from __future__ import annotations

import pytest

from kvledger.report.validation_figures import fmt_rate


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
