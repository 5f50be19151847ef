"""Whether a compared run was saturated, so that its latency errors measure the queue rather than the engine."""

from __future__ import annotations

from typing import Any

__all__ = ["saturation", "compared_saturation", "waits_grew", "WAIT_GROWTH", "measured_saturated"]

#: the last quarter of arrivals waiting this many times longer for a first token (medians) than the first quarter, and
#: longer than the arrivals took, is a queue that outlasted the load (``waits_grew``)
WAIT_GROWTH = 10.0


def waits_grew(run: Any) -> str | None:
    """The note when the waits for a first token grew through a run too short for the backlog test (its first request
    finished late): the last quarter of arrivals' median TTFT ≥ ``WAIT_GROWTH`` × the first quarter's and longer than
    the whole arrival span. An LLMServingSim RTX 4090 run: 300 requests over 29.1 s, first quarter 1.20 s, last
    120.66 s, the last finish 154 s after the last arrival. None when the waits did not grow so."""
    import numpy as np

    recs = sorted((r for r in run.records if r.first_token_s is not None), key=lambda r: r.arrival_s)
    q = len(recs) // 4
    if q < 5:
        return None
    span = recs[-1].arrival_s - recs[0].arrival_s
    first = float(np.median([r.first_token_s - r.arrival_s for r in recs[:q]]))
    last = float(np.median([r.first_token_s - r.arrival_s for r in recs[-q:]]))
    if last < WAIT_GROWTH * first or last < span or span <= 0:
        return None
    return (f"the last quarter of its arrivals waited {last:.2f} s for a first token (median) against the first "
            f"quarter's {first:.2f} s, longer than the {span:.1f} s the arrivals took: the queue outlasted the load "
            "(the run is too short for the backlog test, its first request finishing late)")


def saturation(measured: Any, simulated: Any) -> dict[str, Any] | None:
    """Whether either side of a compared run was at or past saturation — its backlog kept growing while requests
    arrived (``kvledger.analyses.serving.queue_growth``), or, in a run too short to read the backlog, the waits for a
    first token grew past the arrivals' span (``waits_grew``) — and which; None when neither was. Then TTFT/E2E measure
    the queue, not the engine, and throughput is the figure to compare."""
    from kvledger.analyses.serving.notes import OVERLOAD_ADVICE_MEASURED
    from kvledger.analyses.serving.queue_growth import queue_growth

    notes = {}
    for name, run in (("measured", measured), ("simulated", simulated)):
        if run is None or len(run.records) == 0:
            continue
        g = queue_growth(run, OVERLOAD_ADVICE_MEASURED)
        note = g.note if g is not None else waits_grew(run)
        if note is not None:
            notes[name] = note
    if not notes:
        return None
    return {"sides": sorted(notes), "notes": [f"{name}: {n}" for name, n in sorted(notes.items())]}


def compared_saturation(run: Any, stage: Any, simulated: Any) -> dict[str, Any] | None:
    """``saturation`` of a compared run and its replay ``simulated``, the measured side of an aggregate ``stage``
    (``sweep.Stage``; None for a per-request run, whose records are read) judged on its rates instead — below
    saturation only when its client kept ≥ 95% of the requested rate and the engine served ≥ 90% of it
    (``sweep_bands.below_saturation``, validate's test): a stage holds no records to read a queue from, and its
    closed-loop replay cannot grow one. A paced replay (a rate under a client cap) whose clients sent under 95% of
    the rate (``paced_loop.paced_behind``) marks the simulated side."""
    from kvledger.calibration.stage_launch import sent_at_inf
    from kvledger.calibration.sweep_bands import below_saturation, stage_saturation_words

    got = saturation(run.measured if stage is None else None, simulated)
    if stage is None or sent_at_inf(stage):
        return got  # a closed loop (request_rate inf under a client cap) has no rate to be behind
    users = getattr(stage, "client_users", None)
    notes = {} if below_saturation(stage) else {"measured": f"measured: the {stage_saturation_words(stage)}"}
    if users and simulated is not None and len(simulated.records):  # paced: the replay's clients may lag too
        from kvledger.analyses.serving.paced_loop import paced_behind

        lag = paced_behind(simulated, {"offered_rate_req_per_s": stage.requested_rate, "concurrency": users})
        if lag is not None:
            notes["simulated"] = f"simulated: {lag.note}"
    if not notes:
        return got
    got = got or {"sides": [], "notes": []}
    return {"sides": sorted({*notes, *got["sides"]}), "notes": [*notes.values(), *got["notes"]]}


def measured_saturated(sat: Any) -> bool:
    """Whether a row's ``saturated`` (``compared_saturation``: a dict of sides, or a bool in older files)
    says the measured run saturated; False when only the prediction did (its queue is the step cost's miss)."""
    return bool(sat) and (not isinstance(sat, dict) or "measured" in sat.get("sides", ()))
