"""The error band of each searched candidate's SLO capacity, the sizing redone at both ends of it, whether the winner
and the runner-up could swap inside their bands, and whether the winner-vs-API answer flips inside it
(``kvledger.ledgers.error_band``). A colocated candidate's band is the one ``goodput --simulate --target`` and ``cost
--simulate`` give the same capacity (``serving.origin_band``: a latency's where one binds it below saturation); a KV
tier's variant's through the tier's probes (``serving.tier_band``; ``tier_entries.WARM_START``: how its search differs
from ``cost --simulate --kv-tier-host``'s).

Sizing at a band end k (``size_for_load``, as the point is sized): replicas = ⌈offered rate ÷ (SLO capacity × k ×
max_utilization)⌉ (the SLO capacity: the boundary's offered req/s; the goodput there scales with it),
bill = replicas × GPUs per replica × $/GPU-h × 730 h. The bill never rises with k, so the cheaper of the winner and the
API is the same across the band exactly when it is the same at both ends.
"""

from __future__ import annotations

from typing import Any

from kvledger.analyses.search.frontier import bills_swap, costs_swap, tier_twins
from kvledger.analyses.search.regime_band import search_band, search_profile, search_regime
from kvledger.ledgers.error_band import Band

__all__ = ["search_profile", "search_regime", "search_band", "entry_band", "band_notes",
           "band_sizing", "api_within_band", "api_bounds", "cheaper_side"]


def entry_band(spec: Any, e: dict[str, Any]) -> tuple[Band, float, float] | None:
    """(a candidate's capacity band as multipliers, its low and high req/s): the band ``goodput --simulate --target``
    and ``cost --simulate`` give its capacity (``capacity.error_band``, written by ``probed.probed_band``: a latency's
    where one binds it below saturation; a KV tier's variant's by ``tier_entries``, ``cost --kv-tier-host``'s; a
    disaggregated unit's by ``disagg_band``), else (a ledger written before)
    ``search_band``'s around the rate sized on. A band whose low end is 0 (no capacity to size replicas on) gives
    way to the throughput's, as cost's decision does (``capacity_bands.band_multipliers``). None without a band."""
    from kvledger.analyses.serving.capacity_bands import CapacityBand, band_multipliers

    c = e["capacity"]
    own = c.get("error_band")
    ks = band_multipliers(CapacityBand(**own)) if own else None
    if ks is not None:
        band = Band(own["regime"], "capacity", ks[0], ks[1], 0, own["source"], elsewhere=own.get("elsewhere", ""))
        return band, own["low"], own["high"]
    band = search_band(spec, e)
    cap = c.get("sized_on_req_per_s") or c["slo_capacity_req_per_s"]  # the rate sized on (the bound, where it caps)
    return None if band is None else (band, cap * band.low, cap * band.high)


def band_notes(spec: Any, feasible_ranked: list[dict[str, Any]], rank_value) -> list[str]:
    """Each ranked candidate gets ``capacity_band`` (its SLO capacity's low and high, offered req/s, and the goodput's,
    good req/s; regime: ``entry_band``); a note saying whether the winner and the runner-up may swap inside their
    bands (``costs_swap``, ``bills_across_bands``)."""
    notes = []
    for e in feasible_ranked:
        got = entry_band(spec, e)
        c = e["capacity"]
        g = c.get("sustained_good_req_per_s", c["goodput_req_per_s"])  # the good rate priced (an older ledger's name)
        band, lo, hi = got if got is not None else (None, 0.0, 0.0)
        e["capacity_band"] = None if band is None else {"low": lo, "high": hi,
                                                        "goodput_low": g * band.low, "goodput_high": g * band.high,
                                                        "low_multiplier": band.low, "high_multiplier": band.high,
                                                        "regime": band.regime, "source": band.source,
                                                        "elsewhere": band.elsewhere,  # Band.on_gpu's; "" else
                                                        "unit": "req/s"}  # of low/high and goodput_low/high
        if band is not None and e.get("sizing"):
            e["sizing"]["at_band_low"], e["sizing"]["at_band_high"] = (band_sizing(e, k, spec.max_utilization)
                                                                       for k in (band.low, band.high))
    if len(feasible_ranked) >= 2:
        a, b = feasible_ranked[0], feasible_ranked[1]
        if tier_twins(a, b):
            ga, gb = a["capacity"]["goodput_req_per_s"], b["capacity"]["goodput_req_per_s"]
            same = (f"at the same simulated capacity ({ga:,.4g} good req/s)" if ga == gb else
                    f"at capacities the search's resolution tells apart ({ga:,.4g} and {gb:,.4g} good req/s) that "
                    "size the same replicas at the capacity and at both ends of its band")
            notes.append(f"the winner {a['id']} and the runner-up {b['id']} are one setup with and without a KV tier "
                         f"{same}: a capacity error moves both alike, so the capacity band cannot flip them; the "
                         "tier's price orders them")
        elif (bills := bills_across_bands(a, b)) is not None:
            notes.append(bills)
        elif costs_swap(rank_value(a), a.get("capacity_band"), rank_value(b),  # the winner's, where b has none
                        b.get("capacity_band") or a.get("capacity_band")):
            which = (a.get("capacity_band") or {}).get("regime", "no band")
            notes.append(f"the winner {a['id']} and the runner-up {b['id']} are closer in cost than their capacities' "
                         f"80% error bands ({which}): the ranking may flip inside the bands; "
                         "measure both or calibrate the GPU (kvledger calibrate --scope gpu)")
        else:
            notes.append(f"the winner {a['id']} stays ahead of the runner-up {b['id']} across their capacities' 80% "
                         f"error bands ({a['capacity_band']['regime']})")
    return notes


def bills_across_bands(a: dict[str, Any], b: dict[str, Any]) -> str | None:
    """Whether the winner ``a`` stays ahead of the runner-up ``b`` whatever either's capacity within its own band, when
    both were sized for a load (the ranking is then by monthly bill): ``a``'s bill at its band's low end (fewest req/s a
    replica, most replicas) against ``b``'s at its high end. Bills move in whole replicas and each candidate has its own
    band, so this, not the point bills' gap, says whether they can swap. None without both band sizings (a ranking by
    USD per 1k requests)."""
    swap = bills_swap(a, b)
    if swap is None:
        return None
    worst_a, best_b = a["sizing"]["at_band_low"], b["sizing"]["at_band_high"]
    n = worst_a["num_gpus"]
    usd = "rental_usd_per_month"
    ends = (f"at its band's low end it needs {n} GPU{'' if n == 1 else 's'} (${worst_a[usd]:,.0f}/month), "
            f"the runner-up at its band's high end {best_b['num_gpus']} (${best_b[usd]:,.0f}/month)")
    if not swap:
        return (f"the winner {a['id']} stays ahead of the runner-up {b['id']} across both capacities' 80% error "
                f"bands: {ends}")
    return (f"the winner {a['id']} and the runner-up {b['id']} may swap inside their capacities' 80% error bands: "
            f"{ends}; measure both or calibrate the GPU (kvledger calibrate --scope gpu)")


def band_sizing(e: dict[str, Any], k: float, max_utilization: float) -> dict[str, Any]:
    """The sizing of a feasible entry with its SLO capacity × ``k`` (the module docstring): replicas, GPUs, realized
    utilization and the monthly bill (USD per month)."""
    from kvledger.analyses.search.evaluate import size_for_load
    from kvledger.analyses.search.instance_bill import instance_usd_per_month

    s = e["sizing"]
    c = s.get("sizing_req_per_s", e["capacity"]["slo_capacity_req_per_s"]) * k  # what the point was sized on
    replicas, realized = size_for_load(s["rate_req_per_s"], c, max_utilization, s.get("peak_to_mean", 1.0))
    if "staircase" in s:  # whole instances of the cheapest packing at this replica count (instance_bill)
        usd = instance_usd_per_month(s, replicas)
    else:  # a ledger written before instances were billed whole: GPUs per replica × $/GPU-h × 730 h
        usd = replicas * s["rental_usd_per_month"] / s["replicas"]
    return {"capacity_multiplier": k, "sizing_req_per_s": c,  # k × the rate sized on, as cost's decision.band_ends
            "goodput_req_per_s": e["capacity"].get("sustained_good_req_per_s", e["capacity"]["goodput_req_per_s"]) * k,
            "replicas": replicas,
            "num_gpus": replicas * s["num_gpus"] // s["replicas"], "realized_utilization": realized,
            "rental_usd_per_month": usd}


def api_bounds(api: dict[str, Any] | None) -> Any:
    """An "at most" API bill's two ends (``api_cost.CacheReadBounds``) from ``api_side``'s dict
    (``usd_per_month_lower_bound``, ``cache_read_mtok_per_month``); None where the bill is exact."""
    from kvledger.ledgers.api_cost import CacheReadBounds

    if not api or api.get("usd_per_month_lower_bound") is None:
        return None
    return CacheReadBounds(api["usd_per_month_lower_bound"], api["usd_per_month"], api["cache_read_mtok_per_month"])


def cheaper_side(api_usd: float, bounds: Any, self_host_usd: float) -> str:
    """"API" where the API bill is below ``self_host_usd``; "conditional" where it is only an upper bound
    (``bounds``: ``api_bounds``) whose lower end (cache reads free) is below it: self-hosting is cheaper unless the
    API's cached-input price is below ``bounds.cached_price_below(self_host_usd)``; else "self-host"."""
    if api_usd < self_host_usd:
        return "API"
    return "conditional" if bounds is not None and bounds.cached_price_below(self_host_usd) is not None else "self-host"


def api_within_band(winner: dict[str, Any] | None, api_monthly_usd: float | None,
                    people_usd: float | None = None, bounds: Any = None) -> dict[str, Any] | None:
    """Whether the API or the winner's GPUs cost less at the point and at both ends of the capacity band (GPUs alone,
    as the search prices them, plus ``people_usd`` a month on the self-hosted side where given: a people line, which
    does not scale with the replicas; ``bounds``: an "at most" API bill's ends, ``cheaper_side``); None without a
    monthly bill on both sides or without a band. The winner's bill at the band's ends (high capacity first) is
    ``winner_rental_usd_per_month_range`` (rental alone, cost's ``rental_usd_per_month``) or, with people,
    ``winner_self_host_usd_per_month_range`` (cost's ``self_host_usd_per_month``)."""
    s = (winner or {}).get("sizing") or {}
    if api_monthly_usd is None or "at_band_low" not in s:
        return None
    fixed_usd = people_usd or 0.0

    def side(usd: float) -> str:
        return cheaper_side(api_monthly_usd, bounds, usd + fixed_usd)

    at = {"point": side(s["rental_usd_per_month"]), "band_low": side(s["at_band_low"]["rental_usd_per_month"]),
          "band_high": side(s["at_band_high"]["rental_usd_per_month"])}
    key = "winner_rental_usd_per_month_range" if people_usd is None else "winner_self_host_usd_per_month_range"
    ends = [s["at_band_high"]["rental_usd_per_month"] + fixed_usd, s["at_band_low"]["rental_usd_per_month"] + fixed_usd]
    return {**at, "flips_inside_band": len(set(at.values())) > 1, key: ends}
