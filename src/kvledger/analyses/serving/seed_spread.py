"""``--seeds N``: the same simulation drawn with seeds s, s+1, …, s+N−1, and the min–max of each figure over them.

A simulated figure near the engine's knee depends on the seeded draw of arrival gaps (and of lengths, for a synthetic
workload or sessions) as much as on the engine: a queue that forms or not in the first seconds moves the mean TTFT
by tens of percent. One run shows one draw; the spread over N draws shows how much of the figure is the draw. The
first seed's run stays the reported one (its figures do not move with N), and every seed's run is the same
simulation with only ``seed`` changed, each passed explicitly to the workload's numpy Generator
(``dynamics.workload.arrivals.make_rng``), one after the other: the result is the same on any machine.

A workload that draws nothing from the seed (a trace replayed at its own arrival times, rescaled or not, or a closed
loop over a trace) gives the same run for every seed: it is run once and its spread says so (:func:`seed_used`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["SPREAD_SHARE", "BANDED", "SeedSpread", "seed_list", "seed_used", "summary_spread", "value_spread",
           "seed_range_text", "SEED_FREE_NOTE", "CAPACITY_KEYS", "CapacitySpread", "capacity_spread"]

#: a banded figure whose (max − min) over the seeds exceeds this share of the first seed's figure gets the note
SPREAD_SHARE = 0.10
#: the figures with a validated error band (prediction_bands.py), by their key in the spread, and their words
BANDED = {"ttft_s.mean": "TTFT mean", "tpot_s.mean": "TPOT mean", "throughput_req_per_s": "throughput"}
_LATENCY = ("ttft_s", "itl_s", "tpot_s", "e2e_s")
_STATS = ("mean", "p50", "p90", "p99")
#: the summary's printed figures outside the latency table (dotted keys read through nested dicts)
_OTHER = ("throughput_req_per_s", "throughput_output_tok_per_s", "total_throughput_tok_per_s", "duration_s",
          "num_finished", "num_rejected", "num_preemptions", "kv_usage.mean", "kv_usage.max",
          "kv_usage.token_state_share", "prefix_cache_hit_rate")
SPREAD_KEYS = tuple(f"{k}.{s}" for k in _LATENCY for s in _STATS) + _OTHER

SEED_FREE_NOTE = ("the workload draws nothing from the seed (the trace's own arrival times and lengths, rescaled or "
                  "not, a closed loop over the trace, or fixed: lengths at a fixed interval or in a closed loop): "
                  "every seed replays the same requests, so it was run once and the spread is 0; a Poisson or drawn "
                  "workload (a length distribution, a lengths-only trace such as arxiv, --workload) has a draw to "
                  "vary, and --num-requests moves a trace's window")


def seed_list(first: int, n: int) -> list[int]:
    """``[first, first+1, …, first+n−1]`` (the range of ``n`` is checked by ``kvledger.ranges``: 1 to 64)."""
    return [first + i for i in range(n)]


def seed_used(args: Any, synthetic: Any = None, sessions: bool = False) -> bool:
    """Whether the run ``args`` (``sim_setup.SimRequestArgs``) draws anything from ``args.seed``: sessions always do;
    a synthetic workload does unless both lengths are ``fixed:`` and no gap is drawn (``--arrival-cv 0``, or a closed
    loop without a rate); a trace only when it has no arrival times and the requests arrive as a Poisson process of a
    finite ``--rate`` (``dynamics.workload.traces._select``), paced by ``--concurrency`` or not."""
    import math

    from kvledger.analyses.serving.sim_setup import paced
    from kvledger.dynamics.workload.traces import trace_has_arrivals

    if sessions:
        return True
    closed = args.concurrency is not None and not paced(args)  # a paced loop's arrivals are drawn too
    if synthetic is not None:
        from kvledger.dynamics.workload.synthetic import is_fixed

        fixed = all(is_fixed(str(t)) for t in (synthetic.prompt, synthetic.output))
        return not (fixed and (synthetic.cv == 0 or closed))
    if closed or trace_has_arrivals(args.trace):
        return False
    return args.rate is not None and math.isfinite(args.rate)


def _get(summary: dict[str, Any], key: str) -> float | None:
    value: Any = summary
    for part in key.split("."):
        value = value.get(part) if isinstance(value, dict) else None
    return value


def value_spread(values: Sequence[float | None]) -> dict[str, Any]:
    """``{"min", "max", "n_seeds"}`` of one figure over the seeds (None where no seed gave a value; a figure some
    seeds lack is the range of those that have it)."""
    got = [v for v in values if v is not None]
    return {"min": min(got) if got else None, "max": max(got) if got else None, "n_seeds": len(values)}


@dataclass(frozen=True)
class SeedSpread:
    """The min–max of each figure over the seeds; its JSON is ``metrics`` (``{"ttft_s.mean": {"min", "max",
    "n_seeds"}, …}``, each in its figure's own unit: seconds, req/s, tok/s, counts, shares).

    Attributes:
        seeds: the seeds run (the first is the reported run's).
        metrics: dotted summary key → its spread.
        wide: the banded figures whose spread exceeds :data:`SPREAD_SHARE` of the first seed's figure, by words.
        note: the note a reader gets for them (None when none is wide); seed_free: the workload draws nothing from
            the seed (one run stands for all).
    """

    seeds: list[int]
    metrics: dict[str, dict[str, Any]]
    wide: dict[str, tuple[float, float, float]] = field(default_factory=dict)
    note: str | None = None
    seed_free: bool = False

    def to_dict(self) -> dict[str, Any]:
        return dict(self.metrics)

    def get(self, key: str) -> dict[str, Any] | None:
        return self.metrics.get(key)

    @property
    def label(self) -> str:
        """``seeds 0–4`` (``seed 3`` for one)."""
        return seed_range_text(self.seeds)


def seed_range_text(seeds: Sequence[int]) -> str:
    return f"seeds {seeds[0]}–{seeds[-1]}" if len(seeds) > 1 else f"seed {seeds[0]}"


def _wide(first: dict[str, Any], metrics: dict[str, dict[str, Any]],
          offered: bool) -> dict[str, tuple[float, float, float]]:
    """The banded figures whose spread exceeds the share; ``offered`` leaves throughput out (a run that kept up with
    its arrivals, or sessions' closed loops with think times: the throughput is the load the draw sent, not the
    engine's capacity, and has no band there either)."""
    out = {}
    for key, words in BANDED.items():
        if offered and key == "throughput_req_per_s":
            continue
        point, s = _get(first, key), metrics[key]
        if point is None or s["min"] is None or point <= 0:
            continue
        if (s["max"] - s["min"]) > SPREAD_SHARE * point:
            out[words] = (s["min"], s["max"], point)
    return out


def _note(wide: dict[str, tuple[float, float, float]], seeds: Sequence[int], sessions: bool) -> str | None:
    if not wide:
        return None
    parts = [f"{w} {(lo - p) / p:+.0%} to {(hi - p) / p:+.0%}" for w, (lo, hi, p) in wide.items()]
    more = "more sessions (--sessions)" if sessions else "more requests (--num-requests)"
    return (f"{', '.join(parts)} of the first seed's figure over {seed_range_text(seeds)} (more than "
            f"{SPREAD_SHARE:.0%}): at this load the figure depends on the seeded draw of arrivals (and lengths) — "
            "near or past the engine's knee a queue forms or not with the draw, and a drawn workload's requests "
            f"differ from seed to seed; {more} narrow it, and the error band does not include it")


def summary_spread(first_summary: dict[str, Any], seeds: Sequence[int],
                   run_seed: Callable[[int], dict[str, Any]] | None, *, kept_up: bool,
                   sessions: bool = False) -> SeedSpread:
    """The spread over ``seeds`` of the summary figures (:data:`SPREAD_KEYS`): ``first_summary`` is the first seed's
    (already run), ``run_seed(seed)`` runs each other seed, in order, and returns its summary dict. ``run_seed``
    None: the workload draws nothing from the seed (:func:`seed_used`), so the first run stands for every seed.
    ``kept_up``: the first run was an open loop that kept up (its throughput is the offered load); ``sessions``: a
    session workload (``--workload``: closed loops with think times, whose throughput is also what they sent)."""
    seed_free = run_seed is None
    summaries = [first_summary] + [first_summary if seed_free else run_seed(s) for s in seeds[1:]]
    metrics = {k: value_spread([_get(s, k) for s in summaries]) for k in SPREAD_KEYS}
    wide = {} if seed_free else _wide(first_summary, metrics, kept_up or sessions)
    return SeedSpread(list(seeds), metrics, wide, _note(wide, seeds, sessions), seed_free)


#: the searched figures whose spread a capacity search reports (``sim_boundary.SimBoundary`` attributes, req/s on the
#: rate axis; users or max_num_seqs on the others)
CAPACITY_KEYS = ("boundary_value", "boundary_per_gpu", "goodput_at_boundary_req_per_s")


@dataclass(frozen=True)
class CapacitySpread:
    """A capacity search repeated per seed: each seed's SLO capacity and the min–max of the searched figures.

    Attributes:
        seeds: the seeds searched (the first is the reported search's); per_seed: (seed, its capacity or None when
            its search found none), in seed order.
        metrics: :data:`CAPACITY_KEYS` → ``{"min", "max", "n_seeds"}`` in the figure's unit (its JSON,
            ``seed_spread``).
        note: said when the capacity moves more than :data:`SPREAD_SHARE` of the first seed's; seed_free: the
            workload draws nothing from the seed (one search stands for all).
    """

    seeds: list[int]
    per_seed: list[tuple[int, float | None]]
    metrics: dict[str, dict[str, Any]]
    note: str | None = None
    seed_free: bool = False

    def to_dict(self) -> dict[str, Any]:
        return dict(self.metrics)

    def boundaries(self) -> list[dict[str, Any]]:
        """``[{"seed": 0, "boundary_value": 20.5}, …]``: each seed's capacity (null where none was found)."""
        return [{"seed": s, "boundary_value": v} for s, v in self.per_seed]

    @property
    def label(self) -> str:
        return seed_range_text(self.seeds)


def capacity_spread(first: Any, seeds: Sequence[int], search_seed: Callable[[int], Any] | None) -> CapacitySpread:
    """The spread over ``seeds`` of a capacity search: ``first`` is the first seed's ``SimBoundary`` (already run),
    ``search_seed(seed)`` runs each other seed's whole search, in order (None: the workload draws nothing from the
    seed, so ``first`` stands for every seed)."""
    seed_free = search_seed is None
    runs = [first] + [first if seed_free else search_seed(s) for s in seeds[1:]]
    metrics = {k: value_spread([r.boundary.boundary_value if k == "boundary_value" else getattr(r, k) for r in runs])
               for k in CAPACITY_KEYS}
    per_seed = [(s, r.boundary.boundary_value) for s, r in zip(seeds, runs)]
    point, b = first.boundary.boundary_value, metrics["boundary_value"]
    note = None
    if not seed_free and point and b["min"] is not None and b["max"] - b["min"] > SPREAD_SHARE * point:
        note = (f"the SLO capacity moves {(b['min'] - point) / point:+.0%} to {(b['max'] - point) / point:+.0%} of "
                f"the first seed's over {seed_range_text(seeds)} (more than {SPREAD_SHARE:.0%}): near the knee the "
                "probes' attainment depends on the seeded draw of arrivals (and lengths); more requests per probe "
                "(--num-requests) narrow it, and the error band does not include it")
    elif not seed_free and None in (v for _, v in per_seed) and point is not None:
        note = "a seed's search found no SLO capacity where the first seed's did: the answer depends on the draw"
    return CapacitySpread(list(seeds), per_seed, metrics, note, seed_free)
