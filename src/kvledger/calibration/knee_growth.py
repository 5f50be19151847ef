"""Whether a compared run sat at or past its knee: its waits for a first token grew through the run, though its queue
did not grow enough for the saturation tests (``kvledger.calibration.saturation``).

The rule (``KNEE_GROWTH``): the arrivals, in order, are cut into four quarters, and the mean TTFT of each quarter is
read; the run is at or past its knee when a later quarter's mean is at least twice the first quarter's. TTFT stands
for the wait: it is the time in the engine's waiting queue plus the request's own prefill.

Why twice, from queueing: a run starts with an empty queue, so its first quarter is its least-queued stretch. Under
a load the engine sustains, the queue settles long before a quarter of a run of thousands of requests is over, and
every quarter's mean TTFT is about the same (ratio ≈ 1; the empty start only lowers the first). At the knee
(utilisation ρ = 1) the queue of a run started empty grows as √t, so the last quarter's mean wait is
(1 − 0.75^1.5) / 0.25^1.5 = 2.8 × the first's; past it the queue grows linearly and the ratio is 7 (7/8 ÷ 1/8).
Just below the knee the queue's excursions last about 1/(1 − √ρ)² service times, a good part of the run, and a
quarter caught in one waits several times longer than the first. Twice lies between the settled 1 and the knee's
2.8, and it means a later quarter spent at least as long queued as the first quarter spent in all (its prefill
included): queueing, not the step cost, makes up at least half of that quarter's TTFT. The saturation tests stay as
they are: they size capacity searches, and a run just past its knee (its backlog under 5 % of its requests, its
engine serving nearly all of the rate) passes them.

A stage known only by aggregates keeps its TTFT quantiles over the whole stage, not in arrival order, so whether its
waits grew cannot be read. Its mean and median still bound every quarter of it: the quarter of requests between the
median and the 75th percentile took at least the median each, so no N/4 requests can have averaged more than
4 × mean − median (``stage_quarter_bound``). Below the replay's peak quarter, that bound says the measured engine
did not queue as the replay did.
"""

from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["KNEE_GROWTH", "quarter_growth", "stage_quarter_bound", "at_knee", "KNEE_RULE"]

#: a later quarter of the arrivals' mean TTFT ÷ the first quarter's, at least (module docstring)
KNEE_GROWTH = 2.0
#: requests per quarter below which the quarters are not read (as ``saturation.waits_grew``)
MIN_PER_QUARTER = 5

KNEE_RULE = (f"the mean TTFT of a later quarter of the arrivals ≥ {KNEE_GROWTH:g} × the first quarter's "
             "(kvledger.calibration.knee_growth)")


def quarter_growth(run: Any) -> dict[str, Any] | None:
    """The mean TTFT (s) of each quarter of ``run``'s arrivals (requests with a first token, in arrival order, cut as
    evenly as they divide), the first quarter's, the largest later one's (``peak_s``, its quarter 2–4), their ratio
    and whether it reached ``KNEE_GROWTH`` (``grew``). None when a quarter would hold fewer than ``MIN_PER_QUARTER``
    requests or the first quarter's mean is not positive."""
    from kvledger.ledgers.columns import columns_from

    cols = columns_from(run)
    order = np.argsort(cols.arrival_s, kind="stable")
    ttft = cols.ttft_s()[order]
    ttft = ttft[np.isfinite(ttft)]
    if ttft.size < 4 * MIN_PER_QUARTER:
        return None
    means = [float(q.mean()) for q in np.array_split(ttft, 4)]
    first = means[0]
    if not first > 0:
        return None
    peak_q = 1 + int(np.argmax(means[1:]))
    peak = means[peak_q]
    return {"quarter_ttft_mean_s": means, "first_s": first, "peak_s": peak, "peak_quarter": peak_q + 1,
            "ratio": peak / first, "grew": peak >= KNEE_GROWTH * first}


def stage_quarter_bound(stats: dict[str, Any] | None) -> dict[str, Any]:
    """The most any quarter of a stage's requests can have averaged for a first token (``quarter_ttft_mean_max_s``,
    s: 4 × TTFT mean − TTFT median, module docstring; None when the stage states no mean or no median), with the
    stage's TTFT mean and median (s) it was read from."""
    ttft = (stats or {}).get("ttft") or {}
    mean, p50 = ttft.get("mean"), ttft.get("p50")
    bound = None if mean is None or p50 is None else max(4.0 * float(mean) - float(p50), 0.0)
    return {"ttft_mean_s": mean, "ttft_p50_s": p50, "quarter_ttft_mean_max_s": bound,
            "from": "4 × TTFT mean − TTFT median of the stage file"}


def at_knee(measured: Any, simulated: Any, stage: Any = None) -> dict[str, Any] | None:
    """Which side of a compared run sat at or past its knee (``quarter_growth``), with both sides' figures; None when
    neither did. ``measured``: the measured records (None for a stage known by aggregates: ``stage``, whose
    ``stage_quarter_bound`` is given instead, with whether it lies below the simulated peak quarter)."""
    sim = quarter_growth(simulated) if simulated is not None and len(simulated.records) else None
    meas = quarter_growth(measured) if measured is not None and len(measured.records) else None
    sides = sorted(name for name, g in (("measured", meas), ("simulated", sim)) if g is not None and g["grew"])
    if not sides:
        return None
    out: dict[str, Any] = {"sides": sides, "rule": KNEE_RULE, "growth_factor": KNEE_GROWTH,
                           "simulated": sim, "measured": meas}
    if measured is None and stage is not None:
        m = stage_quarter_bound(getattr(stage, "stats", None))
        bound = m["quarter_ttft_mean_max_s"]
        out["measured"] = {**m, "below_simulated_peak": None if bound is None or sim is None else bound < sim["peak_s"]}
    return out
