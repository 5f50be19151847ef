"""The order of feasible search candidates: the sort key the ranking, the frontier and the margin share, and which
figure decided the winner over the runner-up when their bills tie.

Rank: the monthly bill for the load (to the cent) when one is given, else USD per 1,000 good requests at the
utilization; on a tie, the lower USD per million good tokens (input and output together, what the same bill buys);
then the faster tokens/s per user; then candidate order (the order ``plan_candidates`` lists them in, whatever the
number of workers). The cost frontier (``frontier.cost_frontier``) reads the first two as its cost, so the winner is
always on it: a candidate dominating it would have to be cheaper, or as cheap and faster.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

__all__ = ["rank_key", "cost_key", "first_cost", "bill_key", "usd_per_mtok_good", "ranked", "TieBreak", "tie_break",
           "price_key"]


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


def ranked(feasible: list[dict[str, Any]], order: Mapping[str, int]) -> list[dict[str, Any]]:
    """The feasible entries best first: by :func:`rank_key`, then by ``order`` (candidate id → its place in the
    candidate list), so equal keys keep one order at any worker count."""
    return sorted(feasible, key=lambda e: (*rank_key(e), order[e["id"]]))


@dataclass(frozen=True)
class TieBreak:
    """The winner and the runner-up cost the same (``tied_on``: "monthly bill" or "USD per 1k good requests", at
    ``tied_value``); ``by`` is the figure that put the winner first ("USD per Mtok of good tokens", "tokens/s per
    user" or "candidate order"), the winner's and the runner-up's values of it (for candidate order, their places
    in the candidate list, counted from 1)."""

    runner_up: str
    tied_on: str
    tied_value: float
    by: str
    winner_value: float
    runner_up_value: float


def tie_break(winner: dict[str, Any], runner_up: dict[str, Any] | None,
              order: Mapping[str, int]) -> TieBreak | None:
    """What broke the tie between the first two of :func:`ranked`; None when there is no runner-up or the first
    figure of :func:`cost_key` differs."""
    if runner_up is None:
        return None
    a, b = rank_key(winner), rank_key(runner_up)
    if a[0] != b[0]:
        return None
    tied_on = "monthly bill" if winner.get("sizing") else "USD per 1k good requests"
    if a[1] != b[1]:
        return TieBreak(runner_up["id"], tied_on, a[0], "USD per Mtok of good tokens", a[1], b[1])
    if a[2] != b[2]:
        return TieBreak(runner_up["id"], tied_on, a[0], "tokens/s per user", -a[2], -b[2])
    return TieBreak(runner_up["id"], tied_on, a[0], "candidate order", order[winner["id"]] + 1,
                    order[runner_up["id"]] + 1)
