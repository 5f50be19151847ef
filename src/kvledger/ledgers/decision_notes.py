"""The sentences of the build-or-buy answer: the verdict for a volume, break-even, the secondary per-request line, the
effective-cost rule and what the answer rests on (kept apart from the arithmetic in ``decision``)."""

from __future__ import annotations

import math
from typing import Any

from kvledger.ledgers.amounts import pct_text, unit_noun, units_text, usd_text
from kvledger.ledgers.api_cost import discounts_words
from kvledger.ledgers.cache_bound_notes import break_even_bound_words, cached_price_words, verdict_words
from kvledger.ledgers.volume_rate import given_clause

__all__ = ["tokens_text", "verdict_lines", "no_volume_lines", "secondary_line", "effective_cost_line", "rests_on_line",
           "band_sides_text", "band_end_text", "volume_good_requests", "lower_bound_line", "on_instances_words",
           "people_scale_line", "engines", "GPUS_PER_ENGINEER_MONTH"]


#: GPUs one engineer-month a month is taken to run before the people line warns that it looks small for the fleet
#: (``people_scale_line``): a kvledger assumption (8 nodes of 8 GPUs per full-time engineer, a quarter of one for
#: the default 0.25 engineer-months), not a sourced staffing ratio
GPUS_PER_ENGINEER_MONTH = 256


def tokens_text(n: float) -> str:
    """300,000,000 → ``300M``; 1.2e10 → ``12B``; 5,000 → ``5,000``; 1e20 → ``100,000,000T``.

    Rounded first, then the unit picked: a count that rounds up to 1,000 of a unit is shown in the next one
    (999,999.7 → ``1M``, 999.7M → ``1B``, 999.7B → ``1T``); T is the last unit, so 999.6T and above are whole T with
    thousands separators (``1,000T``), never exponent notation.
    """
    a = abs(n)
    if round(a) < 1e6:
        return f"{n:,.0f}"
    for div, unit in ((1e6, "M"), (1e9, "B"), (1e12, "T")):
        shown = float(f"{a / div:.3g}")  # the 3 significant figures printed
        if shown < 1e3:
            return f"{math.copysign(shown, n):,.3g}{unit}"
    return f"{n / 1e12:,.0f}T"


def _break_even_text(bv: dict[str, Any], volume: Any = None, verdict: str | None = None) -> str:
    """Where self-hosting is first cheaper (V₁) and above which it stays cheaper (V*): one statement, so that a verdict
    for a volume between the two (a self-host window of the replica staircase) does not read as a contradiction. The
    utilization is of the replicas at V₁ (``breakeven.break_even_volume``), not the break-even utilization of the
    replicas a volume needs."""
    if bv.get("requests_per_month") is None:
        return bv["reason"]
    tok = bv["input_tokens_per_month"] + bv["output_tokens_per_month"]
    per_req = tok / bv["requests_per_month"]
    first = bv["first_cheaper_requests_per_month"]
    n1 = bv["first_cheaper_replicas"]
    mix = f" {bv['mix']}" if bv.get("mix") else ""  # which input/output split the tokens are at (breakeven)
    u1, e = pct_text(bv["first_cheaper_utilization"]), bv.get("engine_replicas_per_unit", 1)  # --replicas N: units
    if first >= bv["requests_per_month"] * (1 - 1e-9):  # V₁ = V*: no window below it
        return (f"self-hosting is cheaper above {tokens_text(tok)} tokens/month "
                f"({u1} utilization of {f'one {unit_noun(e)}' if n1 == 1 else units_text(n1, e)}){mix}")
    text = (f"self-hosting is first cheaper at {tokens_text(first * per_req)} tokens/month "
            f"({u1} utilization of {units_text(n1, e)}), then on and off (each {unit_noun(e)} added under "
            f"the utilization cap starts nearly empty and costs more than the API until it fills), and at every volume "
            f"above {tokens_text(tok)} tokens/month "
            f"({units_text(bv['replicas_at_break_even'], e)}){mix}")
    if volume is not None and verdict is not None:
        v = volume.input_tokens + volume.output_tokens
        if first * per_req <= v < tok:
            text += (f"; {tokens_text(v)} tokens/month lies in "
                     + ("a self-host window" if verdict == "self-host" else "an API gap") + " of that staircase")
    return text


def on_instances_words(p: Any) -> str:
    """`` on 1 a3-highgpu-8g instance (8 GPUs, 7 idle)`` when the row sells instances of several GPUs (a mix of rows:
    each row's instances, ``Packing.on_instances``); `` as one 4-GPU pod each`` for a marketplace row's replica of
    several GPUs (``Packing.words``); a deployment unit's engines on one-GPU machines: `` on 2 gpu_1x_h100_sxm5
    instances (1 GPU each, 0 idle)``; else ""."""
    k = p.gpus_per_replica // p.engines_per_unit if p is not None else 1  # one engine replica's GPUs
    if p is not None and p.gpus_per_instance == 1 and not p.mixed and k > 1 and p.rate.row_key:
        return f" as one {k}-GPU pod each (billed per GPU)"
    if p is None or (p.gpus_per_instance == 1 and not p.mixed and (p.engines_per_unit == 1 or p.rate.per_gpu)):
        return ""
    return f" on{p.on_instances()}"


def _unit_words(d: Any, num_gpus: int) -> str:
    """``1 replica × 8 GPUs``; a deployment unit of engine replicas (--replicas N) as its packing counts them:
    ``2 replicas × 4 GPUs (one deployment unit)`` (``Packing.unit_words``)."""
    if d.packing is not None:
        return d.packing.unit_words()
    return f"{d.replicas:,} replica{'' if d.replicas == 1 else 's'} × {num_gpus} GPU{'' if num_gpus == 1 else 's'}"


def verdict_lines(d: Any, bv: dict[str, Any], gpu_label: str, num_gpus: int) -> list[str]:
    """The answer in a few short lines: verdict with both bills, volume → replicas and utilization, break-even."""
    v, api = d.volume, d.primary
    sh = d.self_host_usd
    how = "bought" if d.buy is not None and d.buy.total_usd < d.self_host.total_usd else "rented"
    if how == "bought":
        gpu_label = f"bought: {d.buy.items[0].note}; rented would be {usd_text(d.self_host.total_usd)}/month"
    elif d.buy is not None:
        gpu_label += f"; bought would be {usd_text(d.buy.total_usd)}/month"
    return [
        f"answer: {verdict_words(d)} on the API vs {usd_text(sh)}/month self-hosted, for "
        f"{tokens_text(v.input_tokens + v.output_tokens)} tokens/month ({tokens_text(v.input_tokens)} in, "
        f"{tokens_text(v.output_tokens)} out{given_clause(v.given)})",
        f"  self-hosted: {_unit_words(d, num_gpus)} {how}{on_instances_words(d.packing) if how == 'rented' else ''}, "
        f"realized utilization {pct_text(d.realized_utilization)} (≤ {d.max_utilization:.0%} allowed"
        + (f" at a peak {v.peak_to_mean:g}× the mean" if v.peak_to_mean != 1 else "") + f"); {gpu_label}",
        f"  API: {api.price.key} ({api.price.confidence or 'unstated'} confidence), "
        f"{discounts_words(api.bill, api.price)}",
        f"  break-even{' (bought GPUs, as the verdict)' if how == 'bought' else ''}: "
        f"{_break_even_text(bv, v, d.verdict if how == 'rented' else None)}{break_even_bound_words(bv)}",
        *([f"  sizing: {d.sizing}"] if d.sizing else []),
    ]


def no_volume_lines(bv: dict[str, Any], api_key: str) -> list[str]:
    """The answer when no volume is given: where the verdict turns (or that it never does, or not at the capacity
    priced where that is only a lower bound: ``breakeven.break_even_volume``'s ``capacity_multiplier``), and how to get
    a bill."""
    if bv.get("capacity_multiplier") is not None:  # none at the capacity priced, only a lower bound (breakeven)
        first = (f"answer: the API ({api_key}) at any volume at the capacity priced, but it MAY FLIP at a higher "
                 f"capacity — {_break_even_text(bv)}")
    elif bv.get("requests_per_month") is None:
        first = f"answer: the API ({api_key}) at any volume — {_break_even_text(bv)}"
    else:
        per_req = (bv["input_tokens_per_month"] + bv["output_tokens_per_month"]) / bv["requests_per_month"]
        v1 = bv.get("first_cheaper_requests_per_month") or bv["requests_per_month"]
        first = (f"answer depends on volume: {_break_even_text(bv)}{break_even_bound_words(bv)}; below "
                 f"{tokens_text(v1 * per_req)} tokens/month the API ({api_key}) is cheaper")
    if bv.get("peak_to_mean", 1.0) != 1.0:  # sized for the peak as a volume's answer is (factor_rows.at_peak)
        first += (f" (replicas sized for a peak {bv['peak_to_mean']:g}× the mean: mean utilization ≤ "
                  f"{pct_text(bv['mean_utilization_cap'])}, --max-utilization ÷ --peak-to-mean)")
    return [
        first,
        "  give the volume (--monthly-tokens, --monthly-requests, or --monthly-input-tokens with "
        "--monthly-output-tokens) for both monthly bills and the verdict",
    ]


def secondary_line(util: float, how: str, sh_req: float, api_req: float, per: str = "") -> str:
    """Per good request at an assumed utilization, labelled as not the verdict (``per``: how the self-hosted figure
    was divided, when not from the per-token ledgers)."""
    return (
        f"secondary (not the verdict): at {pct_text(util)} utilization ({how}) a good request costs ${sh_req:.6f} "
        f"self-hosted{f' ({per})' if per else ''} vs ${api_req:.6f} on the API"
    )


def _share(n: float, share: float) -> str:
    """``share`` with as many decimals (3 to 9) as the product ``n × share`` needs to check out to the request: the
    shown share times ``n``, rounded, is the count printed beside it (``n × share`` rounded)."""
    digits = next((d for d in range(3, 10) if round(n * round(share, d)) == round(n * share)), 9)
    return f"{share:.{digits}f}"


def volume_good_requests(n: float, cap: Any) -> tuple[float, str]:
    """(good requests of a volume of ``n`` requests, how they were counted): n × the share within the SLO of a run at
    the volume's load per replica where one was run (``cap.load``, ``ledgers/load_share.py``); else, sized on the SLO
    capacity, n × the share of that run's requests within the SLO (``cap.attainment``; goodput ÷ SLO capacity, which
    counts the run's drain tail as failed requests, where the attainment is not known) (``cost.Capacity``); a measured
    file's volume counts as good, its goodput standing in for the capacity."""
    if cap.load is not None:
        a = cap.load.attainment
        return n * a, (f"the self-hosted bill ÷ the volume's {n * a:,.0f} good requests: {n:,.0f} × {_share(n, a)}, "
                       f"the share within the SLO in {cap.load.words()}")
    rate = cap.searched_req_per_s  # the rate sized on (the capacity bound where it caps the SLO capacity)
    if not rate:
        return n, f"the self-hosted bill ÷ the volume's {n:,.0f} good requests"
    seed = "" if cap.seed is None else f", seed {cap.seed}"
    a = getattr(cap, "attainment", None)
    if a is not None:
        return n * a, (f"the self-hosted bill ÷ the volume's {n * a:,.0f} good requests: {n:,.0f} × {_share(n, a)}, "
                       f"the share within the SLO at the SLO capacity (the run at {rate:,.4g} "
                       f"req/s{seed})")
    share = cap.goodput_req_per_s / rate
    return n * share, (f"the self-hosted bill ÷ the volume's {n * share:,.0f} good requests: {n:,.0f} × "
                       f"{_share(n, share)}, "
                       f"the good share at the SLO capacity ({cap.goodput_req_per_s:,.4g} good req/s ÷ "
                       f"{rate:,.4g} req/s, the run at that rate{seed})")


def effective_cost_line(sticker: dict[str, Any]) -> str:
    """effective cost = sticker × throughput ÷ goodput, with the numbers."""
    m = sticker.get("multiplier_output")
    if m is None:
        return "effective cost: no sticker price (no throughput)"
    return (
        f"effective cost = sticker × throughput ÷ goodput: ${sticker['usd_per_mtok_output']:.4f}/M out × "
        f"{_seven(sticker['throughput_output_tok_per_s'])} ÷ {_seven(sticker['good_output_tok_per_s'])} tok/s = "
        f"${sticker['usd_per_mtok_output'] * m:.4f}/M out ({m:.2f}× the sticker)"
    )


def _seven(tok_per_s: float) -> str:
    """A rate to 7 significant digits (at least whole tokens/s), so the printed ratio gives the printed result: whole
    tokens/s hid a 0.7% multiplier as 208 ÷ 206 (1.0097)."""
    whole = len(f"{abs(tok_per_s):.0f}")
    return f"{tok_per_s:,.{max(0, 7 - whole)}f}"


def band_sides_text(low: float, high: float) -> str:
    """The band ×LOW–×HIGH as signed sides: ``±30%`` when symmetric, else ``−42%/+7%`` (never the wider side alone),
    ``−21%/−6%`` for a band wholly below the capacity priced (a latency-bound one, ``binding_band``)."""
    below, above = 1 - low, high - 1
    if abs(below - above) < 0.005:
        return f"±{below:.0%}"
    return f"{'−' if below >= 0 else '+'}{abs(below):.0%}/{'+' if above >= 0 else '−'}{abs(above):.0%}"


def engines(d: Any) -> int:
    """Engine replicas in one of a decision's sized units (``Packing.engines_per_unit``: ``--replicas N``), 1 without
    a packing."""
    return getattr(getattr(d, "packing", None), "engines_per_unit", 1) or 1


def band_end_text(e: Any, per_unit: int = 1) -> str:
    """One end of the band: ``at ×0.58 (12.2 req/s SLO capacity): 2 replicas at 62.3%, $3,927.40/month → API``
    (``per_unit`` engine replicas a unit: ``2 deployment units``)."""
    return (f"at ×{e.capacity_multiplier:.2f} ({e.sizing_req_per_s:,.4g} req/s capacity): "
            f"{units_text(e.replicas, per_unit)} at {pct_text(e.realized_utilization)}, "
            f"{usd_text(e.self_host_usd_per_month)}/month → {'the API' if e.verdict == 'API' else 'self-host'}")


def lower_bound_line(goodput_req_per_s: float, d: Any, *, simulated: bool = False, breaks_even: bool = True) -> str:
    """The answer's warning when the capacity priced is only a lower bound (an under-loaded run): what it makes the
    self-hosted figures (``d``: the decision for a volume, None without one; ``breaks_even``: without one, a break-even
    volume exists at the capacity priced) and how to get the capacity (``simulated``: a run simulated at its offered
    load, ``--at-offered-load``, whose simulation finds the SLO capacity itself)."""
    volume = " and the break-even volume" if breaks_even else ""
    what = (f"the self-hosted costs per token{volume} are upper bounds" if d is None else
            f"the self-hosted {usd_text(d.self_host_usd)}/month and its {units_text(d.replicas, engines(d))} are "
            "upper bounds")
    fix = ("drop --at-offered-load to price at the SLO capacity the simulation finds" if simulated else
           "a rate sweep up to the SLO boundary gives the capacity")
    return (f"  WARNING: the run looks UNDER-LOADED (see the capacity basis below): its {goodput_req_per_s:,.4g} good "
            f"req/s is the load it was offered, not the replica's capacity, which it bounds only from below; so {what} "
            f"({fix})")


def _already(d: Any) -> str:
    """Why no capacity flips an API verdict: one replica alone, with the people line where there is one (a people
    line of 0, --engineer-months-per-month 0, is not named)."""
    if d.flips.get("people_usd_per_month"):
        return f"one {unit_noun(engines(d))} and the people already cost more"
    return f"one {unit_noun(engines(d))} already costs more"


def people_scale_line(d: Any, engineer_months: float, num_gpus: int) -> str | None:
    """A warning when the fleet a volume needs is large for the people line given: more GPUs than
    ``GPUS_PER_ENGINEER_MONTH`` per engineer-month a month (a kvledger assumption, not a measured staffing ratio: no
    public figure is bundled), with the GPU count and the engineer-months that ratio would give; None below it, or
    with no people line (--engineer-months-per-month 0: the user prices people elsewhere)."""
    gpus = d.replicas * num_gpus
    if engineer_months <= 0 or gpus <= GPUS_PER_ENGINEER_MONTH * engineer_months:
        return None
    need = gpus / GPUS_PER_ENGINEER_MONTH
    return (f"  WARNING: the people line is {engineer_months:g} engineer-months/month for {gpus:,} GPUs "
            f"({_unit_words(d, num_gpus)}): it does not grow with the fleet. "
            f"At {GPUS_PER_ENGINEER_MONTH} GPUs per engineer-month (a kvledger assumption, not a measured staffing "
            f"ratio) this fleet needs about {need:,.1f} engineer-months/month; set --engineer-months-per-month to your "
            "team's figure")


def _lower_bound_robustness(d: Any, price: str) -> str:
    """The robustness line of a capacity only bounded below (``decision``'s module docstring): a self-host verdict
    is checked at the band's low end, an API verdict holds only when no capacity at all flips it."""
    k = d.flips.get("capacity_multiplier")
    band = (f"the capacity priced is only a lower bound (an under-loaded run: its goodput is the offered load), "
            f"−{1 - d.band_low:.0%} at worst ({d.band_source}), with no upper end")
    if d.verdict == "API":
        cap = (f"no capacity, however high, flips it ({_already(d)})" if k is None else
               f"it would flip were the capacity {k:.2f}× the one priced, which the run does not rule out")
    else:
        cap = "a higher capacity only lowers the self-hosted bill"
    held = "holds" if d.holds_across_capacity() else ("MAY FLIP" if d.verdict == "API" else "FLIPS")
    ends = f" — {'; '.join(band_end_text(e, engines(d)) for e in d.band_ends)}" if d.band_ends else ""
    return f"robustness: {cached_price_words(d)}the verdict {held}: {band}; {cap}{ends}{price}"


def rests_on_line(d: Any) -> str:
    """Whether the verdict flips inside the capacity band (the decision redone at both ends: replicas and bill), and
    the GPU price at which it would; for a capacity only bounded below, ``_lower_bound_robustness``."""
    k, m = d.flips.get("capacity_multiplier"), d.flips.get("gpu_price_multiplier")
    price = f"; and it would flip were the GPU price {m:.2f}× the one priced" if m is not None else ""
    if d.capacity_lower_bound:
        return _lower_bound_robustness(d, price)
    band = f"{band_sides_text(d.band_low, d.band_high)} capacity ({d.band_source})"
    if k is None:
        cap = (
            f"no capacity error flips it ({_already(d)})"
            if d.verdict == "API"
            else f"no capacity error within one {unit_noun(engines(d))} flips it"
        )
    else:
        cap = (f"it would flip were the capacity {k:.2f}× the one priced ({1 / k:.2f}× smaller)" if k < 1 else
               f"it would flip were the capacity {k:.2f}× the one priced")
    held = "holds" if d.holds_across_capacity() else "FLIPS"
    ends = f" — {'; '.join(band_end_text(e, engines(d)) for e in d.band_ends)}" if d.band_ends else ""
    return f"robustness: {cached_price_words(d)}the verdict {held} within {band}: {cap}{ends}{price}"

