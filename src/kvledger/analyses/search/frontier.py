"""The search's decision views: the cost frontier (monthly bill or USD per 1k good requests against tokens/s per user
at SLO capacity), rejections grouped by reason, and what a candidate's ranking rests on (price-row confidence, memory
rules not validated on its GPU).

Cost frontier: candidate a dominates b when a costs no more and serves each user at least as fast, and is strictly
better on one; the cost is the ranking's (``order.rank_keys``): the bill, then of two at one bill the one whose bill
buys more good tokens beyond the probe's sampling error, else the one with more SLO capacity over the load, else the
one buying more good tokens. The winner (``order.ranked``: the cheapest, ties to the faster) is never dominated, so it
is always on the frontier.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kvledger.analyses.search.launch_len import low_end_caveat
from kvledger.analyses.search.order import first_cost, rank_keys, usd_per_mtok_good
from kvledger.analyses.search.reasons import ENGINE_REFUSES
from kvledger.analyses.serving.notes import ATTAINMENT_CEILING, ITL_BUDGET

__all__ = ["cost_frontier", "rejections_by_reason", "none_can_start", "MEMORY_REASONS", "caveats", "ranking_margin",
           "bills_swap", "costs_swap", "RankingMargin", "MEMORY_RULES_GPU", "CAPACITY_BAND"]

CAPACITY_BAND = 0.3
"""The band an uncalibrated roofline capacity is taken to within (a kvledger assumption until measured error bands
exist; the same as ``analyses.serving.decision_inputs``)."""

MEMORY_RULES_GPU = "nvidia_h100_sxm"
"""The memory rules were measured on H100 with vLLM 0.19 (``catalog/data/vllm_memory_observations.csv``)."""


def _point(e: dict[str, Any]) -> dict[str, Any]:
    """A frontier point: its cost is ``rental_usd_per_month`` where the search sized for a load, else
    ``usd_per_1k_requests`` (each under its own name, with its unit; no unitless ``cost`` beside them)."""
    cap, siz = e["capacity"], e.get("sizing") or {}
    return {
        "id": e["id"],
        "rental_usd_per_month": siz.get("rental_usd_per_month"),
        "usd_per_mtok_good": usd_per_mtok_good(e),
        "usd_per_1k_requests": e["cost"]["usd_per_1k_requests"],
        "tok_per_s_per_user": cap.get("tok_per_s_per_user") or 0.0,
        "goodput_req_per_s": cap["goodput_req_per_s"],
        "num_gpus": siz.get("num_gpus"),
    }


def _dominates(a: dict[str, Any], b: dict[str, Any], cost: Mapping[str, tuple]) -> bool:
    ca, cb = cost[a["id"]], cost[b["id"]]
    return (ca <= cb and a["tok_per_s_per_user"] >= b["tok_per_s_per_user"]
            and (ca < cb or a["tok_per_s_per_user"] > b["tok_per_s_per_user"]))


def cost_frontier(feasible: list[dict[str, Any]],
                  order: Mapping[str, int] | None = None) -> tuple[list[dict[str, Any]], list[dict[str, str]]]:
    """(frontier points by rising cost, [{id, dominated_by}] for the rest: the cheapest candidate dominating it);
    ``order``: candidate id → its place in the candidate list (the ranking's), else their order in ``feasible``."""
    keys = rank_keys(feasible, order if order is not None else {e["id"]: n for n, e in enumerate(feasible)})
    cost = {i: k[:4] for i, k in keys.items()}  # (bill, group, − capacity, USD per Mtok good): the ranking's cost
    pts = [_point(e) for e in feasible]
    front = sorted((p for p in pts if not any(_dominates(q, p, cost) for q in pts)),
                   key=lambda p: (*cost[p["id"]], -p["tok_per_s_per_user"]))
    dominated = []
    for p in pts:
        if p in front:
            continue
        by = min((q for q in pts if _dominates(q, p, cost)), key=lambda q: (*cost[q["id"]], q["id"]))
        dominated.append({"id": p["id"], "dominated_by": by["id"]})
    return front, dominated


def rejections_by_reason(entries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """[{reason, count, ids}] of the candidates not feasible, most common reason first."""
    groups: dict[str, list[str]] = {}
    for e in entries:
        if e["status"] != "feasible":
            groups.setdefault(e.get("reason") or e["status"], []).append(e["id"])
    return [
        {"reason": r, "count": len(ids), "ids": ids}
        for r, ids in sorted(groups.items(), key=lambda kv: (-len(kv[1]), kv[0]))
    ]


#: the rejection reasons that mean a candidate cannot start (``plan.py``'s advice: its max_model_len does not fit the
#: KV budget, or the weights alone do not fit; or the engine refuses its quantization on the GPU), as opposed to an SLO
#: miss or a missing price row
MEMORY_REASONS = ("max_model_len", "does not fit", ENGINE_REFUSES)


def none_can_start(entries: list[dict[str, Any]]) -> bool:
    """Whether no candidate can start: there are candidates, none feasible or decided by bound, and every one was
    rejected for memory or refused by the engine on its GPU (:data:`MEMORY_REASONS`); ``search`` then exits 3, as
    ``plan`` does when the model does not fit or the engine would not start it."""
    groups = rejections_by_reason(entries)
    return (bool(entries) and not any(e["status"] in ("feasible", "bounded") for e in entries)
            and all(g["reason"] in MEMORY_REASONS for g in groups))


def capacity_caveats(entry: dict[str, Any]) -> list[str]:
    """What this candidate's SLO capacity rests on: a boundary probe whose queue was still growing (its ``not steady``
    note), probes that replayed a window unlike the trace (``unrepresentative sample``), a target near the attainment
    of the lightest load probed (``attainment_ceiling``), an ITL limit a full chunk's step passes (``itl_budget``)."""
    out = []
    cap_notes = (entry.get("capacity") or {}).get("notes", [])
    if any(n.startswith("not steady: ") for n in cap_notes):  # notes.CAPACITY_WARNINGS, in words
        out.append("capacity probe not steady (its queue still grew: see the capacity note; more --num-requests)")
    if any(n.startswith("unrepresentative sample: ") for n in cap_notes):
        out.append("capacity probes replay a sample unlike the trace (see the capacity note; more --num-requests)")
    if any(n.startswith(ATTAINMENT_CEILING) for n in cap_notes):
        out.append("capacity set by requests that miss at any load: the target is near what light load attains "
                   "(see the capacity note; a lower --target)")
    if any(n.startswith(ITL_BUDGET) for n in cap_notes):
        out.append("capacity set by the ITL limit: a step carrying a full prefill chunk passes it at any load (see "
                   "the capacity note; a smaller --max-num-batched-tokens)")
    return out


def caveats(entry: dict[str, Any]) -> list[str]:
    """What this candidate's figures rest on that is not validated: a price row below high confidence, memory rules
    not measured on its GPU, a capacity probe whose queue was still growing (its ``not steady`` note), probes that
    replayed a window unlike the trace (``unrepresentative sample``)."""
    out = capacity_caveats(entry)
    pr = entry.get("price") or {}
    if pr.get("confidence") and pr["confidence"] not in ("high", "user input"):  # a given price is no row
        out.append(
            f"{pr['confidence']}-confidence price row ({pr.get('provider', '')} {pr.get('instance_type', '')})".strip()
        )
    if (entry.get("plan") or {}).get("engine") == "sglang":  # vllm_memory_observations.csv holds vLLM starts only
        out.append(f"SGLang memory rules not validated on {entry.get('gpu_id')} (measured only for vLLM 0.19, on H100)")
    elif entry.get("gpu_id") != MEMORY_RULES_GPU:
        out.append(f"memory rules not validated on {entry.get('gpu_id')} (measured on H100, vLLM 0.19)")
    if (low := low_end_caveat(entry.get("plan") or {})) is not None:  # the range's low end is under one request
        out.append(low)
    return out


@dataclass(frozen=True)
class RankingMargin:
    """The runner-up's cost gap to the winner (its cost ÷ the winner's − 1), the capacity band it is read against
    (``band``: the wider side, a fraction; ``band_low`` / ``band_high``: the winner's band as multipliers, ×0.58–×1.07;
    ``runner_band_low`` / ``runner_band_high``: the runner-up's own, None where it has none and is read against the
    winner's) and whether the gap lies inside them (the order of the two could flip: ``costs_swap`` or ``bills_swap``
    on both bands, the test the search's band note uses)."""

    runner_up: str
    gap: float
    band: float
    could_flip: bool
    band_low: float | None = None
    band_high: float | None = None
    runner_band_low: float | None = None
    runner_band_high: float | None = None


def ranking_margin(ranked: list[dict[str, Any]], step_cost: str,
                   band_of: Callable[[dict[str, Any]], Any] | None = None) -> RankingMargin | None:
    """How far the runner-up is behind the winner (its cost ÷ the winner's − 1), and whether that gap lies inside the
    measured capacity band of its regime (kvledger.ledgers.error_band), in which case the order of the two could
    flip. None with one. The band is the winner's own (``capacity_band``, search.bands: the regime that priced it);
    without one, ``band_of(winner)`` (the search passes ``search.bands.search_band``: a GPU profile's band where one
    priced it, never the uncalibrated roofline's then), and CAPACITY_BAND where that gives none; with no ``band_of``,
    the step cost's own scope (``_capacity_band``)."""
    if len(ranked) < 2:
        return None
    a, b = first_cost(ranked[0]), first_cost(ranked[1])
    gap = b / a - 1.0 if a > 0 else float("inf")
    cb = ranked[0].get("capacity_band") or {}
    if "low_multiplier" not in cb and band_of is not None and (own := band_of(ranked[0])) is not None:
        cb = {"low_multiplier": own.low, "high_multiplier": own.high, "regime": own.regime, "source": own.source}
    if "low_multiplier" in cb:  # the winner's own band (search.bands: its GPU's regime), as the band note reads it
        lo, hi = cb["low_multiplier"], cb["high_multiplier"]
        swap = bills_swap(ranked[0], ranked[1])  # sized for a load: the bills at the band ends decide (search.bands)
        rb = ranked[1].get("capacity_band") or {}
        inside = costs_swap(a, cb, b, rb or cb) if swap is None else swap
        return RankingMargin(ranked[1]["id"], gap, max(1 - lo, hi - 1), inside and not tier_twins(ranked[0], ranked[1]),
                             lo, hi, rb.get("low_multiplier"), rb.get("high_multiplier"))
    band = CAPACITY_BAND if band_of is not None else _capacity_band(step_cost)
    return RankingMargin(ranked[1]["id"], gap, band, gap < band and not tier_twins(ranked[0], ranked[1]))


def costs_swap(cost_a: float, band_a: dict[str, Any] | None, cost_b: float, band_b: dict[str, Any] | None) -> bool:
    """Whether the winner (cost ``cost_a`` per good request, ≤ ``cost_b``) and the runner-up may swap inside their own
    capacity bands (``capacity_band``'s ``low_multiplier`` / ``high_multiplier``): a cost per good request scales as
    1/k with the capacity, so the winner's is at most ``cost_a`` ÷ its low end and the runner-up's at least
    ``cost_b`` ÷ its high end; they may swap when the first reaches the second (with one band for both:
    ``error_band.flips_inside``'s ratio < high ÷ low). True where either has no band (nothing settles the order)."""
    if not band_a or not band_b or "low_multiplier" not in band_a or "high_multiplier" not in band_b:
        return True
    if cost_a <= 0 or cost_b <= 0:
        return False
    return cost_a / band_a["low_multiplier"] > cost_b / band_b["high_multiplier"]


def bills_swap(a: dict[str, Any], b: dict[str, Any]) -> bool | None:
    """Whether the winner ``a``'s bill at its capacity band's low end reaches the runner-up ``b``'s at its band's high
    end (so the two may swap inside their bands; bills move in whole replicas), None without both band sizings."""
    sa, sb = a.get("sizing") or {}, b.get("sizing") or {}
    if "at_band_low" not in sa or "at_band_high" not in sb:
        return None
    return sa["at_band_low"]["rental_usd_per_month"] >= sb["at_band_high"]["rental_usd_per_month"]


def tier_twins(a: dict[str, Any], b: dict[str, Any]) -> bool:
    """Whether two search entries are one setup with and without a KV tier (or with two tiers) at the same simulated
    capacity, or at capacities the search's resolution tells apart that size the same replicas at the capacity and at
    both ends of its band (``sizing``'s ``at_band_low`` / ``at_band_high``): a capacity error moves both alike, so only
    the tier's price orders them."""
    def base(e: dict[str, Any]) -> str:
        return (e.get("offload") or {}).get("base") or e["id"]

    def replicas(e: dict[str, Any]) -> tuple:
        sz = e.get("sizing") or {}
        return sz.get("replicas"), (sz.get("at_band_low") or {}).get("replicas"), (sz.get("at_band_high") or {}).get(
            "replicas")

    if a["id"] == b["id"] or base(a) != base(b):
        return False
    return a["capacity"]["goodput_req_per_s"] == b["capacity"]["goodput_req_per_s"] or (
        None not in replicas(a) and replicas(a) == replicas(b))


def _capacity_band(step_cost: str) -> float:
    """The wider side of the measured 80% capacity band for the step cost's regime (kvledger.ledgers.error_band);
    CAPACITY_BAND (an assumption) where no measured run stands for it."""
    from kvledger.ledgers.error_band import error_band, regime_of

    band = error_band(regime_of("uncalibrated" if step_cost == "roofline" else "model"), "throughput")
    return CAPACITY_BAND if band is None else max(1.0 - band.low, band.high - 1.0)
