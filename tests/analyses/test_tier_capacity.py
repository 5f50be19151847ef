"""tier_capacity's doubling/halving around a start rate, with a fake prober whose answer is known (no simulation)."""

from __future__ import annotations

from kvledger.analyses.search.tier_probe import tier_capacity


class _Never:
    """A prober that misses the target at every rate, recording the rates it was asked."""

    lower_bound = False

    def __init__(self) -> None:
        self.asked: list[float] = []

    def meets(self, rate: float) -> bool:
        self.asked.append(rate)
        return False


def test_a_tier_missing_everywhere_reports_the_lowest_rate_it_simulated():
    # start 8 req/s misses, then 6 halvings: 4, 2, 1, 0.5, 0.25, 0.125 (= 8 / 64) all miss; the lowest rate found to
    # miss is 0.125 — the next halving (0.0625) was never simulated, so it must not be reported
    p = _Never()
    assert tier_capacity(p, 8.0) == (None, 0.125)  # type: ignore[arg-type]
    assert p.asked == [8.0, 4.0, 2.0, 1.0, 0.5, 0.25, 0.125]
