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


class _Always(_Never):
    """A prober that meets the target at every rate (a probe too short to build a queue), recording the rates."""

    def meets(self, rate: float) -> bool:
        self.asked.append(rate)
        return True


def test_without_a_bound_a_tier_met_everywhere_stops_after_six_doublings_as_a_lower_bound():
    # start 1 req/s met, then 2, 4, 8, 16, 32, 64 (= 1 × 2^6) all met: 64 is only a lower bound, no rate found to miss
    p = _Always()
    assert tier_capacity(p, 1.0) == (64.0, None)  # type: ignore[arg-type]
    assert p.asked == [1.0, 2.0, 4.0, 8.0, 16.0, 32.0, 64.0]
    assert p.lower_bound is True


def test_the_doubling_stops_at_the_first_rate_met_at_or_above_the_capacity_bound():
    # bound 30 req/s: 8 met (< 30), 16 met (< 30), 32 met (≥ 30): stop there, found 32 (the caller sizes on 30);
    # no doubling to 64 … 512, and not a lower bound (the bound, not the doublings, ended it)
    p = _Always()
    assert tier_capacity(p, 8.0, 30.0) == (32.0, None)  # type: ignore[arg-type]
    assert p.asked == [8.0, 16.0, 32.0]
    assert p.lower_bound is False


def test_a_start_already_above_the_bound_is_not_doubled():
    # the base candidate's boundary (50 req/s, a short probe's) is above its bound (30): the start is met and is
    # already past the bound, so nothing above it is simulated
    p = _Always()
    assert tier_capacity(p, 50.0, 30.0) == (50.0, None)  # type: ignore[arg-type]
    assert p.asked == [50.0]
