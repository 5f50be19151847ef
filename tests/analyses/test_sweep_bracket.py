"""A rate sweep's bracket of the SLO capacity in ``cost``: the boundary run, under-loaded on its own, is bounded
above by the next measured run that misses (as ``goodput --target`` says), not left open-ended."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kvledger.analyses.serving.sweep_bracket import bracketed, sweep_upper_multiplier
from kvledger.ledgers.cost_summary import DecisionInputs


def _sweep(meets: float, misses: float | None) -> SimpleNamespace:
    return SimpleNamespace(boundary=SimpleNamespace(boundary_value=meets, first_failing_value=misses,
                                                    axis="request_rate"))


def _basis(status: str) -> SimpleNamespace:
    return SimpleNamespace(load_check=SimpleNamespace(status=status), warning="the run looks UNDER-LOADED", notes=[])


def test_the_next_run_that_misses_bounds_the_capacity_from_above():
    # the kubecon inference-perf sweep: 92.19 req/s meets, 122.59 misses: at most ×(122.59 ÷ 92.19) = ×1.330
    inputs = DecisionInputs(capacity_band=0.1, band_source="run-to-run variation")
    basis = _basis("under_loaded")
    lower, got = bracketed(basis, _sweep(92.19, 122.59), inputs)
    assert lower is False and basis.warning is None
    assert got.band_sides == (0.1, pytest.approx(122.59 / 92.19 - 1))
    assert got.capacity_band == pytest.approx(0.3298, abs=1e-4)
    assert basis.notes[0].startswith("the measured runs bracket the SLO capacity: between 92.19 req/s")
    assert "at most ×1.33 the one priced" in basis.notes[0]


def test_without_a_run_above_that_misses_the_run_stays_a_lower_bound():
    assert sweep_upper_multiplier(_sweep(92.19, None)) is None
    assert sweep_upper_multiplier(None) is None
    inputs = DecisionInputs()
    assert bracketed(_basis("under_loaded"), _sweep(92.19, None), inputs) == (True, inputs)
    assert bracketed(_basis("not_flagged"), _sweep(92.19, 122.59), inputs) == (False, inputs)
