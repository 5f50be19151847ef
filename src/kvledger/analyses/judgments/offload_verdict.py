"""Whether a host KV tier helps a simulated workload, and why not: the reusable prefix tokens (what an unbounded cache
would serve, ``dynamics/workload/reuse.py``) split into those HBM held, those the tiers below it served and those
recomputed; the host tier full and evicting; loads read and never used; the engine overloaded. The words are
``report/tier_verdict.py``'s; ``offload`` and ``simulate`` with tier flags both judge through ``tier_judgment``."""

from __future__ import annotations

from typing import Any

from kvledger.jsonable import to_jsonable

__all__ = ["tier_judgment", "NEGLIGIBLE_HOST_HIT_RATE", "TTFT_WORSE_TOLERANCE", "NEGLIGIBLE_RECOMPUTED_SHARE",
           "TTFT_NOISE"]

# kvledger threshold: a host tier serving under 1% of prompt tokens saves under 1% of prefill, less than the step
# cost's own uncertainty (the simulator is deterministic; its step costs are not known to 1%: see the error bands)
NEGLIGIBLE_HOST_HIT_RATE = 0.01
# kvledger threshold, for the same reason: a TTFT statistic counts as worse with the tier only when it is more than
# 1% above the run without it
TTFT_WORSE_TOLERANCE = 0.01
# kvledger threshold (a judgment, not measured): the runs with and without the tier schedule the same sessions
# differently (a load moves an admission, and every later step with it), so their TTFT statistics differ by a few
# percent for no reason the tier's hits explain; a tier whose run cuts the TTFT mean or p90 by more than 5% helps,
# whatever share of prompt tokens it served
TTFT_NOISE = 0.05
# kvledger threshold, for the same reason: the working set fits in HBM when HBM held all but under 1% of the reusable
# prefix tokens, and the tiers missed when over 1% of them were recomputed (recomputing under 1% costs under 1% of
# what recomputing all of them would)
NEGLIGIBLE_RECOMPUTED_SHARE = 0.01
_OVERLOAD_KINDS = ("session_queue", "queue_growth", "paced_behind")  # overloads.py's records of an engine behind


def _tier_loads(stats) -> list[dict[str, Any]]:
    """Per tier below HBM: tokens read into HBM (served + unserved), served, unserved (read, then evicted from HBM
    before the request's admission and recomputed), bytes read (B)."""
    host_unserved = getattr(stats, "host_unserved_tokens", None) or 0
    out = [{"tier": "host", "served_tokens": stats.host_hit_tokens, "unserved_tokens": host_unserved,
            "loaded_bytes": getattr(stats, "loaded_bytes", 0.0)}]
    for name, d in (("disk", getattr(stats, "disk", None)), ("remote", getattr(stats, "remote", None))):
        if d is not None:
            out.append({"tier": name, "served_tokens": d.hit_tokens, "unserved_tokens": d.unserved_tokens or 0,
                        "loaded_bytes": d.loaded_bytes})
    for t in out:
        t["loaded_tokens"] = t["served_tokens"] + t["unserved_tokens"]
    return out


def _overload_summary(overload: Any) -> dict[str, Any] | None:
    """The run's overload record (``queue_growth.run_overload``, object or its JSON) in the figures the verdict
    names; None when the run kept up (or was too short to tell: no overload shown)."""
    if overload is None:
        return None
    d = overload if isinstance(overload, dict) else to_jsonable(overload)
    if d.get("kind") not in _OVERLOAD_KINDS:
        return None
    keys = ("kind", "ttft_share", "ttft_mean_s", "arrived_per_s", "finished_per_s", "backlog_mid", "backlog_last",
            "offered_per_s", "sent_per_s")
    return {k: d[k] for k in keys if d.get(k) is not None}


def _reuse(stats, reusable_tokens: int | None, loads: list[dict[str, Any]]) -> dict[str, Any]:
    """The reused prefix tokens (hits in every tier) against the reusable ones, and what was recomputed of them."""
    below = sum(t["served_tokens"] for t in loads)
    reused = stats.hbm_hit_tokens + below
    # an unbounded cache serves at least what the tiers did (None: a workload whose requests reuse.py does not read)
    denom = reused if reusable_tokens is None else max(reusable_tokens, reused)
    recomputed = denom - reused
    return {"reused_tokens": reused, "hbm_hit_tokens": stats.hbm_hit_tokens, "served_below_hbm_tokens": below,
            "reusable_tokens": reusable_tokens, "recomputed_reusable_tokens": recomputed,
            "hbm_share_of_reusable": stats.hbm_hit_tokens / denom if denom else 0.0,
            "recomputed_share_of_reusable": recomputed / denom if denom else 0.0}


def tier_judgment(stats, ttft_s_with: dict[str, float] | None = None, ttft_s_without: dict[str, float] | None = None,
                  *, reusable_tokens: int | None = None, overload: Any = None,
                  host_unit: tuple[str, int] | None = None) -> dict[str, Any]:
    """Whether the host tier helps this workload: it adds hits (``adds_hits``: it serves at least
    NEGLIGIBLE_HOST_HIT_RATE of prompt tokens) or cuts the TTFT mean or p90 by more than TTFT_NOISE (``ttft_better``),
    and neither the TTFT mean nor the p50 is worse with it than without it
    (``ttft_worse`` lists those more than TTFT_WORSE_TOLERANCE above the run without it, from the two runs' TTFT
    statistics in s); ``helps`` is both.

    Why, in figures: ``reusable_tokens`` (``reuse.reusable_prefix_tokens`` of the workload; None: not known, then
    the reused ones) against ``reused_tokens`` (served by HBM and every tier below it, ``served_below_hbm_tokens`` by
    those below); ``hbm_share_of_reusable`` and ``recomputed_reusable_tokens`` (missed every tier); ``cause``:
    "none_admitted" (no prompt token admitted: the engine rejected every request); "no_reuse"; "fits_in_hbm" (HBM
    held more than 1 − NEGLIGIBLE_RECOMPUTED_SHARE of them); "served_below_hbm"
    (the tiers below served the rest: under NEGLIGIBLE_RECOMPUTED_SHARE recomputed) or "misses". ``host_full``: the host
    tier's peak, capacity and evicted units when it evicted, in ``host_unit`` (the simulated tier's unit and its
    tokens; None: "unit"), with ``evicted_wanted_units``: those a later lookup missed (None: not counted).
    ``wasted_loads``: the tiers that read more tokens they never served than tokens they served. ``overload``: the
    run's overload record (``queue_growth.run_overload``) in figures, None if it kept up.
    """
    resume = _resume(stats)
    # first-arrival hits, or reloads on resume after preemption (resume_stats.py) over the same share of prompt tokens
    adds = stats.host_hit_rate >= NEGLIGIBLE_HOST_HIT_RATE or resume.get("resume_reload_share", 0.0) >= \
        NEGLIGIBLE_HOST_HIT_RATE
    loads = _tier_loads(stats)
    reuse = _reuse(stats, reusable_tokens, loads)
    if getattr(stats, "prompt_tokens", None) == 0:  # no request admitted (all rejected): nothing to judge the tier on
        cause = "none_admitted"
    elif not max(reuse["reused_tokens"], reusable_tokens or 0):
        cause = "no_reuse"
    elif reuse["hbm_share_of_reusable"] > 1 - NEGLIGIBLE_RECOMPUTED_SHARE:
        cause = "fits_in_hbm"
    elif reuse["recomputed_share_of_reusable"] < NEGLIGIBLE_RECOMPUTED_SHARE:
        cause = "served_below_hbm"
    else:
        cause = "misses"
    evicted = stats.evicted_units
    out: dict[str, Any] = {
        "helps": adds, "adds_hits": adds, "host_hit_rate": stats.host_hit_rate, "threshold": NEGLIGIBLE_HOST_HIT_RATE,
        "prompt_tokens": getattr(stats, "prompt_tokens", None),
        **reuse, "recomputed_threshold": NEGLIGIBLE_RECOMPUTED_SHARE, "cause": cause, "host_evicted_units": evicted,
        "host_full": {"peak_units": getattr(stats, "peak_host_units", 0),
                      "capacity_units": getattr(stats, "host_capacity_units", 0),
                      "evicted_units": evicted, "unit": host_unit[0] if host_unit else "unit",
                      "unit_tokens": host_unit[1] if host_unit else None,
                      "evicted_wanted_units": getattr(stats, "evicted_wanted_units", None)} if evicted else None,
        "wasted_loads": [t for t in loads if t["unserved_tokens"] > t["served_tokens"]],
        "overload": _overload_summary(overload), **resume}
    if ttft_s_with is not None and ttft_s_without is not None:
        out.update(_ttft(adds, ttft_s_with, ttft_s_without))
    return out


def _ttft(adds: bool, with_s: dict[str, float], without_s: dict[str, float]) -> dict[str, Any]:
    """``helps`` by the two runs' TTFT statistics (s): no worse in mean or p50 (``ttft_worse``, beyond
    TTFT_WORSE_TOLERANCE) and either ``adds`` hits or cuts the mean or p90 by more than TTFT_NOISE (``ttft_better``);
    ``ttft_s``: the statistics compared (only those both runs have: a run that served no request has none)."""
    both = [q for q in ("mean", "p50", "p90") if with_s.get(q) is not None and without_s.get(q) is not None]
    worse = [q for q in ("mean", "p50") if q in both and with_s[q] > without_s[q] * (1 + TTFT_WORSE_TOLERANCE)]
    better = [q for q in ("mean", "p90") if q in both and with_s[q] < without_s[q] * (1 - TTFT_NOISE)]
    return {"helps": (adds or bool(better)) and not worse, "ttft_worse": worse,
            "ttft_worse_tolerance": TTFT_WORSE_TOLERANCE, "ttft_better": better, "ttft_noise": TTFT_NOISE,
            "ttft_s": {q: {"with_tier": with_s[q], "without_tier": without_s[q]} for q in both}}


def _resume(stats) -> dict[str, Any]:
    """What requests resumed after preemption got back from the host tier (``TierStats.resume``), tokens, with the
    reload's share of the prompt tokens at first admission (the hit rates' denominator); {} without a resume."""
    r = getattr(stats, "resume", None)
    if r is None:
        return {}
    q = getattr(stats, "prompt_tokens", 0)
    return {"resume_tokens": r.resume_tokens, "resume_reloaded_tokens": r.host_reloaded_tokens,
            "resume_recomputed_tokens": r.recomputed_tokens,
            "resume_reload_share": r.host_reloaded_tokens / q if q else 0.0}
