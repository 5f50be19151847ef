"""The GPU price at which the search's winner and its runner-up tie: the factor on the winner's $/GPU-h, and on the
runner-up's, that would flip the ranking (what ``cost``'s robustness line says for its verdict).

A search bill is GPU rental only: whole instances' GPUs × $/GPU-h × 730 h, plus the KV tier's monthly price where a
candidate has one (``instance_bill.instance_usd_per_month``); without a load, USD per 1,000 good requests, GPU-hours
per request × $/GPU-h. Scaling one GPU's price by f scales its GPU part by f (the cheapest packing of its rows stays the
cheapest), so with GPU parts G and other parts T the two tie at
f_winner = (G_runner + T_runner − T_winner) ÷ G_winner and f_runner = (G_winner + T_winner − T_runner) ÷ G_runner.
Two candidates on the same GPU move together with its price: the flip is then read against the best-ranked candidate
on another GPU, and there is none when every candidate shares the winner's GPU.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

__all__ = ["PriceFlip", "price_flip", "price_flip_note", "flip_notes"]


@dataclass(frozen=True)
class PriceFlip:
    """The tie between the winner and ``against`` (the runner-up, or the best-ranked candidate on another GPU):
    ``winner_factor`` × the winner's $/GPU-h (``winner_usd_per_gpu_hour`` → ``winner_tie_usd_per_gpu_hour``), or
    ``against_factor`` × the other's, makes their bills equal (factors, dimensionless; prices, USD per GPU-hour)."""

    against: str
    against_is_runner_up: bool
    winner_factor: float
    against_factor: float
    winner_usd_per_gpu_hour: float | None
    against_usd_per_gpu_hour: float | None
    winner_tie_usd_per_gpu_hour: float | None
    against_tie_usd_per_gpu_hour: float | None
    source: str = ("kvledger.analyses.search.price_flip: bills scale with $/GPU-h (GPUs × $/GPU-h × 730 h, "
                   "GPU rental only), the KV tier's price held")


def _parts(e: dict[str, Any]) -> tuple[float, float] | None:
    """(GPU part, other part) of a ranked entry's first cost: USD per month when sized, else USD per 1k requests."""
    s = e.get("sizing")
    if s:
        tier = s.get("replicas", 0) * (s.get("tier_usd_per_month_per_unit") or 0.0)
        return s["rental_usd_per_month"] - tier, tier
    if e.get("offload"):  # a tier priced per request without its split: no clean GPU part
        return None
    return e["cost"]["usd_per_1k_requests"], 0.0


def price_flip(ranked: list[dict[str, Any]]) -> PriceFlip | None:
    """The price flip of the ranking's first candidate (module docstring); None with fewer than two candidates, when
    all share the winner's GPU, or without a GPU part to scale."""
    if len(ranked) < 2:
        return None
    w = ranked[0]
    other = next((e for e in ranked[1:] if e.get("gpu_id") != w.get("gpu_id")), None)
    pw = _parts(w)
    po = _parts(other) if other is not None else None
    if other is None or pw is None or po is None or pw[0] <= 0 or po[0] <= 0:
        return None
    fw = (po[0] + po[1] - pw[1]) / pw[0]
    fo = (pw[0] + pw[1] - po[1]) / po[0]
    uw = (w.get("price") or {}).get("usd_per_gpu_hour")
    uo = (other.get("price") or {}).get("usd_per_gpu_hour")
    return PriceFlip(other["id"], other is ranked[1], fw, fo, uw, uo, None if uw is None else uw * fw,
                     None if uo is None else uo * fo)


def price_flip_note(p: PriceFlip | None, winner: dict[str, Any]) -> str | None:
    """The sentence of the search's notes: the two prices at which the winner and its rival tie."""
    if p is None:
        return None
    who = "the runner-up" if p.against_is_runner_up else "the best-ranked candidate on another GPU"

    def at(usd: float | None, tie: float | None) -> str:
        return "" if usd is None or tie is None else f" (${tie:,.2f}/GPU-h against ${usd:,.2f} priced)"

    return (f"price flip: the winner {winner['id']} and {who} {p.against} would tie were the winner's GPU price "
            f"{p.winner_factor:.2f}× the one priced{at(p.winner_usd_per_gpu_hour, p.winner_tie_usd_per_gpu_hour)}, "
            f"or {p.against}'s {p.against_factor:.2f}× its own"
            f"{at(p.against_usd_per_gpu_hour, p.against_tie_usd_per_gpu_hour)} (bills are GPU rental, GPUs × $/GPU-h × "
            f"730 h, so they scale with the price; a KV tier's price held){_row_caveat(winner)}")


def _row_caveat(winner: dict[str, Any]) -> str:
    """"; the winner's price row is low-confidence (…): …" where the row the ranking rests on is below high
    confidence (a price given with --gpu-usd-per-hour is the user's, no row)."""
    pr = winner.get("price") or {}
    if not pr.get("confidence") or pr["confidence"] in ("high", "user input"):
        return ""
    return (f"; the winner's price is a {pr['confidence']}-confidence row ({pr.get('provider', '')} "
            f"{pr.get('instance_type', '')}, as of {pr.get('as_of', 'an unstated date')}): check it against the "
            "factor above, or give yours with --gpu-usd-per-hour")


def flip_notes(ranked: list[dict[str, Any]]) -> list[str]:
    """The search's price-flip note for its ranked feasible entries, as a list (empty without a flip)."""
    note = price_flip_note(price_flip(ranked), ranked[0]) if ranked else None
    return [] if note is None else [note]
