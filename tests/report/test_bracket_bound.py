"""The --target bracket says when the next measured point's miss is only bounded (an estimate from aggregates), and
the answer's run count is singular for one run."""

from __future__ import annotations

from types import SimpleNamespace

from kvledger.report.goodput_view import bracket_text


def boundary(estimate: bool) -> SimpleNamespace:
    points = [SimpleNamespace(value=8.0, label="c8", estimate=False, attainment=0.95),
              SimpleNamespace(value=16.0, label="c16", estimate=estimate, attainment=0.0)]
    return SimpleNamespace(boundary_value=8.0, first_failing_value=16.0, axis="concurrency", target=0.9, points=points)


RESULTS = [SimpleNamespace(run_label="c8", source="a", attainment_upper=None),
           SimpleNamespace(run_label="c16", source="b", attainment_upper=0.988)]


def test_an_estimated_next_point_is_said_to_be_bounded():
    text = bracket_text(boundary(True), RESULTS)
    assert ("16 concurrent users (the next measured, whose attainment is only bounded, [0.0%, 98.8%]: its lower "
            "bound misses, so the boundary may lie at or above it)") in text


def test_a_measured_miss_is_said_plainly():
    assert "16 concurrent users (the next measured, which misses)" in bracket_text(boundary(False), RESULTS)
