"""The full self-host-versus-API report: per-token ledgers on both sides, the monthly bill at a volume, break-even and the four deciding factors.

Assembles ``cost`` (self-hosting), ``api_cost`` and ``breakeven`` around one measured (or
simulated) run and its goodput. The four factors the seed names enter explicitly:
utilization is a number in the arithmetic; data sovereignty, model control and team
capability are stated inputs whose effect on the decision is written out next to the
numbers (team capability also enters as the people-cost line).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from kvledger.catalog.prices import ApiPrice
from kvledger.errors import InputError
from kvledger.evidence.aggregate import AggregateRun
from kvledger.ledgers.api_cost import ApiMix, api_ledger, api_price_per_mtok
from kvledger.ledgers.breakeven import (
    break_even_utilization,
    break_even_volume,
    people_usd_per_month,
    replica_usd_per_month,
)
from kvledger.ledgers.cost import (
    HOURS_PER_MONTH,
    Capacity,
    SelfHostSetup,
    capacity_dict,
    capacity_from,
    self_host_unit_ledgers,
)
from kvledger.ledgers.goodput import GoodputResult
from kvledger.ledgers.items import Ledger, LineItem
from kvledger.ledgers.prefill_floor import PrefillFloor
from kvledger.records import RunRecords

__all__ = ["DecisionFactors", "MonthlyVolume", "CostReport", "build_cost_report", "FACTOR_CHOICES"]

FACTOR_CHOICES = {
    "data_sovereignty": ("required", "preferred", "not_required"),
    "model_control": ("custom_weights", "open_weights", "any"),
    "team_capability": ("experienced", "some", "none"),
}


@dataclass(frozen=True, slots=True)
class DecisionFactors:
    """The non-price inputs of the decision (utilization is in ``SelfHostSetup``)."""

    data_sovereignty: str = "not_required"
    model_control: str = "any"
    team_capability: str = "some"

    def check(self) -> None:
        for name, choices in FACTOR_CHOICES.items():
            if getattr(self, name) not in choices:
                raise InputError(f"{name} must be one of {', '.join(choices)}, got {getattr(self, name)!r}")


@dataclass(frozen=True, slots=True)
class MonthlyVolume:
    """Traffic per month: good requests, or input and output tokens (converted with the run's mean tokens per request)."""

    requests: float | None = None
    input_tokens: float | None = None
    output_tokens: float | None = None


@dataclass(slots=True)
class CostReport:
    """Everything the cost command prints; ``to_dict`` is the JSON for scripts."""

    source: str
    slo: dict[str, Any]
    capacity: dict[str, Any]
    inputs: dict[str, Any]
    self_host_input: Ledger
    self_host_output: Ledger
    api_input: Ledger
    api_output: Ledger
    sticker: dict[str, Any]
    break_even_utilization: dict[str, Any]
    break_even_volume: dict[str, Any]
    monthly: dict[str, Any] | None
    factors: list[dict[str, str]]
    verdict: str
    notes: list[str] = field(default_factory=list)

    def totals(self) -> dict[str, float]:
        return {"self_host_usd_per_mtok_input": self.self_host_input.total_usd, "self_host_usd_per_mtok_output": self.self_host_output.total_usd,
                "api_usd_per_mtok_input": self.api_input.total_usd, "api_usd_per_mtok_output": self.api_output.total_usd}

    def to_dict(self) -> dict[str, Any]:
        d = {k: getattr(self, k) for k in ("source", "slo", "capacity", "inputs", "sticker", "break_even_utilization",
                                           "break_even_volume", "factors", "verdict", "notes")}
        d["totals"] = self.totals()
        d["ledgers"] = {k: getattr(self, k).to_dict() for k in ("self_host_input", "self_host_output", "api_input", "api_output")}
        d["monthly"] = None if self.monthly is None else {**self.monthly, "self_host": self.monthly["self_host"].to_dict(), "api": self.monthly["api"].to_dict()}
        return d


def _monthly(cap: Capacity, setup: SelfHostSetup, price: ApiPrice, mix: ApiMix, vol: MonthlyVolume) -> dict[str, Any]:
    if vol.requests is not None:
        reqs, tin, tout = vol.requests, vol.requests * cap.mean_input_tokens, vol.requests * cap.mean_output_tokens
        how = "good requests per month given; tokens = requests × the run's mean tokens per good request"
    elif vol.input_tokens is not None and vol.output_tokens is not None:
        tin, tout = vol.input_tokens, vol.output_tokens
        reqs = max(tin / cap.mean_input_tokens, tout / cap.mean_output_tokens)
        how = "tokens per month given; replicas sized for max(input, output) in request-equivalents of the run's mix"
    else:
        raise InputError("a monthly volume needs --monthly-requests, or both --monthly-input-tokens and --monthly-output-tokens")
    if min(reqs, tin, tout) < 0:
        raise InputError("monthly volume must be ≥ 0")
    rate = reqs / (HOURS_PER_MONTH * 3600.0)
    replicas = max(1, math.ceil(rate / (cap.goodput_req_per_s * setup.max_utilization) - 1e-12))
    realized = rate / (replicas * cap.goodput_req_per_s)
    sh = Ledger("self-hosted bill per month", "USD per month")
    sh.add(LineItem("GPU rental", "GPU-hour", replicas * setup.num_gpus * HOURS_PER_MONTH, setup.gpu.usd_per_gpu_hour, setup.gpu.source, setup.gpu.as_of,
                    f"{replicas} replica{'' if replicas == 1 else 's'} × {setup.num_gpus} GPU{'' if setup.num_gpus == 1 else 's'} × 730 h; replicas = ⌈{rate:.3f} req/s ÷ ({cap.goodput_req_per_s:.3f} good req/s × {setup.max_utilization:.0%})⌉"))
    sh.add(LineItem("people", "engineer-month", setup.engineer_months_per_month, setup.engineer_usd_per_month, "user input (--engineer-usd-per-month)", "user input",
                    "" if setup.engineer_months_per_month else "not given: pass --engineer-months-per-month and --engineer-usd-per-month (someone has to run it)"))
    api = api_ledger(price, mix, tin / 1e6, tout / 1e6, "API bill per month", "USD per month")
    return {"requests": reqs, "input_tokens": tin, "output_tokens": tout, "how": how, "replicas": replicas,
            "realized_utilization": realized, "self_host": sh, "api": api,
            "cheaper": "self-host" if sh.total_usd < api.total_usd else "API"}


def _factors(setup: SelfHostSetup, f: DecisionFactors, u_star: float) -> list[dict[str, str]]:
    util = (f"{setup.utilization:.0%} of billed hours; break-even at {u_star:.0%}" if math.isfinite(u_star) else f"{setup.utilization:.0%}; no break-even")
    util_effect = ("above break-even: self-hosting is cheaper per good token" if setup.utilization >= u_star else "below break-even: the API is cheaper per good token")
    sov = {"required": "data must stay in your boundary: the API column applies only to a provider endpoint that meets it (regional/residency endpoints cost more than these list prices)",
           "preferred": "a reason to self-host that the price comparison does not capture",
           "not_required": "no constraint: decide on cost and the other factors"}[f.data_sovereignty]
    ctl = {"custom_weights": "you need your own weights (fine-tunes): the API column is valid only if the provider hosts custom models at this price",
           "open_weights": "an open-weights model: API hosts of the same model are comparable; check the row is that model",
           "any": "no constraint on the model"}[f.model_control]
    team = {"experienced": "an experienced team: the people line is what running it costs",
            "some": "some experience: expect the people line to be higher while learning",
            "none": "no serving experience: budget engineer-months before relying on self-hosting"}[f.team_capability]
    if f.team_capability == "none" and setup.engineer_months_per_month == 0:
        team += " (people cost is 0 here: enter it)"
    return [{"factor": "utilization", "value": util, "effect": util_effect},
            {"factor": "data sovereignty", "value": f.data_sovereignty, "effect": sov},
            {"factor": "model control", "value": f.model_control, "effect": ctl},
            {"factor": "team capability", "value": f.team_capability, "effect": team}]


def build_cost_report(run: RunRecords | AggregateRun, gp: GoodputResult, setup: SelfHostSetup, price: ApiPrice, mix: ApiMix,
                      factors: DecisionFactors, volume: MonthlyVolume | None = None, floor: PrefillFloor | str | None = None) -> CostReport:
    """The itemised comparison for one run under the SLO its goodput was computed with (``floor``: the roofline floor
    under a measured run's prefill share, ``ledgers/prefill_floor.py``, or why there is none).

    Raises:
        InputError: out-of-range inputs, an unusable run (unknown duration, no good requests,
            no token counts), or a mix the price row cannot price.
    """
    setup.check()
    factors.check()
    notes = mix.check(price)
    cap = capacity_from(run, gp, setup.prefill_share, floor)
    sh_in, sh_out = self_host_unit_ledgers(cap, setup)
    api_p = api_price_per_mtok(price, mix)
    api_req = (cap.mean_input_tokens * api_p["input"] + cap.mean_output_tokens * api_p["output"]) / 1e6
    u_star = break_even_utilization(cap, setup, api_req)
    sticker_cap = Capacity(cap.goodput_req_per_s, cap.throughput_input_tok_per_s or cap.good_input_tok_per_s,
                           cap.throughput_output_tok_per_s or cap.good_output_tok_per_s, 0.0, 0.0, cap.prefill_share, cap.prefill_share_method, cap.estimate)
    st_in, st_out = self_host_unit_ledgers(sticker_cap, setup)
    sticker = {"usd_per_mtok_input": st_in.total_usd, "usd_per_mtok_output": st_out.total_usd,
               "multiplier_output": sh_out.total_usd / st_out.total_usd if st_out.total_usd else None,
               "note": "same GPU cost spread over all completed tokens (throughput), as a price sheet would; goodput ÷ this = the effective-cost multiplier"}
    monthly = _monthly(cap, setup, price, mix, volume) if volume is not None else None
    if gp.estimate:
        notes.append("goodput is an estimate (lower bound from percentiles or scaled from a sample): self-hosted costs are upper bounds")
    sh_req = (sh_in.total_usd * cap.mean_input_tokens + sh_out.total_usd * cap.mean_output_tokens) / 1e6
    cheaper_unit = "self-host" if sh_req < api_req else "API"
    verdict = (f"at {setup.utilization:.0%} utilization a good request costs ${sh_req:.6f} self-hosted vs ${api_req:.6f} on the API: "
               f"{cheaper_unit} is cheaper per request"
               + (f"; at {monthly['requests']:,.0f} request{'' if round(monthly['requests']) == 1 else 's'}/month the "
                  f"cheaper bill is {monthly['cheaper']}" if monthly else ""))
    inputs = {"gpu": setup.gpu.label, "usd_per_gpu_hour": setup.gpu.usd_per_gpu_hour, "gpu_price_source": setup.gpu.source, "gpu_price_as_of": setup.gpu.as_of,
              "num_gpus": setup.num_gpus, "utilization": setup.utilization, "max_utilization": setup.max_utilization,
              "engineer_months_per_month": setup.engineer_months_per_month, "engineer_usd_per_month": setup.engineer_usd_per_month,
              "api_price": price.key, "api_price_as_of": price.as_of, "api_price_confidence": price.confidence, "api_mix": asdict(mix),
              "replica_usd_per_month": replica_usd_per_month(setup), "people_usd_per_month": people_usd_per_month(setup),
              "api_usd_per_request": api_req, "self_host_usd_per_request": sh_req, "hours_per_month": HOURS_PER_MONTH}
    return CostReport(gp.file, gp.slo, capacity_dict(cap), inputs, sh_in, sh_out,
                      api_ledger(price, mix, 1.0, 0.0, "API cost per 1M input tokens", "USD per 1M input tokens"),
                      api_ledger(price, mix, 0.0, 1.0, "API cost per 1M output tokens", "USD per 1M output tokens"),
                      sticker, u_star, break_even_volume(cap, setup, api_req), monthly,
                      _factors(setup, factors, u_star["utilization"]), verdict, notes)
