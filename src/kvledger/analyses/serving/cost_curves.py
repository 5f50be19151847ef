"""Cost curves for the report: USD per request against utilization, and the monthly bill against volume, from a
cost ledger's break-even inputs.

Both use the quantities ``kvledger.ledgers.breakeven`` computes (and ``cost --json`` prints under
``break_even_utilization`` / ``break_even_volume``): R = one replica's rental per month, P = people
per month, a = API USD per request, the requests a replica takes per month at full load. Self-hosted USD per
request at utilization u is (R + P) ÷ (C × 3600 × 730 × u), C the SLO capacity, which meets a at the
break-even utilization (u: offered load ÷ the SLO capacity C, of which u × good req/s meet the SLO:
``kvledger.ledgers.breakeven``); the monthly self-hosted bill at volume V (requests offered) is ⌈V ÷ c⌉ replicas × R + P
with c = C × 3600 × 730 × the maximum utilization, the requests a replica takes, against a × V on the API. On a row
that sells instances of several GPUs, R + P becomes one replica's whole instance + P, and n × R the whole instances n
replicas need (``kvledger.ledgers.instances``). Bought GPUs: R is their bill at idle power and each point adds their
power at its own load (b × u per GPU-month at utilization u; at volume V, power USD per request × V), as the ledger's
break-even prices it.
"""

from __future__ import annotations

import math
from typing import Any

from kvledger.ledgers.amounts import unit_noun

__all__ = ["UTILIZATION_GRID", "utilization_curve", "volume_curve"]

UTILIZATION_GRID = (0.01, 0.02, 0.05, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)


def utilization_curve(cost: dict[str, Any]) -> dict[str, Any]:
    """Self-hosted and API USD per 1,000 requests (offered, the same on both sides) at each utilization of one
    replica, and the break-even utilization where that curve meets the API's, (one replica's rental + people) ÷
    (requests a month at full load × API USD per request) — not the ledger's ``break_even_utilization`` when a volume
    needs several replicas that share the people line (that one is ``ledger_break_even_utilization``, with
    ``ledger_break_even_replicas``); ``volume_point``: the volume's own deployment (its
    replicas at their realized utilization, its whole bill per 1,000 requests), None without a volume."""
    bu = cost["break_even_utilization"]
    r = unit_noun((cost.get("break_even_volume") or {}).get("engine_replicas_per_unit", 1))  # --replicas N: units
    fixed = bu.get("one_unit_rental_usd_per_month", bu["unit_rental_usd_per_month"]) + bu["people_usd_per_month"]
    full, api = bu["requests_per_month_at_full_load"], bu["api_usd_per_request"]
    gb = bu.get("power_usd_per_month_per_load", 0.0)  # bought GPUs: their power at each point's load, not the verdict's
    fixed -= gb * bu.get("power_priced_at_utilization", 0.0)
    grid = sorted(set(UTILIZATION_GRID) | {cost["inputs"]["utilization"]})
    points = [{"utilization": u, "self_host_usd_per_1k_requests": 1e3 * (fixed + gb * u) / (full * u),
               "api_usd_per_1k_requests": 1e3 * api}
              for u in grid]
    u_star = fixed / (full * api - gb) if full * api > gb else math.inf  # where the one-replica curve meets a
    d = cost.get("decision") or {}
    here = ({"utilization": d["realized_utilization"], "replicas": d["replicas"],
             "self_host_usd_per_1k_requests": 1e3 * d["self_host_usd_per_month"] / d["requests_per_month"]}
            if d.get("requests_per_month") and d.get("replicas") else None)
    return {"points": points, "break_even_utilization": u_star if u_star <= 1.0 else None,
            "ledger_break_even_utilization": bu.get("utilization") if bu.get("reachable") else None,
            "ledger_break_even_replicas": bu.get("replicas", 1),
            "chosen_utilization": cost["inputs"]["utilization"], "volume_point": here,
            "formula": f"self-hosted USD per request = ({r} + people USD/month) ÷ (SLO capacity req/s × 3600 × "
                       "730 × utilization); a good one costs SLO capacity ÷ goodput times that"}


def _volume_grid(c: float, v_star: float | None, mine: float | None = None) -> list[float]:
    lo, hi = max(1.0, min(c / 100.0, v_star / 10.0 if v_star else c, mine or c)), max(c * 8.0, mine or 0.0)
    n = 41
    grid = [lo * (hi / lo) ** (i / (n - 1)) for i in range(n)]
    extra = [k * c for k in range(1, 9)] + ([v_star] if v_star else []) + ([mine] if mine else [])
    return sorted(set(round(v, 6) for v in grid + extra))


def _rental(bv: dict[str, Any], n: int, R: float) -> float:
    """n replicas' rental per month over the break-even's ``staircase`` (``ledgers.breakeven.staircase_rental``)."""
    from kvledger.ledgers.breakeven import staircase_rental

    e = bv.get("engine_replicas_per_unit", 1)  # the staircase's steps are engine replicas, n units of e each
    return staircase_rental(bv.get("staircase"), n * e, R / e, bv.get("tier_usd_per_month_per_unit", 0.0) / e)


def volume_curve(cost: dict[str, Any]) -> dict[str, Any]:
    """Self-hosted and API USD per month at each volume (requests per month), and the break-even volume;
    ``volume_requests_per_month``: the volume priced (cost's ``monthly.requests``), a point of the grid, None
    without one."""
    bv = cost["break_even_volume"]
    R, P = bv["unit_rental_usd_per_month"], bv["people_usd_per_month"]
    a, c = bv["api_usd_per_request"], bv["capacity_requests_per_month_per_unit"]
    v_star, mine = bv.get("requests_per_month"), (cost.get("monthly") or {}).get("requests")
    r = unit_noun(bv.get("engine_replicas_per_unit", 1))  # --replicas N: the units are deployment units
    points = []
    for v in _volume_grid(c, v_star, mine):
        n = max(1, math.ceil(v / c - 1e-12))
        points.append({"requests_per_month": v, "replicas": n,  # bought GPUs: + their power at v's own load
                       "self_host_usd_per_month": _rental(bv, n, R) + P + bv.get("power_usd_per_request", 0.0) * v,
                       "api_usd_per_month": a * v})
    return {"points": points, "break_even_requests_per_month": v_star, "capacity_requests_per_month_per_unit": c,
            "volume_requests_per_month": None if mine is None else round(mine, 6),
            "max_utilization": bv["max_utilization"],
            "formula": f"self-hosted USD/month = the rental of ⌈volume ÷ {r} capacity at max utilization⌉ {r}s "
                       f"(× {r} USD/month, or the whole instances they need) + people; API = USD per request × "
                       "volume"}
