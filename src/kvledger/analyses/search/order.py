"""The order of feasible search candidates: the sort key the ranking, the frontier and the margin share, and which
figure decided the winner over the runner-up when their bills tie.

Rank: the monthly bill for the load (to the cent) when one is given, else USD per 1,000 good requests at the
utilization. Of the candidates at one bill, the one with the lowest USD per million good tokens (input and output
together, what the same bill buys) heads a group of one price: any two of it have the same price, or attainments at
the load that differ by no more than the probe's sampling error (``tie_noise``: two binomial standard errors at the
runs' request counts; at one bill the price then differs by which requests met the SLO, not by the setup). Within the
group: the more SLO capacity first (the headroom over the load: replicas × the req/s each is sized on), then the
lower USD per Mtok of good tokens, the faster tokens/s per user, candidate order (``plan_candidates``'s, whatever the
number of workers); the rest of the bill's candidates form the next groups the same way. The cost frontier
(``frontier.cost_frontier``) reads the same cost (bill, group, capacity, price), so the winner is always on it.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kvledger.analyses.search.tie_noise import AttainmentTie, noise_tie

__all__ = ["rank_key", "cost_key", "first_cost", "bill_key", "usd_per_mtok_good", "ranked", "TieBreak", "tie_break",
           "price_key", "rank_keys", "capacity_key", "CAPACITY_FIGURE"]


def bill_key(monthly_usd: float) -> float:
    """A monthly bill as the ranking compares it: rounded to the cent (1 replica × 2 GPUs and 2 replicas × 1 GPU are
    one bill, whatever the order of the float products that made them)."""
    return round(monthly_usd, 2)


def price_key(usd: float) -> float:
    """A price as the ranking compares it: to 10 significant digits, so that float noise in the products that made
    two equal prices (0.78548 against 0.7854800000000002: one bill over the same good tokens) is no difference and the
    next figure decides."""
    return float(f"{usd:.10g}")


def usd_per_mtok_good(entry: dict[str, Any]) -> float:
    """USD per million good tokens, input and output together, at the entry's utilization: its input and output
    prices (``cost.usd_per_mtok_input`` / ``_output``, kvledger.ledgers.cost) weighted by the good input and output
    tokens/s of the run they were priced on (``capacity.at_volume_load`` where a run at the load each replica carries
    priced them, else the boundary run), i.e. the GPU cost ÷ every good token, whatever split of GPU time priced each
    side."""
    cost, cap = entry["cost"], entry["capacity"]
    at = cap.get("at_volume_load")
    t_in, t_out = ((at["good_input_tok_per_s"], at["good_output_tok_per_s"]) if at else
                   (cap["goodput_input_tok_per_s"], cap["goodput_output_tok_per_s"]))
    return (cost["usd_per_mtok_input"] * t_in + cost["usd_per_mtok_output"] * t_out) / (t_in + t_out)


def first_cost(entry: dict[str, Any]) -> float:
    """The first figure of the ranking: the monthly bill to the cent when the search sized for a load, else USD per
    1k good requests at the utilization."""
    sizing = entry.get("sizing")
    return bill_key(sizing["rental_usd_per_month"]) if sizing else price_key(entry["cost"]["usd_per_1k_requests"])


def cost_key(entry: dict[str, Any]) -> tuple[float, float]:
    """(:func:`first_cost`, USD per Mtok of good tokens): the cost the ranking and the cost frontier compare, the
    second figure deciding a tie of the first."""
    return first_cost(entry), price_key(usd_per_mtok_good(entry))


def rank_key(entry: dict[str, Any]) -> tuple[float, float, float]:
    """Sort key of a feasible entry: (:func:`cost_key`, − tokens/s per user at its SLO capacity)."""
    return (*cost_key(entry), -(entry["capacity"].get("tok_per_s_per_user") or 0.0))


def capacity_key(entry: dict[str, Any]) -> float:
    """The SLO capacity a tie of price is broken by, req/s: sized for a load, the deployment's (replicas × the req/s
    each is sized on: its headroom over the load), else the candidate's per GPU (``sized_on_req_per_s`` where the
    capacity bound caps it, else ``slo_capacity_req_per_s``, ÷ its GPUs); 10 significant digits (``price_key``)."""
    sizing = entry.get("sizing")
    if sizing:
        return price_key(sizing.get("replicas", 0) * sizing.get("sizing_req_per_s", 0.0))
    cap = entry["capacity"]
    rate = cap.get("sized_on_req_per_s") or cap.get("slo_capacity_req_per_s") or 0.0
    return price_key(rate / (entry.get("num_gpus_per_unit") or 1))


def _same_price(head: dict[str, Any], e: dict[str, Any]) -> bool:
    return cost_key(head) == cost_key(e) or (first_cost(head) == first_cost(e) and noise_tie(head, e) is not None)


def rank_keys(feasible: list[dict[str, Any]], order: Mapping[str, int]) -> dict[str, tuple]:
    """Candidate id → its sort key (bill, group, − capacity, USD per Mtok good, − tokens/s per user, candidate order):
    the groups of one price at one bill of the module doc, each headed by the first by :func:`rank_key` and ``order``
    of those left and joined, in that order, by each whose price is one with every member's, so the keys do not
    depend on the order of ``feasible``."""
    left = sorted(feasible, key=lambda e: (*rank_key(e), order[e["id"]]))
    keys: dict[str, tuple] = {}
    group = 0
    while left:
        tied: list[dict[str, Any]] = []
        for e in left:  # one price with every member already in: any two of a group are within noise of each other
            if all(_same_price(m, e) for m in tied):
                tied.append(e)
        for e in tied:
            k = rank_key(e)
            keys[e["id"]] = (k[0], group, -capacity_key(e), k[1], k[2], order[e["id"]])
        left = [e for e in left if e["id"] not in keys]
        group += 1
    return keys


def ranked(feasible: list[dict[str, Any]], order: Mapping[str, int]) -> list[dict[str, Any]]:
    """The feasible entries best first, by :func:`rank_keys` (``order``: candidate id → its place in the candidate
    list, so equal figures keep one order at any worker count)."""
    keys = rank_keys(feasible, order)
    return sorted(feasible, key=lambda e: keys[e["id"]])


CAPACITY_FIGURE = "SLO capacity"
"""The figure a tie of price is broken by first (``capacity_key``)."""


@dataclass(frozen=True)
class TieBreak:
    """The winner and the runner-up cost the same (``tied_on``: "monthly bill" or "USD per 1k good requests", at
    ``tied_value``); ``by`` is the figure that put the winner first ("USD per Mtok of good tokens", "SLO capacity",
    "tokens/s per user" or "candidate order"), the winner's and the runner-up's values of it (for candidate order,
    their places in the candidate list, counted from 1; for SLO capacity, ``capacity_key``'s req/s, over
    ``load_req_per_s`` where sized for a load). ``price_within_noise``: why USD per Mtok of good tokens did not decide
    where the two differ in it (``tie_noise.AttainmentTie``: their attainments at the load within sampling error of
    each other), else None."""

    runner_up: str
    tied_on: str
    tied_value: float
    by: str
    winner_value: float
    runner_up_value: float
    price_within_noise: AttainmentTie | None = None
    load_req_per_s: float | None = None


def tie_break(winner: dict[str, Any], runner_up: dict[str, Any] | None, order: Mapping[str, int],
              keys: Mapping[str, tuple] | None = None) -> TieBreak | None:
    """What broke the tie between the first two of :func:`ranked` (``keys``: :func:`rank_keys` of the ranking, else
    of the two alone); None when there is no runner-up or the first figure of :func:`cost_key` differs."""
    if runner_up is None:
        return None
    keys = keys if keys is not None else rank_keys([winner, runner_up], order)
    a, b = keys[winner["id"]], keys[runner_up["id"]]
    if a[0] != b[0]:
        return None
    tied_on = "monthly bill" if winner.get("sizing") else "USD per 1k good requests"
    if a[1] != b[1]:
        return TieBreak(runner_up["id"], tied_on, a[0], "USD per Mtok of good tokens", a[3], b[3])
    noise = None if a[3] == b[3] else noise_tie(winner, runner_up)
    load = (winner.get("sizing") or {}).get("rate_req_per_s")
    for at, by, sign in ((2, CAPACITY_FIGURE, -1), (3, "USD per Mtok of good tokens", 1), (4, "tokens/s per user", -1)):
        if a[at] != b[at]:
            return TieBreak(runner_up["id"], tied_on, a[0], by, sign * a[at], sign * b[at], noise, load)
    return TieBreak(runner_up["id"], tied_on, a[0], "candidate order", order[winner["id"]] + 1,
                    order[runner_up["id"]] + 1, noise, load)
