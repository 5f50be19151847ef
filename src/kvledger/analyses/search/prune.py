"""Which candidates a search need not simulate: the order it simulates them in, and the proof that one left out can
neither win, be the runner-up, nor reach either frontier, given the candidates already simulated.

From a candidate's bounds (``kvledger.analyses.search.bounds``: capacity, tokens/s per user and
output tokens/s per GPU at most so much) its rank key is at least ``key_lower`` — the monthly
bill with the fewest replicas the capacity bound allows, or USD per 1k requests at that capacity —
and it is decided, unsimulated, when all three hold against simulated feasible candidates:

* rank: its cost's lower bound is above the runner-up's cost (so the winner, the runner-up and the
  margin between them are those of the exhaustive search, and every simulated candidate keeps
  its place relative to the others);
* cost frontier: one candidate costs less than its lower bound and serves each user at least
  as fast as its bound;
* frontier: one operating point is at least as good as both its bounds, better on one.

A bill equal to the lower bound decides nothing: a tie of the bill is broken by USD per Mtok of good tokens or SLO
capacity (``order.rank_keys``), of which no bound is proven, so a candidate whose bound ties a simulated bill is
simulated.

A point that dominates the bound dominates every point the candidate could have, and
dominance is transitive, so the frontiers are those of the exhaustive search. A candidate
whose TTFT/TPOT lower bounds miss the SLO for more requests than the target allows is rejected
("SLO not met at any rate") without simulation. Order: the best-placed by key lower bound, with
the candidates of the highest per-user and per-GPU bounds in the first round; rounds are
``ROUND`` candidates whatever the number of workers, so the decisions never depend on it.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from kvledger.analyses.search.order import bill_key, first_cost, ranked
from kvledger.analyses.search.reasons import PRICE_REASONS, SLO_NOT_MET

__all__ = ["ROUND", "key_lower", "decide", "slo_rejection", "simulation_order", "screen_by_bounds", "rounds",
           "Margins", "Screening", "screening"]

ROUND = 4
"""Candidates in a batch between two sets of decisions (a constant: results do not depend on ``--workers``). With
two batches in flight (``backends.IN_FLIGHT``) 8 candidates are queued for two to eight workers, and each candidate is
decided against the results of all but the 4–7 candidates before it. Rounds of 8 with a barrier between them: on the
default 8B search (2 workers, load 2.3 on 2 cores, 2026-12-02) 31.4 s wall against 36.2 s with rounds of 4, 135 of 192
lighter loads decided by bound against 147."""


def key_lower(spec: Any, entry: dict[str, Any], rate_req_per_s: float | None) -> tuple[float, float]:
    """(lower bound on the first figure of ``rank_key``, lower bound on USD per 1k good requests at SLO capacity) of a
    planned entry with ``bounds`` (``evaluate``'s sizing and cost formulas at the capacity bound: both fall as the
    capacity rises); the second orders the simulations only (``simulation_order``).

    The sizing divides offered req/s by the SLO capacity (offered req/s), so the bound must hold for the offered rate
    too: at a rate R the search counts as met the engine keeps pace (a probe whose queue grows counts as missing), so
    R × Σ of all N requests' work w ≤ N; the N − k largest w are each ≥ the k smallest, so Σ all w ≥ (N ÷ k) × Σ of the
    k smallest, and R ≤ k ÷ Σ of the k smallest w, the bound (``bounds``)."""
    from kvledger.analyses.search.evaluate import size_for_load
    from kvledger.ledgers.cost import HOURS_PER_MONTH

    cap = entry["bounds"]["capacity_bound_req_per_s"]
    gpus, usd_h = entry["num_gpus_per_unit"], entry["price"]["usd_per_gpu_hour"]
    at_cap = gpus * usd_h * 1000.0 / (3600.0 * cap)
    if rate_req_per_s is not None:
        replicas, _ = size_for_load(rate_req_per_s, cap, spec.max_utilization, spec.peak_to_mean)
        return bill_key(replicas * gpus * usd_h * HOURS_PER_MONTH), at_cap
    return at_cap / spec.utilization, at_cap


def slo_rejection(spec: Any, entry: dict[str, Any]) -> dict[str, Any] | None:
    """The entry rejected by its attainment bound ("SLO not met at any rate"), or None."""
    b = entry.get("bounds")
    if b is None or b["attainment"] >= spec.target:
        return None
    return {**entry, "status": "rejected", "reason": SLO_NOT_MET,
            "detail": f"decided by bound: at most {b['attainment']:.1%} of requests can meet the SLO ({spec.slo}) at "
                      f"any rate (their TTFT or TPOT lower bound exceeds it), below the {spec.target:.0%} target",
            "decided_by_bound": {"attainment_upper": b["attainment"], "target": spec.target,
                                 "margin": spec.target - b["attainment"]}}


def decide(entry: dict[str, Any], key_lb: tuple[float, float], feasible: list[dict[str, Any]],
           order: dict[str, int]) -> dict[str, dict[str, Any] | None]:
    """The evidence, against the simulated ``feasible`` entries, that ``entry`` (planned, with bounds) cannot be in the
    ranking's top two (``rank``), on the cost frontier (``cost_frontier``) or on the operating-point frontier
    (``frontier``), each with its margin (how far the bound is inside the deciding figure, as a fraction); None for a
    condition not proven."""
    b = entry["bounds"]
    best = ranked(feasible, order)
    out: dict[str, dict[str, Any] | None] = {"rank": None, "cost_frontier": None, "frontier": None}
    if len(best) >= 2 and key_lb[0] > first_cost(best[1]):  # an equal bill could win on USD per Mtok good
        runner = first_cost(best[1])
        out["rank"] = {"key_lower_bound": key_lb[0], "runner_up": best[1]["id"], "runner_up_key": runner,
                       "margin": _gap(key_lb[0], runner)}
    user_ub, gpu_ub = b["tok_per_s_per_user"], b["output_tok_per_s_per_gpu"]
    cost_by = next((e for e in best if _cost_dominates(e, key_lb[0], user_ub)), None)
    if cost_by is not None:
        cap_user = cost_by["capacity"].get("tok_per_s_per_user") or 0.0
        out["cost_frontier"] = {"by": cost_by["id"], "margin": min(_gap(key_lb[0], first_cost(cost_by)),
                                                                   _gap(cap_user, user_ub))}
    pts = [(e["id"], p) for e in best for p in (e["capacity"].get("operating_points") or [])]
    point_by = next(((i, p) for i, p in pts if _point_dominates(p, user_ub, gpu_ub)), None)
    if point_by is not None:
        out["frontier"] = {"by": point_by[0], "at_rate_req_per_s": point_by[1]["rate_req_per_s"],
                           "margin": min(_gap(point_by[1]["tok_per_s_per_user"], user_ub),
                                         _gap(point_by[1]["output_tok_per_s_per_gpu"], gpu_ub))}
    return out


def _front(feasible: list[dict[str, Any]]) -> list[list[Any]]:
    """[candidate id, tokens/s per user, output tokens/s per GPU] of the operating points no other one dominates."""
    pts = [(e["id"], p["tok_per_s_per_user"], p["output_tok_per_s_per_gpu"]) for e in feasible
           for p in (e["capacity"].get("operating_points") or [])]
    return [[i, u, g] for i, u, g in pts
            if not any(u2 >= u and g2 >= g and (u2 > u or g2 > g) for _, u2, g2 in pts)]


def _gap(big: float, small: float) -> float:
    """big ÷ small − 1 (how far a bound is inside the deciding figure), fraction; inf when small is 0."""
    return big / small - 1.0 if small > 0 else math.inf


def _cost_dominates(e: dict[str, Any], cost_lb: float, user_ub: float) -> bool:
    """``e`` dominates every candidate costing at least ``cost_lb`` and serving each user at most ``user_ub`` fast on
    the cost frontier: strictly cheaper (at an equal bill the other might buy more good tokens, ``order.cost_key``)."""
    return first_cost(e) < cost_lb and (e["capacity"].get("tok_per_s_per_user") or 0.0) >= user_ub


def _point_dominates(p: dict[str, Any], user_ub: float, gpu_ub: float) -> bool:
    u, g = p["tok_per_s_per_user"], p["output_tok_per_s_per_gpu"]
    return u >= user_ub and g >= gpu_ub and (u > user_ub or g > gpu_ub)


def simulation_order(planned: list[dict[str, Any]], keys: dict[str, tuple[float, float]],
                     order: dict[str, int]) -> list[dict[str, Any]]:
    """Planned entries in the order to simulate: those without bounds first (they are always simulated), then the ones
    with the highest bound on tokens/s per user and on output tokens/s per GPU, then by key lower bound."""
    bare = [e for e in planned if e["id"] not in keys]
    bounded = sorted((e for e in planned if e["id"] in keys), key=lambda e: (keys[e["id"]], order[e["id"]]))
    lead = []
    for field in ("tok_per_s_per_user", "output_tok_per_s_per_gpu"):
        top = max(bounded, key=lambda e: (e["bounds"][field], -order[e["id"]]), default=None)
        if top is not None and top not in lead:
            lead.append(top)
    return bare + lead + [e for e in bounded if e not in lead]


def screen_by_bounds(spec: Any, planned: list[dict[str, Any]], cands: list[Any], settle: Callable[[dict[str, Any]],
                     None], exhaustive: bool) -> list[dict[str, Any]]:
    """Give each planned entry its ``bounds`` (None where none is proven); unless ``exhaustive``, settle those the
    attainment bound rejects, or the requests their engine refuses (``refusals``), and return the rest."""
    from kvledger.analyses.search.bounds import candidate_bounds
    from kvledger.analyses.search.refusals import refusal_rejection
    from kvledger.errors import KvLedgerError
    from kvledger.ledgers.slo import parse_slo

    by_id = {c.id: c for c in cands}
    out = []
    for e in planned:
        try:
            b = candidate_bounds(spec, by_id[e["id"]], parse_slo(spec.slo))
            refused = None if exhaustive else refusal_rejection(spec, by_id[e["id"]], e)
        except KvLedgerError:  # the simulation refuses the input too: its capacity search reports it
            b = refused = None
        e = {**e, "bounds": None if b is None else b.to_dict()}
        rejected = None if exhaustive else (refused and {**refused, "bounds": e["bounds"]}) or slo_rejection(spec, e)
        if rejected is not None:
            settle(rejected)
        else:
            out.append(e)
    return out


def rounds(spec: Any, planned: list[dict[str, Any]], order: dict[str, int],
           feasible_now: Callable[[], list[dict[str, Any]]], settle: Callable[[dict[str, Any]], None],
           kept: frozenset[str] = frozenset()) -> Iterator[list[dict[str, Any]]]:
    """Batches of at most ``ROUND`` entries to simulate, each taken once the results of every batch but the one
    before it are in (that one may still be running: ``backends.IN_FLIGHT``), and decided against those results alone,
    whatever else has finished; an entry that ``decide`` settles on the way is passed to ``settle`` as status "bounded"
    instead; the others carry the frontier points of those results (``known_points``), against which their lighter
    loads are decided by bound (``kvledger.analyses.search.bounds.point_skipper``).

    ``kept``: the ids whose results a resumed ledger holds (``feasible_now`` has them from the start). They take their
    places in the batches as in the run that wrote them, undecided, and are left out of the batch yielded (which may be
    empty); a result counts only once its batch is two behind, so every decision, and each lighter load decided by
    bound, is the fresh run's."""
    from kvledger.analyses.search.evaluate import load_rate_req_per_s

    rate = None
    bounded = [e for e in planned if e.get("bounds")]
    if bounded:
        b = bounded[0]["bounds"]
        rate = load_rate_req_per_s(spec, b["prompt_tokens_mean"], b["output_tokens_mean"])
    keys = {e["id"]: key_lower(spec, e, rate) for e in bounded}
    queue = simulation_order(planned, keys, order)
    last: set[str] = set()  # the batch before: it may still be running (backends.IN_FLIGHT), so it is never read
    issued: set[str] = set()  # every batch's ids so far: a kept result of a later batch is not read before its turn
    while queue:
        batch: list[dict[str, Any]] = []
        while queue and len(batch) < ROUND:
            e = queue.pop(0)
            feasible = [f for f in feasible_now() if f["id"] in issued and f["id"] not in last]
            same_load = all((f.get("sizing") or {}).get("rate_req_per_s") == rate for f in feasible)
            ev = decide(e, keys[e["id"]], feasible, order) if e["id"] in keys and same_load else None
            if e["id"] in kept or ev is None or not all(ev.values()):
                batch.append({**e, "known_points": _front(feasible)} if e["id"] in keys else e)
                continue
            settle(_bounded(e, ev))
        if batch:
            yield [e for e in batch if e["id"] not in kept]
            last = {e["id"] for e in batch}
            issued |= last


def _bounded(e: dict[str, Any], ev: dict[str, Any]) -> dict[str, Any]:
    """The entry ``e`` decided by bound (status "bounded") on the evidence ``ev`` (``decide``)."""
    r = ev["rank"]
    return {**e, "status": "bounded", "reason": "decided by bound",
            "detail": f"not simulated: its cost is at least {r['key_lower_bound']:,.4g}, "
                      f"{r['margin']:.1%} above the runner-up {r['runner_up']}, and its bounds lie inside the "
                      f"frontiers (cost: {ev['cost_frontier']['by']}, "
                      f"{ev['cost_frontier']['margin']:.1%}; operating points: "
                      f"{ev['frontier']['by']}, {ev['frontier']['margin']:.1%})",
            "decided_by_bound": ev}


@dataclass(frozen=True)
class Margins:
    """The smallest margin of each kind of decision by bound (``decide``); None when none was decided by bound."""

    rank: float | None
    cost_frontier: float | None
    frontier: float | None


@dataclass(frozen=True)
class Screening:
    """How the search spent its simulations (``screening``): candidates planned (passed memory and price), simulated,
    decided by bound (unsimulated), rejected by the attainment bound, lighter operating points decided by bound
    (unsimulated), and the smallest margin of each kind of decision."""

    planned: int
    simulated: int
    decided_by_bound: int
    slo_rejected_by_bound: int
    lighter_loads_decided_by_bound: int
    smallest_margin: Margins
    how: str = ("kvledger.analyses.search.prune: a candidate is decided by bound when its cost lower bound is above "
                "the runner-up's and a simulated candidate dominates its bounds on both frontiers")


def screening(entries: list[dict[str, Any]]) -> Screening:
    """How the search spent its simulations over the ledger ``entries`` (see ``Screening``)."""
    planned = [e for e in entries if "price" in e and e.get("reason") not in PRICE_REASONS]
    bounded = [e for e in entries if e["status"] == "bounded"]
    slo = [e for e in entries if e["status"] == "rejected" and e.get("decided_by_bound")]
    points = sum(len((e.get("capacity") or {}).get("operating_points_decided_by_bound") or []) for e in entries)
    simulated = [e for e in planned if e not in bounded and e not in slo]

    def smallest(key: str) -> float | None:
        return min((e["decided_by_bound"][key]["margin"] for e in bounded), default=None)

    return Screening(len(planned), len(simulated), len(bounded), len(slo), points,
                     Margins(smallest("rank"), smallest("cost_frontier"), smallest("frontier")))
