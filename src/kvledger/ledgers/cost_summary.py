"""The self-host-versus-API report: per-token ledgers on both sides, the monthly bills, break-even, deciding factors.

Assembles ``cost`` (self-hosting), ``api_cost`` and ``breakeven`` around one measured (or simulated) run and its
goodput. The four factors the seed names enter explicitly: utilization is a number in the arithmetic; data sovereignty,
model control and team capability are stated inputs whose effect on the decision is written out next to the numbers
(team capability also enters as the people-cost line).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import Any

from kvledger.catalog.prices import ApiPrice
from kvledger.errors import InputError
from kvledger.evidence.aggregate import AggregateRun
from kvledger.jsonable import to_jsonable
from kvledger.ledgers.api_cost import ApiMix, api_ledger, api_row_notes, per_request_rows, usd_per_request
from kvledger.ledgers.breakeven import break_even_utilization, break_even_volume, people_usd_per_month, replica_usd
from kvledger.ledgers.cost import HOURS_PER_MONTH, Capacity, SelfHostSetup, capacity_from, self_host_unit_ledgers
from kvledger.ledgers.decision import Decision, GpuPower, MonthlyVolume, api_options, decide, resolve_volume
from kvledger.ledgers.decision_notes import (
    no_volume_lines,
    people_scale_line,
    secondary_line,
    verdict_lines,
    volume_good_requests,
)
from kvledger.ledgers.factor_rows import assumed_utilization, at_peak, conditioned_head, factor_rows, verdict_conditions
from kvledger.ledgers.goodput import GoodputResult
from kvledger.ledgers.host_bill import DEFAULT_TEAM_CAPABILITY, HostBill
from kvledger.ledgers.instances import pack
from kvledger.ledgers.items import Ledger
from kvledger.ledgers.load_share import LoadShare
from kvledger.ledgers.monthly_section import monthly_section
from kvledger.ledgers.packings import gpu_inputs, gpu_words
from kvledger.ledgers.prefill_floor import PrefillFloor
from kvledger.ledgers.report_core import SelfHostLedgers
from kvledger.ledgers.same_model_note import same_model_cheaper_lines
from kvledger.ledgers.self_host_month import bought_power, priced_as_bought
from kvledger.ledgers.spare_note import spare_replica_lines
from kvledger.ledgers.sticker import capacity_dict, sticker_prices
from kvledger.ledgers.volume import refuse_utilization_with_volume, split_tokens, tokens_per_request
from kvledger.records import RunRecords

__all__ = ["DecisionFactors", "DecisionInputs", "MonthlyVolume", "CostReport", "build_cost_report", "FACTOR_CHOICES"]

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
    team_capability: str = DEFAULT_TEAM_CAPABILITY

    def check(self) -> None:
        for name, choices in FACTOR_CHOICES.items():
            if getattr(self, name) not in choices:
                raise InputError(f"{name} must be one of {', '.join(choices)}, got {getattr(self, name)!r}")


@dataclass(slots=True)
class CostReport(SelfHostLedgers):
    """Everything the cost command prints; ``__json__`` is the JSON for scripts."""

    __json__ = ("source", "slo", "capacity", "inputs", "sticker", "break_even_utilization", "break_even_volume",
                "factors", "verdict", "verdict_conditions", "headline", "secondary", "api_options", "notes", "decision",
                "totals", "ledgers", "monthly")
    api_input: Ledger
    api_output: Ledger
    sticker: dict[str, Any]
    break_even_utilization: dict[str, Any]
    break_even_volume: dict[str, Any]
    factors: list[dict[str, str]]
    verdict: str
    notes: list[str] = field(default_factory=list)
    decision: Decision | None = None
    headline: list[str] = field(default_factory=list)
    api_options: list[dict[str, Any]] = field(default_factory=list)
    secondary: str = ""
    verdict_conditions: list[str] = field(default_factory=list)  # what an API answer holds only under (factor_rows)

    @property
    def monthly(self) -> dict[str, Any] | None:
        """The ``monthly`` section: the decision's facts by their older names, read from it (``monthly_section``)."""
        return None if self.decision is None else monthly_section(self.decision)

    def totals(self) -> dict[str, float]:
        return {"self_host_usd_per_mtok_input": self.self_host_input.total_usd,
                "self_host_usd_per_mtok_output": self.self_host_output.total_usd,
                "api_usd_per_mtok_input": self.api_input.total_usd,
                    "api_usd_per_mtok_output": self.api_output.total_usd}

    @property
    def ledgers(self) -> dict[str, Ledger]:
        """The four per-Mtok ledgers by name."""
        return {"self_host_input": self.self_host_input, "self_host_output": self.self_host_output,
                "api_input": self.api_input, "api_output": self.api_output}

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


@dataclass(frozen=True)
class DecisionInputs:
    """What the volume-first decision needs beyond the run: the API rows to compare (row, serves the same model, named
    by the user), the bought-GPU inputs and board power, where the people figures came from, and what the answer rests
    on (the capacity band and its source, the inputs of low confidence)."""

    api_rows: tuple[tuple[ApiPrice, bool, bool], ...] = ()
    buy: HostBill | None = None
    power: GpuPower | None = None
    people_source: str = "user input (--engineer-months-per-month, --engineer-usd-per-month)"
    capacity_band: float = 0.3
    band_source: str = "kvledger assumption for an uncalibrated capacity"
    rests_on: tuple[str, ...] = ()
    model: str | None = None  # the model the rows were looked up for
    band_sides: tuple[float, float] | None = None  # (fraction below, fraction above); None: ±capacity_band
    quantization: str | None = None  # the self-hosted weights' --quantization (fp8), for the FP8 API row's note
    peak_to_mean: float = 1.0  # --peak-to-mean: the break-even sizes for it without a volume too (factor_rows.at_peak)
    engine: str | None = None  # the simulated plan's engine ("sglang": the FP8 API row's note in SGLang's words)


def _rows(price: ApiPrice | None, inputs: DecisionInputs) -> list[tuple[ApiPrice, bool | None, bool]]:
    rows = list(inputs.api_rows)
    if price is not None and all(r[0].key != price.key for r in rows):
        rows.insert(0, (price, None, True))  # named by a caller that did not say whether it is the same model
    if not rows:
        raise InputError(f"no API row to compare with: no catalog row serves {inputs.model or 'this model'}; name one "
                         "with --api (kvledger prices --kind api lists them)")
    return rows


def _primary_without_volume(rows: list[tuple[ApiPrice, bool | None, bool]], mix: ApiMix, cap: Capacity) -> ApiPrice:
    named = [r for r, _, n in rows if n]
    if named:
        return named[0]
    # the cheapest after the mix (a tie: the higher confidence: api_cost.tie_order)
    options = per_request_rows(rows, mix, tokens_per_request(None, cap))
    return next(r for r, _, _ in rows if r.key == options[0]["key"])


def _decide(cap: Capacity, setup: SelfHostSetup, base: SelfHostSetup, rows: list, mix: ApiMix,
            volume: MonthlyVolume | None, inputs: DecisionInputs) -> tuple[Any, list[str], ApiPrice, str, Any, Any]:
    """(the decision for ``volume``, None without one; its notes; the API row compared; how the utilization was set;
    the setup at that utilization; the whole instances billed: the volume's, else one replica's)."""
    decision, notes = None, []
    if volume is not None:
        opts, notes = api_options(rows, mix, resolve_volume(volume, cap))
        decision = decide(cap, base, resolve_volume(volume, cap), opts, buy=inputs.buy, power=inputs.power,
                          people_source=inputs.people_source, capacity_band=inputs.capacity_band,
                          band_source=inputs.band_source, rests_on=list(inputs.rests_on),
                          band_sides=inputs.band_sides)
        primary, realized = decision.primary.price, decision.realized_utilization
        util_how = "the volume's realized utilization"  # an assumed one is refused (refuse_utilization_with_volume)
        setup = replace(setup, utilization=realized if realized > 0 else setup.max_utilization)
        setup = replace(setup, gpu=decision.packing.rate)  # the row the replicas are billed on (instances.pack)
        setup, packing = priced_as_bought(decision, setup) or (setup, decision.packing)  # the verdict's bill
    else:
        primary = _primary_without_volume(rows, mix, cap)
        util_how = ("given (--utilization)" if setup.utilization is not None  # else at the mean a peak allows
                    else assumed_utilization(base.max_utilization, inputs.peak_to_mean)[1])
        packing = pack(base.gpu, 1, base.num_gpus, base.engine_replicas)  # one replica's cheapest packing (idle GPUs)
        setup = replace(base, gpu=packing.rate)
    return decision, notes, primary, util_how, setup, packing


def _headline(decision: Decision | None, b_vol: Any, setup: SelfHostSetup, primary: ApiPrice,
              rows: list, cap: Capacity, simulated: bool, factors: DecisionFactors,
              inputs: DecisionInputs) -> tuple[list[str], str]:
    """(the answer's lines, the verdict) with or without a volume, a warning when the capacity is only a lower bound
    (``simulated``: a simulated run at its offered load, whose fix differs), and a note when the row is another
    model; ``inputs``' --quantization and engine word the FP8 API row's note."""
    if decision is not None:
        head = verdict_lines(decision, b_vol, gpu_words(decision.packing), setup.num_gpus)
        head += [w for w in (people_scale_line(decision, setup.engineer_months_per_month, setup.num_gpus),) if w]
        head = conditioned_head(head, verdict_conditions(factors), decision.verdict == "API")
        verdict = head[0].removeprefix("answer: ")
    else:
        head = conditioned_head(no_volume_lines(b_vol, primary.key), verdict_conditions(factors), False)
        verdict = head[0].removeprefix("answer: ").removeprefix("answer ")
    if cap.lower_bound:
        from kvledger.ledgers.decision_notes import lower_bound_line

        head.insert(1, lower_bound_line(cap.goodput_req_per_s, decision, simulated=simulated,
                                        breaks_even=b_vol.get("requests_per_month") is not None))
    if next((same for r, same, _ in rows if r.key == primary.key), None) is False:
        others = [r.key for r, same, _ in rows if same]
        head.append(f"  note: {primary.key} is not the same model: compare quality separately"
                    + (f" (rows serving it: {', '.join(others)})" if others else " (no catalog row serves this model)"))
        head += same_model_cheaper_lines(decision)  # the same open model as an API beats self-hosting it
    head += api_row_notes(primary, inputs.quantization, inputs.engine)  # an FP8 row, a withdrawn price
    head += spare_replica_lines(decision, setup)  # one replica priced with no spare for failover
    return head, verdict


def build_cost_report(run: RunRecords | AggregateRun, gp: GoodputResult, setup: SelfHostSetup, price: ApiPrice | None,
                      mix: ApiMix, factors: DecisionFactors, volume: MonthlyVolume | None = None,
                      floor: PrefillFloor | str | None = None, inputs: DecisionInputs | None = None, *,
                      slo_capacity_req_per_s: float | None = None, capacity_bound_req_per_s: float | None = None,
                      load: LoadShare | None = None, lower_bound: bool = False) -> CostReport:
    """The decision for one run under the SLO its goodput was computed with: with a ``volume``, both monthly bills and
    the verdict (``decision.decide``); always the per-token ledgers, break-even and the factors. ``price``: the API
    row the user named (None: the rows in ``inputs.api_rows``); ``setup.utilization``: assumed, refused with a
    ``volume`` (its realized utilization is priced: ``volume.refuse_utilization_with_volume``), None without one:
    ``--max-utilization``, stated. ``floor``: the roofline floor under a measured run's prefill share.
    ``slo_capacity_req_per_s``, ``capacity_bound_req_per_s``: a search's SLO capacity and the bound where it caps it.
    ``load``: a run of the same workload at the volume's load per replica (``ledgers/load_share.py``); it prices the
    per-token ledgers and counts the volume's good requests. ``lower_bound``: the run was under-loaded, so its
    goodput is only a lower bound on the capacity (``cost.Capacity``; the answer says so, and the decision's band has
    no upper end: ``decision``). Both token volumes given: per-token ledgers, API per request, break-even at the
    user's split (``volume.split_tokens``). Raises InputError: out-of-range inputs, an unusable run (no duration, no
    token counts) or a mix the price row cannot price; NoAnswerError: no good request (``cost.capacity_from``)."""
    from kvledger.ledgers.api_cost import is_upper_bound

    inputs = inputs or DecisionInputs()
    refuse_utilization_with_volume(setup.utilization, volume is not None)
    factors.check()
    rows = _rows(price, inputs)
    assumed = assumed_utilization(setup.max_utilization, 1.0 if volume is not None else inputs.peak_to_mean)[0]
    base = setup if setup.utilization is not None else replace(setup, utilization=assumed)
    base.check()
    if inputs.buy is not None:
        inputs.buy.check()
    cap = capacity_from(run, gp, setup.prefill_share, floor, slo_capacity_req_per_s=slo_capacity_req_per_s,
                        capacity_bound_req_per_s=capacity_bound_req_per_s, lower_bound=lower_bound)
    decision, notes, primary, util_how, setup, packing = _decide(cap, setup, base, rows, mix, volume, inputs)
    if load is not None and decision is not None:
        cap.load = load
    notes = [*mix.check(primary), *(n for n in notes if n not in mix.check(primary))]
    n_vol, vol = (decision.replicas, decision.volume) if decision is not None else (None, None)  # people shared
    split, per_req = split_tokens(vol, cap), tokens_per_request(vol, cap)
    sh_in, sh_out = self_host_unit_ledgers(cap, setup, replicas=n_vol, packing=packing, split=split)
    api_req = usd_per_request(primary, mix, per_req)
    # at a volume, for the replicas it needs (they share the people line: one replica's u* contradicted the verdict)
    power = bought_power(decision, inputs.buy, inputs.power)  # bought: power at the break-even's own load
    u_star = break_even_utilization(cap, setup, api_req, n_vol or 1, None if decision else setup.utilization, power)
    peak = at_peak(u_star, decision, setup, inputs.peak_to_mean)
    b_vol = break_even_volume(cap, replace(setup, max_utilization=setup.max_utilization / peak), api_req, mix=per_req,
                              power=power, peak_to_mean=peak)
    b_vol.update(peak_to_mean=peak, mean_utilization_cap=setup.max_utilization / peak,
                 api_is_upper_bound=is_upper_bound(mix, primary))  # an "at most" API: an "at least" break-even
    sticker = sticker_prices(cap, setup, sh_out, n_vol, packing, split)
    notes += _caveats(gp.estimate)
    ins, outs = per_req[:2] if split else (cap.mean_input_tokens, cap.mean_output_tokens)
    sh_req = (sh_in.total_usd * ins + sh_out.total_usd * outs) / 1e6
    head, verdict = _headline(decision, b_vol, setup, primary, rows, cap, gp.simulated, factors, inputs)
    second, sh_req = _secondary(decision, setup.utilization, util_how, sh_req, api_req, cap)
    inputs_d = _inputs_dict(setup, packing, util_how, inputs.people_source, primary, mix, (api_req, sh_req))
    per_row = per_request_rows(rows, mix, per_req)  # cheapest first, as the text lists them
    return CostReport(gp.file, gp.slo, capacity_dict(cap), inputs_d, sh_in, sh_out,
                      api_ledger(primary, mix, 1.0, 0.0, "API cost per 1M input tokens", "USD per 1M input tokens"),
                      api_ledger(primary, mix, 0.0, 1.0, "API cost per 1M output tokens", "USD per 1M output tokens"),
                      sticker, u_star, b_vol,
                      factor_rows(setup, factors, u_star, b_vol.get("requests_per_month") is not None),
                      verdict, notes, decision, head, per_row, second, verdict_conditions(factors))


def _caveats(estimate: bool) -> list[str]:
    """The note on a goodput that is only an estimate (a bought bill the verdict uses prices the per-token ledgers and
    break-even too: ``self_host_month.priced_as_bought``)."""
    return (["goodput is an estimate (lower bound from percentiles or scaled from a sample): self-hosted costs are "
             "upper bounds"] if estimate else [])


def _inputs_dict(setup: SelfHostSetup, packing: Any, util_how: str, people_source: str, primary: ApiPrice,
                 mix: ApiMix, per_request: tuple[float, float]) -> dict[str, Any]:
    """The report's ``inputs``: the GPU row (a mix of rows: each, and its USD per billed GPU-hour), utilization,
    people, the API row and mix, and (API, self-hosted) USD per request."""
    return {**gpu_inputs(setup.gpu, packing), "num_gpus": setup.num_gpus,
            "utilization": setup.utilization, "utilization_how": util_how, "max_utilization": setup.max_utilization,
            "engineer_months_per_month": setup.engineer_months_per_month,
            "engineer_usd_per_month": setup.engineer_usd_per_month, "people_source": people_source,
            "api_price": primary.key, "api_price_as_of": primary.as_of, "api_price_confidence": primary.confidence,
            "api_mix": asdict(mix), **replica_usd(setup),
            "people_usd_per_month": people_usd_per_month(setup), "api_usd_per_request": per_request[0],
            "self_host_usd_per_request": per_request[1], "hours_per_month": HOURS_PER_MONTH}


def _secondary(decision: Any, util: float, util_how: str, sh_req: float, api_req: float,
               cap: Capacity) -> tuple[str, float]:
    """(the per-request line, the self-hosted USD per good request it states): at a volume, its own bill per good
    request (``decision_notes.volume_good_requests``: the whole bill, idle GPUs of part-filled instances included, as
    in the per-token ledgers); else ``sh_req``, the unit ledgers'. The report's ``inputs`` carry the same figure, so
    the text and ``--json`` cannot part."""
    if decision is not None and decision.volume.requests > 0:
        good, per = volume_good_requests(decision.volume.requests, cap)
        if good > 0:
            per_good = decision.self_host_usd / good
            return secondary_line(util, util_how, per_good, api_req, per), per_good
    return secondary_line(util, util_how, sh_req, api_req), sh_req
