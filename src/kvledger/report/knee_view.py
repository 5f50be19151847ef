"""The words ``kvledger validate`` prints for a run at or past its knee (``RunValidation.at_knee``, from
``kvledger.calibration.knee_growth``): which side's waits for a first token grew, by how much, what the other side's
figures say, and what to compare instead. The single-run view and the sweep's share them."""

from __future__ import annotations

from typing import Any

from kvledger.analyses.serving.knee_rule import QUARTER_NAMES
from kvledger.report.validation_figures import fmt_value

__all__ = ["KNEE_MARK", "knee_shown", "knee_warning", "side_lines", "KNEE_MEANING"]

#: marks the latency errors of a run at or past its knee (TTFT and E2E: the queue's wait is in both)
KNEE_MARK = "↗"


#: what the mean-latency errors of a run at its knee measure (the views put "mean-latency errors" before it)
KNEE_MEANING = ("measure the queue, not a step-cost error of that size: near the knee the wait grows as "
                "1/(1 − utilisation), so a step time a few percent off moves it by seconds")


def knee_shown(knee: dict[str, Any] | None, saturated: dict[str, Any] | None) -> dict[str, Any] | None:
    """The knee block to print: ``knee`` with its ``sides`` cut to those not already called saturated (whose warning
    says more); None when none is left."""
    if knee is None:
        return None
    sides = [s for s in knee["sides"] if saturated is None or s not in saturated["sides"]]
    return {**knee, "sides": sides} if sides else None


def _growth(name: str, g: dict[str, Any], factor: float) -> str:
    """One side's quarters, from ``knee_growth.quarter_growth``'s figures."""
    first, peak, ratio = (fmt_value(g["first_s"], "s", g["peak_s"]), fmt_value(g["peak_s"], "s", g["first_s"]),
                          g["ratio"])
    where = QUARTER_NAMES[g["peak_quarter"]]
    if g["grew"]:
        return (f"{name}: its mean TTFT grew from {first} in the first quarter of its arrivals to {peak} in the "
                f"{where} ({ratio:.1f}×)")
    return (f"{name}: its mean TTFT went from {first} in the first quarter of its arrivals to at most {peak} in a "
            f"later one ({ratio:.1f}×, under {factor:g}×): its waits did not grow so")


def _stage_bound(m: dict[str, Any], sim: dict[str, Any] | None) -> str:
    """The measured side of a stage known by aggregates: the bound its TTFT mean and median put on any quarter."""
    head = ("measured: the stage file keeps its TTFT quantiles over the whole stage, not in arrival order, so whether "
            "its waits grew cannot be read")
    bound = m.get("quarter_ttft_mean_max_s")
    if bound is None:
        return head + "; it states no TTFT mean and median to bound them either"
    how = (f"no quarter of its requests can have averaged more than 4 × its mean {fmt_value(m['ttft_mean_s'], 's')} "
           f"− its median {fmt_value(m['ttft_p50_s'], 's')} = {fmt_value(bound, 's')} (the quarter between its median "
           "and 75th percentile took at least the median each)")
    if m.get("below_simulated_peak") and sim is not None:
        return (f"{head}; but {how}, below the simulated {fmt_value(sim['peak_s'], 's')}: the measured engine did "
                "not queue as the replay did — the simulated side grew")
    return f"{head}, and {how}: that does not rule out waits like the replay's"


def side_lines(knee: dict[str, Any]) -> list[str]:
    """Each side's figures, simulated first: its quarters, or for a stage known by aggregates the bound on them."""
    factor = knee["growth_factor"]
    out = [] if knee.get("simulated") is None else [_growth("simulated", knee["simulated"], factor)]
    m = knee.get("measured")
    if m is None:
        out.append("measured: its records do not give four quarters of arrivals to compare")
    elif "quarter_ttft_mean_max_s" in m:
        out.append(_stage_bound(m, knee.get("simulated")))
    else:
        out.append(_growth("measured", m, factor))
    return out


def knee_warning(knee: dict[str, Any]) -> str:
    """The warning under a single run's table: which side sat at or past its knee, what that means for the errors,
    and each side's figures on a line of its own."""
    sides = knee["sides"]
    one = len(sides) == 1
    which = f"the {sides[0]} run is" if one else f"the {' and the '.join(sides)} runs are"
    its = "its" if one else "their"
    return (f"WARNING: {which} at or past {its} knee ({its} waits for a first token grew through the run, short of "
            f"the saturation tests; rule: {knee['rule']}): mean-latency errors there {KNEE_MEANING}; TPOT is the "
            "step cost's figure to compare, and the saturation throughput (validate --sweep over the deployment's "
            "stages, or a run past saturation) its capacity's; "
            f"{KNEE_MARK} marks the latency errors the queue is in."
            + "".join(f"\n  {line}" for line in side_lines(knee)))
