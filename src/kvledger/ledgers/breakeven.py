"""Break-even between self-hosting and an API: the utilization and the monthly volume at which the two cost the same.

Per good request of the measured mix (mean input I and output O tokens), the API costs
a = (I·p_in_eff + O·p_out_eff)/10⁶ USD. One replica costs R = num_gpus × $/GPU-h × 730 h
per month, people P per month; it is sized on its SLO capacity C (offered req/s at which the target share meets the
SLO; a measured file's goodput stands in: ``cost.Capacity.sizing_req_per_s``) and serves g good requests/s there.
Utilization u is offered load ÷ C, and a replica at u serves u × C offered requests/s of which u × g are good (the good
share g ÷ C measured at the boundary; more meet the SLO at a lighter load, so this is conservative). Then:

* break-even utilization u* = (n·R + P) / (n × C × 3600 × 730 × a) for the n replicas a volume needs (n = 1 without
  one): above u*, those replicas cost less than sending the same requests to the API (u* > 1: never). At the same n,
  u* and the break-even volume below are one statement (V* ÷ (n × C × 3600 × 730) = u* where V* opens n's window),
  but a volume's n and V*'s own (``replicas_at_break_even``) differ whenever that volume is on another step of the
  staircase, so each figure carries its n (``replicas``); the people line is shared by the n replicas, so at a volume
  of many replicas u* tends to R / (C × 3600 × 730 × a). Per good request the self-hosted side costs C ÷ g more than per
  request offered (the unit ledgers' figure);
* break-even monthly volume V* (requests offered): the smallest volume above which self-hosting stays
  cheaper, with whole replicas each loaded to at most ``max_utilization`` of C (cost is then a
  staircase, n·R + P for volumes up to n·c, c = C × 3600 × 730 × max_utilization). It exists exactly when a·c > R;
  where a·c ≤ R and C is only a lower bound (``Capacity.lower_bound``: an under-loaded run), it is not "never": a
  capacity more than R ÷ (a·c) × the one priced breaks even at some volume (``capacity_multiplier``);
* the first volume V₁ at which self-hosting is cheaper at all: n replicas win on ((n·R + P)/a, n·c] when that is
  not empty, first for n₁ = ⌊P/(a·c − R)⌋ + 1, at V₁ = (n₁·R + P)/a. Between V₁ and V* the cheaper side alternates:
  each replica added to keep under ``max_utilization`` starts nearly empty and costs more than the API until it
  fills. A verdict at a volume in [V₁, V*) is therefore not contradicted by V*; both are stated.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import replace
from typing import Any

from kvledger.ledgers.amounts import pct_text, unit_noun, units_text, usd_text
from kvledger.ledgers.cost import HOURS_PER_MONTH, Capacity, SelfHostSetup
from kvledger.ledgers.instance_mix import slope_key
from kvledger.ledgers.instances import pack
from kvledger.ledgers.staircase import staircase, staircase_usd_per_hour
from kvledger.ledgers.tier_items import tier_usd_per_month

__all__ = ["replica_usd_per_month", "replica_usd", "replica_usd_basis", "rental_usd_per_month", "rental_curve",
           "staircase_rental", "people_usd_per_month", "break_even_utilization", "break_even_volume"]


def _steps(setup: SelfHostSetup) -> list[dict[str, Any]]:
    """The rental staircase of one engine replica (``setup.gpus_per_engine`` GPUs): a deployment unit of several
    (``--replicas N``) is that many engines, each packed on its own (``instances.pack``)."""
    return staircase(setup.gpu, setup.gpus_per_engine)


def replica_usd_per_month(setup: SelfHostSetup) -> float:
    """R = one replica's (deployment unit's) share of full instances per month, the slope of the rental staircase:
    the lowest USD per instance-hour ÷ replicas per instance × 730 h over the rows (``instances.staircase``; GPUs ×
    USD/GPU-h × 730 h on a per-GPU row) × the unit's engine replicas + the KV tiers (size per GPU × num_gpus ×
    USD/GiB-month)."""
    slope = min(s["usd_per_instance_hour"] / s["replicas_per_instance"] for s in _steps(setup))
    return slope * setup.engine_replicas * HOURS_PER_MONTH + tier_usd_per_month(setup.kv_tiers, setup.num_gpus)


def rental_usd_per_month(setup: SelfHostSetup, replicas: int) -> float:
    """n replicas' rental per month on whole instances (the cheapest packing: ``instances.pack``) + their KV tiers;
    exactly n × R on per-GPU rows."""
    return rental_curve(setup)(replicas)


def rental_curve(setup: SelfHostSetup) -> Callable[[int], float]:
    """``rental_usd_per_month`` as a function of the replicas, the packing staircase and prices read once (a bisection
    over the replicas prices many counts)."""
    steps, e = _steps(setup), setup.engine_replicas  # per engine: a unit is e of them
    linear = all(s["replicas_per_instance"] == 1 for s in steps)
    replica_usd = replica_usd_per_month(setup) / e if linear else 0.0
    tier_usd = tier_usd_per_month(setup.kv_tiers, setup.num_gpus) / e
    return lambda replicas: staircase_rental(steps, replicas * e, replica_usd, tier_usd)


def staircase_rental(steps: list[dict[str, Any]] | None, replicas: int, replica_usd: float, tier_usd: float) -> float:
    """``replicas`` replicas' rental per month over a packing ``staircase``: ``replicas`` × ``replica_usd`` (R) when
    no step fills an instance (per-GPU rows: the bill is linear), else the cheapest packing's whole instances × 730 h
    + ``replicas`` × ``tier_usd`` (their KV tiers). Shared by ``rental_usd_per_month`` and the report's cost curve."""
    if not steps or all(s["replicas_per_instance"] == 1 for s in steps):
        return replicas * replica_usd
    return staircase_usd_per_hour(steps, replicas) * HOURS_PER_MONTH + replicas * tier_usd


def _slope_step(setup: SelfHostSetup) -> dict[str, Any]:
    """The staircase's step of the slope's row (``slope_key``: the lowest USD per replica, R's row)."""
    steps = _steps(setup)
    return min(steps, key=lambda s: slope_key(s["replicas_per_instance"], s["usd_per_instance_hour"], s["row"]))


def _overhead_usd_per_month(setup: SelfHostSetup) -> float:
    """W: how far the staircase can rise above n × R, the unfilled part of one instance of the slope's row
    ((1 − 1 ÷ replicas per instance) × USD per instance-hour × 730 h; 0 on per-GPU rows)."""
    s = _slope_step(setup)
    return (1 - 1 / s["replicas_per_instance"]) * s["usd_per_instance_hour"] * HOURS_PER_MONTH


def _unit(setup: SelfHostSetup) -> str:
    """What one of the replicas sized and priced is: a replica, or a deployment unit of ``--replicas N`` engines."""
    e = setup.engine_replicas
    return unit_noun(e) + ("" if e <= 1 else f" ({e} replicas)")


def _slope_words(setup: SelfHostSetup) -> str:
    """``Lambda:gpu_8x_h100_sxm5 $31.92/h ÷ 8 replicas per instance × 730 h``: R's row and arithmetic."""
    s, e = _slope_step(setup), setup.engine_replicas
    per = f" ÷ {s['replicas_per_instance']} replicas per instance" if s["replicas_per_instance"] > 1 else ""
    unit = f" × {e} replicas per deployment unit" if e > 1 else ""
    return f"{s['row']} {usd_text(s['usd_per_instance_hour'])}/h{per}{unit} × 730 h"


def replica_usd_basis(setup: SelfHostSetup) -> str:
    """Where ``replica_usd_per_month`` (R) comes from, and why it differs from one replica's bill where it does: R is
    the rental per replica as replicas fill whole instances of the cheapest row per replica (the break-even volume's
    slope), while one replica alone is billed on the rows ``pack`` takes for it (``rental_usd_per_month(setup, 1)``,
    which the break-even utilization and a one-replica monthly bill price)."""
    R, unit, tier = replica_usd_per_month(setup), _unit(setup), tier_usd_per_month(setup.kv_tiers, setup.num_gpus)
    text = f"${R:,.2f}/month = {_slope_words(setup)}" + (f" + KV tier ${tier:,.2f}/month" if tier else "")
    alone = rental_usd_per_month(setup, 1)
    if alone <= R * (1 + 1e-9):
        return text + f": one {unit}'s rental"
    rows = " + ".join(r.key for r, _ in pack(setup.gpu, 1, setup.num_gpus, setup.engine_replicas).rows)
    return (text + f": the rental per {unit} once they fill whole instances (the lowest of the rows: the break-even "
            f"volume's slope); one {unit} alone is billed ${alone:,.2f}/month on {rows} (rental_usd_per_month), "
            f"which the break-even utilization and the monthly bill at one {unit_noun(setup.engine_replicas)} price")


def replica_usd(setup: SelfHostSetup) -> dict[str, Any]:
    """R with its basis, for a report's JSON: per deployment unit (one replica without ``--replicas N``), as
    ``capacity_requests_per_month_per_unit`` and ``tier_usd_per_month_per_unit``."""
    return {"unit_rental_usd_per_month": replica_usd_per_month(setup), "unit_rental_usd_per_month_basis":
            replica_usd_basis(setup)}


def _share_words(setup: SelfHostSetup, R: float) -> str:
    """Where R comes from when it is a share of full instances (W > 0; "" on per-GPU rows, where R is one replica's
    bill): the slope's row, its instance price ÷ replicas per instance, why (the rental per replica the bill nears as
    replicas fill instances, so the never-breaks-even test) and, where it differs, what one replica alone is billed
    on the rows ``pack`` takes for it (the bill at one replica)."""
    if not _overhead_usd_per_month(setup):
        return ""
    one, unit = pack(setup.gpu, 1, setup.num_gpus, setup.engine_replicas), _unit(setup)
    alone = rental_usd_per_month(setup, 1)
    rows = " + ".join(r.key for r, _ in one.rows)
    billed = f"; one {unit} alone is billed ${alone:,.0f}/month on {rows}" if alone > R * (1 + 1e-9) else ""
    s, lowest = _slope_step(setup), ", the lowest rental per replica of the rows" if len(_steps(setup)) > 1 else ""
    return (f" as its share of full instances of {s['row']} ({_slope_words(setup).removeprefix(s['row'] + ' ')}"
            f"{lowest}: the bill nears it as replicas fill whole instances, so no volume does better{billed})")


def people_usd_per_month(setup: SelfHostSetup) -> float:
    """P = engineer-months per month × USD per engineer-month."""
    return setup.engineer_months_per_month * setup.engineer_usd_per_month


def break_even_utilization(cap: Capacity, setup: SelfHostSetup, api_usd_per_request: float,
                           replicas: int = 1, assumed_utilization: float | None = None,
                           power: tuple[float, float] | None = None) -> dict[str, Any]:
    """u* for ``replicas`` replicas sharing the people line (the count a volume needs, not necessarily the break-even
    volume's own ``replicas_at_break_even``: ``replicas_basis`` says so; 1 without one), with the formula's parts:
    ``required_utilization`` u*, the utilization they need to break even (> 1: unreachable, ``utilization`` None). A
    capacity only bounded below (``cap.lower_bound``) makes u* an upper bound (u* ∝ 1 ÷ capacity), with
    ``capacity_lower_bound`` True, and with a utilization no volume sets (``assumed_utilization``)
    ``capacity_multiplier`` u* ÷ that, the capacity multiplier at which it reaches break-even (None if it already does).

    ``power``: bought GPUs (``self_host_month.bought_power``), (b, u₀): their power costs b USD per GPU-month per unit
    of load, and ``setup``'s rate priced it at load u₀ (the verdict's). The bill at u is then rent(u₀) + g·b·(u − u₀)
    for the g GPUs, so u* solves u·F = rent(u₀) + g·b·(u* − u₀) + P: u* = (rent(u₀) − g·b·u₀ + P) ÷ (F − g·b), F the
    API's bill at full load; power is priced at u* itself, the load the break-even is about."""
    n = max(1, replicas)
    rent, R = rental_usd_per_month(setup, n), replica_usd_per_month(setup)
    fixed = rent + people_usd_per_month(setup)
    full = n * cap.sizing_req_per_s * 3600.0 * HOURS_PER_MONTH * api_usd_per_request
    u = fixed / full if full > 0 else math.inf
    if power is not None:  # bought: power at u* (docstring)
        gb = n * setup.num_gpus * power[0]
        u = (fixed - gb * power[1]) / (full - gb) if full > gb else math.inf
        rent = rent + gb * (u - power[1]) if math.isfinite(u) else rent
    per = "SLO capacity req/s" if cap.slo_capacity_req_per_s else "good req/s"  # Capacity.sizing_req_per_s
    u1 = unit_noun(setup.engine_replicas)
    what = ((u1 if n == 1 else f"{units_text(n, setup.engine_replicas)} × {u1}") if rent <= n * R * (1 + 1e-12) else
            f"{units_text(n, setup.engine_replicas)} on whole instances, idle GPUs included,")
    formula = (f"({what} + people USD/month) ÷ ({per} × 3600 × 730 × API USD per request)" if n == 1 else
               f"({what} + people USD/month) ÷ ({n} × {per} × 3600 × 730 × API USD per request), "
               "the replicas the volume needs")
    basis = (f"one {u1}: no volume given" if assumed_utilization is not None else  # a volume's (docstring)
             "the volume's (the verdict's); the break-even volume's are its replicas_at_break_even")
    out = {"utilization": u if u <= 1.0 else None, "required_utilization": u, "reachable": u <= 1.0, "replicas": n,
           "replicas_basis": basis, "formula": formula, **replica_usd(setup),
           "rental_usd_per_month": rent, "one_unit_rental_usd_per_month": rental_usd_per_month(setup, 1),
           "people_usd_per_month": people_usd_per_month(setup), "api_usd_per_request": api_usd_per_request,
           "good_requests_per_month_at_full_load": cap.goodput_req_per_s * 3600.0 * HOURS_PER_MONTH,
           "requests_per_month_at_full_load": cap.sizing_req_per_s * 3600.0 * HOURS_PER_MONTH}
    if power is not None:
        out["formula"] += ("; bought GPUs' power at u* itself: u* = (bill at the verdict's load − GPUs × b × that "
                           "load + people) ÷ (full-load API bill − GPUs × b), b the power USD per GPU-month per unit "
                           "of load")
        out["power_load"] = ("bought GPUs: power priced at the break-even utilization itself (board power = idle + "
                             f"(board − idle) × {u:.3f}), not at the verdict's load {power[1]:.3f}; "
                             "rental_usd_per_month is the bought bill there")
        out.update(power_usd_per_month_per_load=setup.num_gpus * power[0], power_priced_at_utilization=power[1])
    if cap.lower_bound:
        out["capacity_lower_bound"] = True
        if assumed_utilization is not None:
            out["capacity_multiplier"] = u / assumed_utilization if assumed_utilization < u else None
    return out


def _never(out: dict[str, Any], cap: Capacity, setup: SelfHostSetup, figures: tuple[float, ...]) -> dict[str, Any]:
    """``break_even_volume`` where a replica at max utilization costs more than its requests on the API (a·c ≤ R): never
    or (capacity bounded below only) the multiplier above which it will (module docstring); figures R, P, a, c, peak"""
    R, P, a, c, peak = figures
    people = (f" (plus ${P:,.0f}/month of people, ${R + P:,.0f} in all; the people line only widens the gap)"
              if P > 0 else "")
    tier = tier_usd_per_month(setup.kv_tiers, setup.num_gpus)
    rent = (f"${R:,.0f}/month in GPU rental alone" if not tier else f"${R:,.0f}/month in GPU rental and KV tier "
            f"alone (${R - tier:,.0f} GPUs + ${tier:,.0f} tier)") + _share_words(setup, R)
    mu = setup.max_utilization  # sized for a peak: mu = --max-utilization ÷ --peak-to-mean
    why = f" (--max-utilization {mu * peak:.0%} ÷ --peak-to-mean {peak:g}: sized for the peak)" if peak > 1 else ""
    never = (f"a {_unit(setup)} at {pct_text(mu) if why else f'{mu:.0%}'} utilization{why} costs {rent}{people}, "
             f"but its {c:,.0f} requests cost ${a * c:,.0f} on the API: ")
    if cap.lower_bound and a > 0:  # a capacity only bounded below: above R ÷ (a·c)× it, a·c > R (module docstring)
        k = R / (a * c)
        out.update(requests_per_month=None, capacity_multiplier=k, reason=never + (
            f"self-hosting does not break even at the capacity priced, but the run's goodput is only its offered "
            f"load, a lower bound on the capacity: were the capacity more than {k:.2f}× the one priced, it would "
            "break even at some volume, which the run does not rule out"))
        return out
    out.update(requests_per_month=None, reason=never + "self-hosting never breaks even")
    return out


def _power_per_request(cap: Capacity, setup: SelfHostSetup,
                       power: tuple[float, float] | None) -> tuple[SelfHostSetup, float]:
    """Bought GPUs' power at a volume's own load: n replicas at volume V run at u = V ÷ (n × F), F = C × 3600 × 730,
    so their power n × g × b × u = g × b × V ÷ F whatever n (g GPUs per replica, b as ``break_even_utilization``). The
    bill at V is then the idle bill (``setup``'s rate less b × u₀ ÷ 730 per GPU-hour) × n + P + (g × b ÷ F) × V:
    (the setup at idle power, power USD per request offered); (setup, 0) without ``power``."""
    full = cap.sizing_req_per_s * 3600.0 * HOURS_PER_MONTH
    if power is None or full <= 0:
        return setup, 0.0
    idle = setup.gpu.usd_per_gpu_hour - power[0] * power[1] / HOURS_PER_MONTH
    return replace(setup, gpu=replace(setup.gpu, usd_per_gpu_hour=idle)), setup.num_gpus * power[0] / full


def break_even_volume(cap: Capacity, setup: SelfHostSetup, api_usd_per_request: float,
                      max_replicas: int = 100_000, mix: tuple[float, float, str] | None = None,
                      power: tuple[float, float] | None = None, peak_to_mean: float = 1.0) -> dict[str, Any]:
    """V*, requests per month (and tokens), above which self-hosting stays cheaper; None when it never does.
    ``mix``: (input, output tokens per request, in words) that ``api_usd_per_request`` priced and that turn V* into
    tokens (``volume.tokens_per_request``: the user's split when both token volumes were given); None: the run's.

    Walks the replica staircase down from the replica count beyond which every volume is cheaper self-hosted
    (n ≥ (P + W + a·c)/(a·c − R), W the unfilled part of one instance: 0 on per-GPU rows) to find where that cheaper
    region begins; n replicas cost ``rental_usd_per_month`` (whole instances), n·R per GPU. ``power``: bought GPUs,
    as ``break_even_utilization`` takes it, priced at each volume's own load (``_power_per_request``), so V* over
    n × C × 3600 × 730 is ``break_even_utilization``'s u* for the same n replicas where V* opens their window."""
    setup, pw = _power_per_request(cap, setup, power)
    R, P, a = replica_usd_per_month(setup), people_usd_per_month(setup), api_usd_per_request
    c = cap.sizing_req_per_s * 3600.0 * HOURS_PER_MONTH * setup.max_utilization  # offered requests a replica takes
    # per unit: one deployment unit of --replicas N engine replicas (one replica without), as R and the volume's count
    out: dict[str, Any] = {"capacity_requests_per_month_per_unit": c, **replica_usd(setup), "people_usd_per_month": P,
                           "api_usd_per_request": a, "max_utilization": setup.max_utilization,
                           "staircase": _steps(setup),  # n engines' rental: instances
                           "engine_replicas_per_unit": setup.engine_replicas,  # the staircase's steps per unit
                           "tier_usd_per_month_per_unit": tier_usd_per_month(setup.kv_tiers, setup.num_gpus)}
    if power is not None:
        out.update(power_usd_per_request=pw, power_load=(
            "bought GPUs: power priced at each volume's own load (unit_rental_usd_per_month at idle power + "
            f"power_usd_per_request × volume), not at the verdict's load {power[1]:.3f}"))
    if (a - pw) * c <= R:  # ⟺ a replica at max utilization, its power there, costs more than its c requests
        return _never(out, cap, setup, (R + pw * c, P, a, c, peak_to_mean))
    a -= pw  # what each request offered saves against the API, net of its power
    cost, W = rental_curve(setup), _overhead_usd_per_month(setup)  # the staircase read once, priced per n
    n_full = max(1, math.ceil((P + W + a * c) / (a * c - R)))  # cost(n) ≤ n·R + W: n ≥ n_full wins its whole window
    if n_full > max_replicas:
        out.update(requests_per_month=None, reason=f"break-even needs more than {max_replicas:,} replicas")
        return out
    n_first = (math.floor(P / (a * c - R)) + 1 if W == 0 else  # the first n whose window ((cost(n) + P)/a, n·c] is
               next(n for n in range(1, n_full + 1) if (cost(n) + P) / a < n * c))  # not empty
    out.update(first_cheaper_requests_per_month=(cost(n_first) + P) / a, first_cheaper_replicas=n_first,
               first_cheaper_utilization=(cost(n_first) + P) / a / (n_first * c / setup.max_utilization))
    v_star, replicas = (n_full - 1) * c, n_full
    for n in range(n_full - 1, 0, -1):
        start = (cost(n) + P) / a  # volume where n replicas start to be cheaper than the API
        if start <= (n - 1) * c:
            v_star, replicas = (n - 1) * c, n
            continue
        if start <= n * c:
            v_star, replicas = start, n
        break
    if v_star == 0.0:
        v_star, replicas = (cost(1) + P) / a, 1
    i, o, words = mix or (cap.workload_input_tokens_mean, cap.workload_output_tokens_mean, "at the run's mix")
    out.update(requests_per_month=v_star, replicas_at_break_even=replicas,
               input_tokens_per_month=v_star * i, output_tokens_per_month=v_star * o, mix=words,
               reason=f"smallest monthly volume above which whole {unit_noun(setup.engine_replicas)}s (each ≤ max "
                      "utilization) cost less than the API")
    return out
