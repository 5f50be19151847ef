"""The self-hosted side alone, for a model no API price row serves (and no ``--api`` named): no build-or-buy verdict.

The same arithmetic as the self-hosted half of ``cost_summary.build_cost_report``: the per-token ledgers at the
utilization (a volume's realized one, else the assumed ``--utilization`` or ``--max-utilization``), and with a monthly
volume the replicas it needs and their bill (``self_host_month.monthly_self_host``: whole instances of the cheapest
packing, people once):

    replicas n = max(1, ⌈peak rate ÷ (SLO capacity × max utilization)⌉); utilization = mean rate ÷ (n × capacity)
    bill = billed GPUs × USD per GPU-hour × 730 h + KV tiers + people
    USD per 1k good requests = bill ÷ the volume's good requests × 1,000; USD per 1M tokens (all) = bill ÷ tokens × 10⁶

Without a volume, one replica's month on what must be rented for it (its whole instance: ``instances.pack`` of one
replica, the idle GPUs billed, as the compared report's ledgers and break-even utilization count them) and the cost of
a good request at the assumed utilization, the ledgers carrying those idle GPUs. Break-even, API
options and the verdict need an API price: they are None, and ``verdict_reason`` says why and how to name one.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from types import SimpleNamespace
from typing import Any

from kvledger.jsonable import to_jsonable
from kvledger.ledgers.amounts import pct_text
from kvledger.ledgers.breakeven import people_usd_per_month, replica_usd
from kvledger.ledgers.cost import (
    HOURS_PER_MONTH,
    Capacity,
    SelfHostSetup,
    capacity_from,
    self_host_unit_ledgers,
)
from kvledger.ledgers.decision_notes import on_instances_words, tokens_text, volume_good_requests
from kvledger.ledgers.factor_rows import assumed_utilization
from kvledger.ledgers.instances import Packing, pack
from kvledger.ledgers.items import Ledger
from kvledger.ledgers.packings import gpu_inputs, gpu_words, packing_rows
from kvledger.ledgers.report_core import SelfHostLedgers
from kvledger.ledgers.self_host_month import monthly_self_host, priced_as_bought, size_volume
from kvledger.ledgers.sticker import capacity_dict, sticker_prices
from kvledger.ledgers.tier_items import tier_usd_per_month
from kvledger.ledgers.volume import (
    MonthlyVolume,
    Volume,
    refuse_utilization_with_volume,
    resolve_volume,
    split_tokens,
    tokens_per_request,
)
from kvledger.ledgers.volume_rate import given_clause

__all__ = ["SelfHostMonth", "SelfHostReport", "build_self_host_report", "no_api_reason"]


def no_api_reason(model: str | None) -> str:
    """Why there is no verdict, and how to get one."""
    return (f"no API row serves {model or 'this model'}, so there is no build-vs-buy verdict; for one, name a "
            "comparable model's API price with --api PROVIDER:MODEL (kvledger prices --kind api lists them)")


@dataclass(slots=True)
class SelfHostMonth:
    """A monthly volume served self-hosted: replicas, realized utilization, the rented bill (and the bought one when
    priced), the packing on whole instances, the sizing in words and the volume's good requests."""

    volume: Volume
    replicas: int
    realized_utilization: float
    max_utilization: float
    rent: Ledger
    buy: Ledger | None
    packing: Packing
    sizing: str
    good_requests: float = 0.0
    good_requests_how: str = ""

    @property
    def self_host(self) -> Ledger:
        """The rented bill, by the name ``self_host_month.priced_as_bought`` reads a decision's."""
        return self.rent

    @property
    def self_host_usd(self) -> float:
        """The cheaper of the rented and bought bills, USD per month."""
        return min(self.rent.total_usd, self.buy.total_usd) if self.buy is not None else self.rent.total_usd

    def to_dict(self) -> dict[str, Any]:
        """The ``monthly`` section: a compared report's keys (``api`` and ``cheaper`` None) and the unit costs."""
        v, n_tok = self.volume, self.volume.input_tokens + self.volume.output_tokens
        return {"requests": v.requests, "input_tokens": v.input_tokens, "output_tokens": v.output_tokens,
                "how": v.how, "replicas": self.replicas, "realized_utilization": self.realized_utilization,
                "max_utilization": self.max_utilization, "self_host": to_jsonable(self.rent),
                "buy": None if self.buy is None else to_jsonable(self.buy), "api": None, "cheaper": None,
                "self_host_usd_per_month": self.self_host_usd, "good_requests": self.good_requests,
                "good_requests_how": self.good_requests_how,
                "usd_per_1k_good_requests": self.self_host_usd / self.good_requests * 1e3 if self.good_requests
                else None, "usd_per_mtok_all_tokens": self.self_host_usd / n_tok * 1e6 if n_tok else None,
                "sizing": self.sizing, "instances": self.packing.instances,
                "gpus_per_instance": self.packing.gpus_per_instance, "idle_gpus": self.packing.idle_gpus,
                "instance_type": self.packing.instance_type, "usd_per_gpu_hour": self.packing.usd_per_gpu_hour,
                "instance_rows": packing_rows(self.packing)}


@dataclass(slots=True)
class SelfHostReport(SelfHostLedgers):
    """What ``cost`` prints for a model no API row serves; ``__json__`` keeps the keys of ``CostReport``'s JSON (the API
    ones None or empty) and adds ``verdict_reason``."""

    __json__ = ("source", "slo", "capacity", "inputs", "sticker", "break_even_utilization", "break_even_volume",
                "factors", "verdict", "verdict_reason", "headline", "secondary", "api_options", "notes", "decision",
                "totals", "ledgers", ("monthly", "month"))
    sticker: dict[str, Any]
    month: SelfHostMonth | None
    verdict_reason: str
    headline: list[str] = field(default_factory=list)
    secondary: str = ""
    notes: list[str] = field(default_factory=list)
    verdict: None = None
    decision: None = None
    break_even_utilization: None = None
    break_even_volume: None = None
    factors: list = field(default_factory=list)
    api_options: list = field(default_factory=list)

    def totals(self) -> dict[str, float | None]:
        return {"self_host_usd_per_mtok_input": self.self_host_input.total_usd,
                "self_host_usd_per_mtok_output": self.self_host_output.total_usd,
                "api_usd_per_mtok_input": None, "api_usd_per_mtok_output": None}

    @property
    def ledgers(self) -> dict[str, Ledger | None]:
        return {"self_host_input": self.self_host_input, "self_host_output": self.self_host_output,
                "api_input": None, "api_output": None}

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


def self_host_month(cap: Capacity, setup: SelfHostSetup, vol: Volume, inputs: Any) -> SelfHostMonth:
    """Replicas for ``vol``'s peak at ``setup.max_utilization``, their realized utilization and monthly bills (as
    ``decision.decide`` sizes them, with no API to compare)."""
    z = size_volume(cap, setup, vol, buy=inputs.buy, power=inputs.power, people_source=inputs.people_source)
    return SelfHostMonth(vol, z.replicas, z.load, setup.max_utilization, z.rent, z.bought, z.packing, z.how)


def _one_bought(setup: SelfHostSetup, inputs: Any) -> tuple[SelfHostSetup, Packing] | None:
    """Without a volume, one replica bought (``--gpu-capex-usd``) at ``setup``'s utilization where that bills less
    than renting it (``priced_as_bought`` of its month: purchase, power at that load, hosting); None otherwise."""
    if inputs.buy is None or inputs.buy.gpu_capex_usd is None:  # no --gpu-capex-usd: buying not priced
        return None
    u = setup.utilization or 0.0
    rent, buy = (monthly_self_host(setup, 1, u, buy=b, power=inputs.power) for b in (None, inputs.buy))
    return priced_as_bought(SimpleNamespace(buy=buy, self_host=rent, replicas=1, realized_utilization=u), setup,
                            "the utilization priced")


def build_self_host_report(run: Any, gp: Any, setup: SelfHostSetup, volume: MonthlyVolume | None = None,
                           floor: Any = None, inputs: Any = None, *, slo_capacity_req_per_s: float | None = None,
                           capacity_bound_req_per_s: float | None = None,
                           load: Any = None, lower_bound: bool = False) -> SelfHostReport:
    """The self-hosted ledger of one run under its goodput's SLO, as ``build_cost_report`` takes its arguments (less
    the API row, mix and deciding factors); ``inputs``: a ``DecisionInputs`` (model, bought GPUs, people source)."""
    refuse_utilization_with_volume(setup.utilization, volume is not None)
    peak = 1.0 if volume is not None else getattr(inputs, "peak_to_mean", 1.0)  # no volume: the mean a peak allows
    assumed, assumed_how = assumed_utilization(setup.max_utilization, peak)
    base = setup if setup.utilization is not None else replace(setup, utilization=assumed)
    base.check()
    if inputs.buy is not None:
        inputs.buy.check()
    cap = capacity_from(run, gp, setup.prefill_share, floor, slo_capacity_req_per_s=slo_capacity_req_per_s,
                        capacity_bound_req_per_s=capacity_bound_req_per_s, lower_bound=lower_bound)
    month = None
    if volume is not None:
        month = self_host_month(cap, base, resolve_volume(volume, cap), inputs)
        u = month.realized_utilization if month.realized_utilization > 0 else base.max_utilization
        setup, util_how = replace(base, utilization=u, gpu=month.packing.rate), "the volume's realized utilization"
        bought = priced_as_bought(month, setup)  # the bill the month takes: bought where cheaper than renting
        if load is not None:
            cap.load = load
        month.good_requests, month.good_requests_how = volume_good_requests(month.volume.requests, cap)
    else:
        util_how = "given (--utilization)" if setup.utilization is not None else assumed_how
        one = pack(base.gpu, 1, base.num_gpus, base.engine_replicas)  # one replica's instance, rented whole
        setup = replace(base, gpu=one.rate)
        bought = _one_bought(setup, inputs)
    n, packing = (month.replicas, month.packing) if month is not None else (None, one)
    setup, packing = bought or (setup, packing)  # bought GPUs price the ledgers where they are the cheaper bill
    split = split_tokens(month.volume if month is not None else None, cap)  # priced per token given (volume.py)
    sh_in, sh_out = self_host_unit_ledgers(cap, setup, replicas=n, packing=packing, split=split)
    ins, outs = tokens_per_request(month.volume, cap)[:2] if split else (cap.mean_input_tokens, cap.mean_output_tokens)
    sh_req = (sh_in.total_usd * ins + sh_out.total_usd * outs) / 1e6
    if month is not None and month.good_requests > 0:  # the month's own bill per good request, as its line states
        sh_req = month.self_host_usd / month.good_requests
    reason = no_api_reason(inputs.model)
    notes = []
    if gp.estimate:
        notes.append("goodput is an estimate (lower bound from percentiles or scaled from a sample): self-hosted costs "
                     "are upper bounds")
    inputs_d = {**gpu_inputs(setup.gpu, packing), "num_gpus": setup.num_gpus,
                "utilization": setup.utilization, "utilization_how": util_how,
                "max_utilization": setup.max_utilization,
                "engineer_months_per_month": setup.engineer_months_per_month,
                "engineer_usd_per_month": setup.engineer_usd_per_month, "people_source": inputs.people_source,
                "api_price": None, "api_price_as_of": None, "api_price_confidence": None, "api_mix": None,
                **replica_usd(setup),
                "people_usd_per_month": people_usd_per_month(setup), "api_usd_per_request": None,
                "self_host_usd_per_request": sh_req, "hours_per_month": HOURS_PER_MONTH}
    return SelfHostReport(gp.file, gp.slo, capacity_dict(cap), inputs_d, sh_in, sh_out,
                          sticker_prices(cap, setup, sh_out, n, packing, split), month, reason,
                          self_host_lines(reason, month, setup, packing, (sh_in, sh_out, sh_req), inputs_d), "",
                          notes)


def self_host_lines(reason: str, month: SelfHostMonth | None, setup: SelfHostSetup, packing: Packing,
                    unit: tuple[Ledger, Ledger, float], inputs_d: dict[str, Any]) -> list[str]:
    """The answer's lines: no verdict and why; the month at the volume (or one replica's, on the whole instance it
    rents); the unit costs (``unit``: the input and output ledgers, USD per good request)."""
    sh_in, sh_out, sh_req = unit
    gpu = f"{on_instances_words(packing)} ({gpu_words(packing)})"
    units = f"${sh_in.total_usd:.4f} per 1M input and ${sh_out.total_usd:.4f} per 1M output tokens"
    if month is None:
        rent = packing.usd_per_hour * HOURS_PER_MONTH
        one = rent + tier_usd_per_month(setup.kv_tiers, setup.num_gpus) + inputs_d["people_usd_per_month"]
        whole = f" (GPU rental ${rent:,.2f}: the whole instance, idle GPUs billed)" if packing.idle_gpus else ""
        whole += " (bought GPUs, cheaper than renting)" if setup.gpu_item.startswith("bought") else ""
        words = packing.unit_words()  # 1 replica × 1 GPU; --replicas N: 2 replicas × 1 GPU (one deployment unit)
        head = f"{'one' + words.removeprefix('1') if packing.engines_per_unit == 1 else words}{gpu}"
        return [f"answer: no verdict — {reason}; the self-hosted side alone follows",
                f"  self-hosted, {head}: ${one:,.2f}/month, people included{whole}; at "
                f"{pct_text(setup.utilization)} utilization ({inputs_d['utilization_how']}) {units}, "
                f"${sh_req * 1e3:,.4f} per 1k good requests",
                "  for the bill at your volume pass --monthly-requests or --monthly-tokens"]
    v, d = month.volume, month.to_dict()
    per_k = d["usd_per_1k_good_requests"]
    bought = " (bought GPUs, cheaper than renting)" if month.self_host_usd < month.rent.total_usd else ""
    return [f"answer: no verdict — {reason}; the self-hosted side alone follows",
            f"  self-hosted bill{bought} ${month.self_host_usd:,.2f}/month for {v.requests:,.0f} requests "
            f"({tokens_text(v.input_tokens)} in + {tokens_text(v.output_tokens)} out tokens{given_clause(v.given)}): "
            f"{packing.unit_words()}{gpu} at {pct_text(month.realized_utilization)} utilization",
            f"  {units}; " + ("no good request to price per 1k" if per_k is None else
                              f"${per_k:,.4f} per 1k good requests") +
            ("" if d["usd_per_mtok_all_tokens"] is None else
             f"; ${d['usd_per_mtok_all_tokens']:,.4f} per 1M tokens, input and output together")]

