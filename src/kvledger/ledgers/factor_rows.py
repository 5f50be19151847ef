"""The deciding factors beside the price comparison, in words: utilization against break-even, data sovereignty,
model control and team capability (``cost_summary.build_cost_report``'s ``factors`` rows)."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

from kvledger.ledgers.amounts import pct_text, unit_noun, units_text

if TYPE_CHECKING:
    from kvledger.ledgers.cost import SelfHostSetup
    from kvledger.ledgers.cost_summary import DecisionFactors

__all__ = ["factor_rows", "share_text", "peak_cap_text", "at_peak", "assumed_utilization", "verdict_conditions",
           "conditioned_head"]


def share_text(x: float) -> str:
    """A utilization as a percentage: one decimal below 10 % (0.48 % is "0.5%", not "0%", as the answer's sizing line
    gives it), whole percents from there."""
    return pct_text(x) if x < 0.095 else f"{x:.0%}"


def peak_cap_text(u_star: dict[str, Any]) -> str:
    """'' unless a peak above the mean caps a replica's mean utilization (``mean_utilization_cap`` = max utilization ÷
    peak-to-mean: replicas are sized for the peak) below the break-even ``u_star``; then that the break-even is out
    of that reach, e.g. " — above the 26.7% mean utilization --peak-to-mean 3 allows (80% ÷ 3)"."""
    cap, peak = u_star.get("mean_utilization_cap"), u_star.get("peak_to_mean") or 1.0
    u = u_star.get("required_utilization")  # u*, above 1 too (``utilization`` is None there)
    if cap is None or peak <= 1 or u is None or not math.isfinite(u) or u <= cap:
        return ""
    return (f" — above the {pct_text(cap)} mean utilization --peak-to-mean {peak:g} allows "
            f"({pct_text(cap * peak, 0)} ÷ {peak:g}): not reachable at this peak")


def _utilization_row(util: float, u_star: dict[str, Any], volume_breaks_even: bool,
                     per_unit: int = 1) -> tuple[str, str]:
    """(value, effect) of the utilization row. Without a volume u* is one replica's, the whole people line on it; at
    a higher volume more replicas share that line, so one replica below its u* does not make the API cheaper at every
    volume (the break-even volume says where self-hosting wins). A capacity only bounded below makes u* an upper bound,
    and without a volume names the capacity multiplier at which ``util`` reaches it (``u_star``'s
    ``capacity_multiplier``: ``breakeven.break_even_utilization``)."""
    u, replicas, lower = u_star["required_utilization"], u_star["replicas"], u_star.get("capacity_lower_bound", False)
    whose = (f"one {unit_noun(per_unit)}'s break-even" if replicas == 1 else
             f"break-even of the {units_text(replicas, per_unit)} the volume needs")
    most = " (at most: the capacity priced is a lower bound)" if lower else ""
    value = (f"{share_text(util)} of billed hours; {whose} at {share_text(u)}{most}{peak_cap_text(u_star)}"
             if math.isfinite(u) else
             f"{share_text(util)}; no break-even")
    if util >= u:
        return value, "above break-even: self-hosting costs less for the same requests"
    k = u_star.get("capacity_multiplier")
    flip = ("" if k is None else f" at the capacity priced; were the capacity {k:.2f}× the one priced (the run's "
            f"goodput is only its offered load, which does not rule that out), {share_text(util)} would reach "
            "break-even")
    if not volume_breaks_even:
        return value, f"below break-even: the API costs less for the same requests{flip}"
    them = f"one {unit_noun(per_unit)} costs" if replicas == 1 else f"{units_text(replicas, per_unit)} cost"
    return value, (f"below break-even: {them} more than the API for the same requests{flip}; at a higher volume more "
                   f"{unit_noun(per_unit)}s share the people line, and self-hosting wins above the break-even volume")


def factor_rows(setup: SelfHostSetup, f: DecisionFactors, u_star: dict[str, Any],
                volume_breaks_even: bool) -> list[dict[str, str]]:
    """The deciding factors' rows (factor, value, effect): utilization against its break-even ``u_star``
    (``breakeven.break_even_utilization``: for its ``replicas``, who share the people line), then data sovereignty,
    model control and team capability as ``f`` gives them; ``volume_breaks_even``: a break-even volume exists (on
    more replicas, if need be)."""
    util, util_effect = _utilization_row(setup.utilization, u_star, volume_breaks_even, setup.engine_replicas)
    sov = {"required": "data must stay in your boundary: the API column applies only to a provider endpoint that meets "
                       "it (regional/residency endpoints cost more than these list prices)",
           "preferred": "a reason to self-host that the price comparison does not capture",
           "not_required": "no constraint: decide on cost and the other factors"}[f.data_sovereignty]
    ctl = {"custom_weights": "you need your own weights (fine-tunes): the API column is valid only if the provider "
                             "hosts custom models at this price",
           "open_weights": "an open-weights model: API hosts of the same model are comparable; check the row is that "
                           "model",
           "any": "no constraint on the model"}[f.model_control]
    team = {"experienced": "an experienced team: the people line is what running it costs",
            "some": "some experience: expect the people line to be higher while learning",
            "none": "no serving experience: budget engineer-months before relying on self-hosting"}[f.team_capability]
    if setup.engineer_months_per_month == 0:  # no people line: nothing is "higher" or "what running it costs"
        team = {"experienced": "an experienced team",
                "some": "some experience",
                "none": "no serving experience"}[f.team_capability] + (
            ": the people line is 0 here (--engineer-months-per-month 0), so this bill carries none of the team's time"
            + ("" if f.team_capability == "experienced" else "; a team still learning to serve costs some: enter it"))
    return [{"factor": "utilization", "value": util, "effect": util_effect},
            {"factor": "data sovereignty", "value": f.data_sovereignty, "effect": sov},
            {"factor": "model control", "value": f.model_control, "effect": ctl},
            {"factor": "team capability", "value": f.team_capability, "effect": team}]


def at_peak(u_star: dict[str, Any], decision: Any, setup: Any, peak_to_mean: float = 1.0) -> float:
    """Adds to ``u_star`` the volume's peak-to-mean and the highest mean utilization a replica sized for that peak
    runs at (max utilization ÷ peak); a break-even above it is out of reach (``reachable`` False, as the text says:
    ``peak_cap_text``). Returns the peak-to-mean: the volume's, else ``peak_to_mean`` (--peak-to-mean given without
    a volume: the break-even is sized for the same peak as a volume's answer would be)."""
    peak = decision.volume.peak_to_mean if decision is not None else peak_to_mean  # replicas sized for the peak
    u_star.update(peak_to_mean=peak, mean_utilization_cap=setup.max_utilization / peak)
    if peak > 1 and u_star["required_utilization"] > u_star["mean_utilization_cap"]:
        u_star["reachable"] = False
    return peak


def assumed_utilization(max_utilization: float, peak_to_mean: float) -> tuple[float, str]:
    """(the utilization priced with neither --utilization nor a volume, how it was set): --max-utilization ÷
    --peak-to-mean, the highest mean a replica sized for that peak runs at (``at_peak``'s ``mean_utilization_cap``,
    the bound ``volume.refuse_utilization_above_peak`` holds a given one to): at a cap of 0.8 and a peak 3× the mean,
    0.8 ÷ 3 = 0.2667; with flat traffic (P = 1) the cap itself."""
    if peak_to_mean <= 1:
        return max_utilization, "assumed: --max-utilization, no volume given"
    return (max_utilization / peak_to_mean,
            f"assumed: --max-utilization {max_utilization:g} ÷ --peak-to-mean {peak_to_mean:g}, no volume given")


def verdict_conditions(f: DecisionFactors) -> list[str]:
    """What an API answer holds only under, from the factors a buyer cannot trade for price: data that must stay in
    their boundary (``--data-sovereignty required``) and their own weights (``--model-control custom_weights``). The
    list prices compared are of shared public endpoints, so the API side is real only where a provider offers that."""
    out = []
    if f.data_sovereignty == "required":
        out.append("a provider meets your data-sovereignty requirement")
    if f.model_control == "custom_weights":
        out.append("a provider hosts your custom weights at this price")
    return out


def conditioned_head(head: list[str], conditions: list[str], api_verdict: bool) -> list[str]:
    """The answer's lines with the API side's ``conditions`` carried in them: a volume's API verdict says them in its
    first line ("answer: the API, if a provider meets …"); without a volume (the API below a break-even, or at any
    volume) a line after the first says them; a self-host verdict needs none."""
    if not conditions:
        return head
    cond = " and ".join(conditions)
    dear = [w for w, k in (("regional or residency endpoints", "sovereignty"), ("custom-weights hosting", "custom"))
            if any(k in c for c in conditions)]
    why = f"{' and '.join(dear)} usually cost more than these shared-endpoint list prices: get the provider's quote"
    if api_verdict and head[0].startswith("answer: the API"):
        return [f"answer: the API, if {cond}{head[0].removeprefix('answer: the API')}",
                f"  condition: the API bill is of shared public endpoints; {why}", *head[1:]]
    if head[0].startswith("answer: self-host"):
        return head
    return [head[0], f"  condition: the API side holds only if {cond}; {why}", *head[1:]]
