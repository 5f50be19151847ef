"""A rate sweep's bracket of the SLO capacity, for ``kvledger cost`` on several files: the run priced (the last that
meets the target) may look under-loaded on its own — every request met the SLO, so its goodput is its offered load —
but the next measured run, which misses, bounds the capacity from above. The capacity then lies between the two loads,
as ``kvledger goodput --target`` says ("the measured runs bracket it"), not below an open-ended lower bound: the
decision's capacity band takes the bracket as its upper side (its lower side stays the run-to-run variation)."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

__all__ = ["sweep_upper_multiplier", "bracketed_inputs", "bracket_note", "bracketed"]

_UNITS = {"request_rate": " req/s", "concurrency": " concurrent users"}


def sweep_upper_multiplier(sweep: Any) -> float | None:
    """The next measured load that misses ÷ the load priced (``cost_run.SweepCapacity``): how much higher the capacity
    can be; None without a sweep or without a missing run above the one priced."""
    b = getattr(sweep, "boundary", None)
    if b is None or b.boundary_value is None or b.first_failing_value is None:
        return None
    if b.first_failing_value <= b.boundary_value:
        return None
    return b.first_failing_value / b.boundary_value


def bracket_note(sweep: Any, upper: float) -> str:
    """The capacity basis's note: the run at the sweep's boundary met the SLO at all its load (a lower bound on its
    own), and the next measured run misses, so the capacity lies between the two."""
    b = sweep.boundary
    unit = _UNITS.get(b.axis, "")
    return (f"the measured runs bracket the SLO capacity: between {b.boundary_value:g}{unit} (the run priced, the last "
            f"that meets the target; its goodput is its offered load, a lower bound on its own) and "
            f"{b.first_failing_value:g}{unit} (the next measured, which misses), so the capacity is at most "
            f"×{upper:.2f} the one priced and the self-hosted bill is at most that much too high; a run in between "
            "would narrow it")


def bracketed_inputs(inputs: Any, sweep: Any, upper: float) -> Any:
    """``inputs`` (``cost_summary.DecisionInputs``) with the capacity band's upper side set to the sweep's bracket
    (``upper`` − 1) and its source saying so; the lower side kept (run-to-run variation). None stays None."""
    if inputs is None:
        return None
    low = (inputs.band_sides or (inputs.capacity_band,) * 2)[0]
    b = sweep.boundary
    unit = _UNITS.get(b.axis, "")
    src = (f"{inputs.band_source}; above, the sweep's bracket: the next measured run, {b.first_failing_value:g}{unit}, "
           f"misses (×{upper:.2f} the {b.boundary_value:g}{unit} priced)")
    return replace(inputs, band_sides=(low, upper - 1.0), capacity_band=max(low, upper - 1.0), band_source=src)


def bracketed(basis: Any, sweep: Any, inputs: Any) -> tuple[bool, Any]:
    """(whether the capacity priced is only a lower bound, the decision inputs): an under-loaded run (``basis``'s load
    check) is one, unless the sweep's next run misses; then the capacity is bracketed: ``basis`` loses its under-load
    warning and leads its notes with the bracket, and ``inputs``' band takes the bracket as its upper side."""
    lower = basis.load_check is not None and basis.load_check.status == "under_loaded"
    upper = sweep_upper_multiplier(sweep) if lower else None
    if upper is None:
        return lower, inputs
    basis.warning = None
    basis.notes = [bracket_note(sweep, upper), *(basis.notes or [])]
    return False, bracketed_inputs(inputs, sweep, upper)
