"""The self-hosting side of the cost ledger: GPU $/hour and measured goodput → USD per million input and output tokens.

Conversion (docs/cost.md §5): price by **goodput**, not
throughput (tokens of requests that met the SLO); count **utilization** over the billing
period, not peak (a rented GPU costs the same idle); compare with the API's
**discounted** price (``api_cost``). For one replica of ``num_gpus`` GPUs measured at
goodput g tokens/s, at utilization u of the billed hours:

    GPU-hours per 1M output tokens = num_gpus × 10⁶ / (g_out × 3600 × u) × (1 − prefill_share)
    GPU-hours per 1M input tokens  = num_gpus × 10⁶ / (g_in × 3600 × u) × prefill_share

``prefill_share`` splits GPU time between the two token kinds (``--prefill-share`` overrides):

* a simulated run: Σ prefill-attributed step time ÷ Σ step time, each step split by the
  step-cost model's own terms (``kvledger.accounting.step_split``; the simulator sums it and
  puts it in ``metadata.extra["gpu_time_split"]``): exact for the model simulated;
* a measured file (no step data): the occupancy split, Σ TTFT ÷ Σ E2E over the good requests (mean TTFT ÷ mean E2E
  for aggregates), raised to the roofline floor of the run's prompts (``ledgers/prefill_floor.py``) when the file names
  a model and GPU the catalogs know. Occupancy is measured on the engine that ran (its real prefill speed, prefix-cache
  hits, chunking), where the roofline must assume an efficiency; but it is wall time, not GPU work: with hundreds of
  requests per step a prompt's chunk can take most of a step while its TTFT is a few steps long, and the split then
  understates prefill many times over (a simulated Llama-3.1-8B on H100 serving azure-conv: 0.013 by occupancy against
  0.43 by step attribution). The floor (FLOPs at 70 % of peak) is a bound the prefills cannot beat, so it catches it.

People cost (engineer-months at a stated monthly rate) is a fixed monthly amount for the whole deployment, as the
monthly bill charges it once: with a volume its per-token share is people $/month ÷ the volume's good tokens per month
(its replicas × one replica's at its load), so the ledgers × those tokens add up to the bill; without one, ÷ the good
tokens of the one replica priced at the utilization priced. Likewise, at a volume rented on whole instances, the GPUs
the replicas leave idle are an item of their own (``instances.idle_item``: split as the GPU rental), so the ledgers ×
the volume's tokens add up to the monthly bill; without a volume the one replica priced carries its whole instance's
idle GPUs, as the break-even utilization counts them (as it carries the whole people line). Months are 730 h
(8760/12).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvledger.errors import InputError, NoAnswerError
from kvledger.evidence.aggregate import AggregateRun
from kvledger.ledgers.amounts import people_as_of, unit_noun, units_text, usd_text
from kvledger.ledgers.goodput import GoodputResult
from kvledger.ledgers.instances import GpuRate, Packing, idle_item
from kvledger.ledgers.items import Ledger, LineItem
from kvledger.ledgers.load_share import LoadShare, run_seed
from kvledger.ledgers.month import HOURS_PER_MONTH
from kvledger.ledgers.prefill_floor import PrefillFloor
from kvledger.ledgers.prefill_share import measured_prefill_share
from kvledger.ledgers.sustained_rate import at_attainment
from kvledger.ledgers.tier_items import KvTierBill, tier_items
from kvledger.ranges import check_options
from kvledger.records import RunRecords

__all__ = ["HOURS_PER_MONTH", "GpuRate", "SelfHostSetup", "Capacity", "capacity_from", "self_host_unit_ledgers"]


@dataclass(frozen=True, slots=True)
class SelfHostSetup:
    """What self-hosting costs besides the measurement.

    Attributes:
        gpu: rental price.
        num_gpus: GPUs in the measured deployment (one replica).
        utilization: average offered load ÷ the capacity replicas are sized on (``Capacity.sizing_req_per_s``) over
            the billed hours, in (0, 1]; None = the volume's realized utilization (``build_cost_report`` fills it in).
        engineer_months_per_month: people time spent running the service, engineer-months per month.
        engineer_usd_per_month: fully loaded cost of one engineer-month, USD.
        prefill_share: share of GPU time attributed to prefill (input tokens); None = measured.
        max_utilization: highest average utilization planned per replica when sizing for a volume.
        people_source: where the two people figures came from (``host_bill.people_cost``: user input or the default).
        kv_tiers: KV tiers below HBM bought per GPU, priced as line items riding on the GPU-hours; None = none.
    """

    gpu: GpuRate
    num_gpus: int
    utilization: float | None
    engineer_months_per_month: float = 0.0
    engineer_usd_per_month: float = 0.0
    prefill_share: float | None = None
    max_utilization: float = 0.8
    people_source: str = "user input (--engineer-months-per-month, --engineer-usd-per-month)"
    kv_tiers: KvTierBill | None = None  # host memory / NVMe bought per GPU for the KV tier (ledgers/tier_items.py)
    engine_replicas: int = 1  # engine replicas (TP groups) in the deployment priced as one replica (--replicas N)
    gpu_item: str = "GPU rental"  # the per-token ledgers' GPU item: "bought GPU (…)" where the verdict buys them

    @property
    def gpus_per_engine(self) -> int:
        """One engine replica's GPUs (TP × PP): the deployment unit's ``num_gpus`` ÷ its ``engine_replicas``."""
        return self.num_gpus // max(self.engine_replicas, 1)

    def check(self) -> None:
        """Raises InputError for out-of-range values (GPU count, utilizations, shares, people cost)."""
        names = ("num_gpus", "utilization", "max_utilization", "prefill_share")  # cost's ranges (kvledger.ranges)
        values = {n: getattr(self, n) for n in names}
        flags = {n: n for n in names}
        for field, option in (("engineer_months_per_month", "engineer_months"), ("engineer_usd_per_month",
                                                                               "engineer_usd")):
            values[option], flags[option] = getattr(self, field), field
        check_options("cost", values, flags)
        if self.engineer_months_per_month > 0 and self.engineer_usd_per_month == 0:
            raise InputError("engineer-months given without a cost per engineer-month (--engineer-usd-per-month)")


@dataclass(slots=True)
class Capacity:
    """What one replica delivered in the measurement, per second of run time (good = met the SLO). Replicas are
    sized on ``slo_capacity_req_per_s``, the highest offered req/s at which the target share meets the SLO (a rate
    search), or on ``capacity_bound_req_per_s`` where that bound caps it; a measured file has neither and its goodput
    stands in (conservative). Utilization is offered load ÷ that; a volume's good requests at it are its requests ×
    ``attainment`` (the good share at the boundary; goodput ÷ SLO capacity without one), and good tokens/s at
    utilization u are u × the good rates below — unless ``load`` holds a run at the volume's load per replica
    (``ledgers/load_share.py``): then they are that run's. ``mix_*_tokens``: mean tokens per completed request of the
    run (the workload's mix, which splits a monthly token volume); ``seed``: the run's workload seed, where stated;
    ``lower_bound``: the run was under-loaded (``capacity_basis.check_load``), so its goodput is the offered load, only
    a lower bound on the SLO capacity it stands in for; ``attainment``: the share of the priced run's requests within
    the SLO (None for a measured file), the good share at the rate sized on (goodput ÷ that rate would count the run's
    drain tail as failed requests)."""

    goodput_req_per_s: float
    good_input_tok_per_s: float
    good_output_tok_per_s: float
    throughput_input_tok_per_s: float
    throughput_output_tok_per_s: float
    prefill_share: float
    prefill_share_method: str
    estimate: bool
    prefill_floor: dict[str, Any] | None = None
    slo_capacity_req_per_s: float | None = None
    mix_input_tokens: float | None = None
    mix_output_tokens: float | None = None
    seed: int | None = None
    load: LoadShare | None = None
    lower_bound: bool = False
    attainment: float | None = None
    capacity_bound_req_per_s: float | None = None

    @property
    def workload_input_tokens_mean(self) -> float:  # the workload's mix: all completed requests, else the good ones
        return self.mix_input_tokens if self.mix_output_tokens else self.mean_input_tokens

    @property
    def workload_output_tokens_mean(self) -> float:
        return self.mix_output_tokens if self.mix_output_tokens else self.mean_output_tokens

    def good_tok_per_s(self, kind: str, u: float) -> tuple[float, float, str]:
        """(good ``kind`` tokens per second, × this factor, one replica serves at utilization ``u``; how, × 3600 for an
        hour's): the run at the volume's load (``load``; factor 1), else the capacity run's good rate × ``u``."""
        if self.load is not None:
            tok_s = self.load.tok_per_s(kind)
            return tok_s, 1.0, f"{tok_s:,.1f} good {kind} tok/s in {self.load.words()} × 3600"
        tok_s = self.good_input_tok_per_s if kind == "input" else self.good_output_tok_per_s
        return tok_s, u, f"{tok_s:,.1f} good {kind} tok/s × 3600 × utilization {u:.2f}"

    def good_req_per_s(self, u: float) -> float:
        """Good req/s one replica serves at utilization ``u``: the run at the volume's load (``load``: its rate × its
        share within the SLO), else u × the capacity run's good rate."""
        if self.load is not None:
            return self.load.rate_req_per_s * self.load.attainment
        return u * self.goodput_req_per_s

    @property
    def searched_req_per_s(self) -> float | None:  # the rate a search sized on: the bound where it caps, else the SLO
        return self.capacity_bound_req_per_s or self.slo_capacity_req_per_s  # capacity (None without a search)

    @property
    def sizing_req_per_s(self) -> float:  # offered req/s a replica is sized on: the search's rate, else the goodput
        return self.searched_req_per_s or self.goodput_req_per_s

    @property
    def sizing_words(self) -> str:  # what sizing_req_per_s is, in words with its unit
        if self.capacity_bound_req_per_s:
            return (f"{self.capacity_bound_req_per_s:,.4g} req/s capacity bound (below the "
                    f"{self.slo_capacity_req_per_s:,.4g} req/s SLO capacity found)")
        if self.slo_capacity_req_per_s:
            return f"{self.slo_capacity_req_per_s:,.4g} req/s SLO capacity"
        if self.lower_bound:
            return (f"{self.goodput_req_per_s:,.4g} good req/s (the goodput of an under-loaded run: its offered load, "
                    "only a lower bound on the SLO capacity it stands in for)")
        return f"{self.goodput_req_per_s:,.4g} good req/s (the run's goodput standing in for the SLO capacity)"

    @property
    def mean_input_tokens(self) -> float:
        return self.good_input_tok_per_s / self.goodput_req_per_s

    @property
    def mean_output_tokens(self) -> float:
        return self.good_output_tok_per_s / self.goodput_req_per_s


def capacity_from(run: RunRecords | AggregateRun, gp: GoodputResult, prefill_share: float | None,
                  floor: PrefillFloor | str | None = None, *, slo_capacity_req_per_s: float | None = None,
                  capacity_bound_req_per_s: float | None = None, lower_bound: bool = False) -> Capacity:
    """One replica's measured good token rates and the prefill share (``floor``: the roofline floor under a measured
    run's occupancy split, ``ledgers/prefill_floor.py``, or why there is none); ``slo_capacity_req_per_s``: the offered
    rate a rate search found to be the SLO capacity, ``capacity_bound_req_per_s`` the bound where it caps that (then
    ``run``'s rate; ``Capacity``): the good rates are those a replica fed the rate sized on sustains
    (``ledgers/sustained_rate.py``) — except for multi-turn sessions, closed loops whose probe goodput the analyses
    layer judges itself (``session_spec.steady_goodput``, which keeps a probe's own goodput where too few sessions ran
    to reach a steady state).

    Raises:
        InputError: no completed request, unknown duration, no token counts, or no way to split GPU time.
        NoAnswerError: no good request (the file is valid; ``cost_run.cost_payload`` says how far percentiles bound it).
    """
    if gp.no_request_completed:  # before the duration: its rates are zeros or unknown because nothing completed
        from kvledger.ledgers.notes import nothing_measured

        what = "the simulated run" if gp.simulated else gp.file
        raise InputError(f"{what}: nothing to price: " + nothing_measured(gp.num_requests, gp.num_failed,
                                                                           simulated=gp.simulated))
    if gp.goodput_req_per_s is None:
        raise InputError(f"{gp.file}: goodput per second is unknown (run duration not stated), so no cost per token "
                         f"can be derived")
    if gp.goodput_output_tok_per_s is None:
        raise InputError(f"{gp.file}: the run states no output token counts, so no cost per token can be derived "
                         f"(its goodput is {gp.goodput_req_per_s:,.4g} good req/s)")
    if gp.num_good == 0 or gp.goodput_output_tok_per_s <= 0:
        raise NoAnswerError(f"{gp.file}: no request met the SLO ({gp.slo['text']}): the cost per good token is "
                            "unbounded")
    if not gp.goodput_input_tok_per_s:
        raise InputError(f"{gp.file}: the run states no input token counts, so the input side cannot be priced")
    if prefill_share is None:
        share, how = measured_prefill_share(run, gp, floor)
    else:
        share, how = prefill_share, "given by the user (--prefill-share)"
    done = gp.throughput_req_per_s  # completed req/s: the workload's mix where the run gives its token counts
    mix = (gp.throughput_input_tok_per_s / done, gp.throughput_output_tok_per_s / done) \
        if done and gp.throughput_input_tok_per_s and gp.throughput_output_tok_per_s else (None, None)
    cap = Capacity(gp.goodput_req_per_s, gp.goodput_input_tok_per_s, gp.goodput_output_tok_per_s,
                   gp.throughput_input_tok_per_s or 0.0, gp.throughput_output_tok_per_s or 0.0, share, how,
                   gp.estimate, floor.to_dict() if isinstance(floor, PrefillFloor) else None, slo_capacity_req_per_s,
                   *mix, run_seed(run), None, lower_bound and not slo_capacity_req_per_s,  # (no load): a search's
                   None if slo_capacity_req_per_s is None else gp.attainment, capacity_bound_req_per_s)  # not a bound
    sessions = isinstance(run, RunRecords) and "sessions" in (run.metadata.extra.get("workload") or {})
    return cap if sessions else at_attainment(cap, cap.attainment)  # the rates sustained at the SLO capacity


def _people_item(setup: SelfHostSetup, per_replica: float, share: float, kind: str, replicas: int | None,
                 at: str) -> LineItem | None:
    """People's ``kind`` share per 1M good ``kind`` tokens: ``share`` of the monthly people line over the good tokens it
    is spread on, the volume's (``replicas`` × one replica's ``per_replica`` at its load, ``at``) or, without a volume
    (``replicas`` None), the one replica's priced."""
    if setup.engineer_months_per_month <= 0:
        return None
    tokens, phase, u = per_replica * (replicas or 1), "prefill" if kind == "input" else "decode", unit_noun(
        setup.engine_replicas)  # --replicas N: a deployment unit of N engine replicas
    over = (f"the volume's {tokens:,.0f} good {kind} tokens/month ({units_text(replicas, setup.engine_replicas)} × "
            f"{per_replica:,.0f}, one {u}'s {at})" if replicas else
            f"the one {u} priced: its {tokens:,.0f} good {kind} tokens/month {at} (no volume given)")
    return LineItem(f"people, {kind} share", "engineer-month", setup.engineer_months_per_month * 1e6 / tokens * share,
                    setup.engineer_usd_per_month, setup.people_source, people_as_of(setup.people_source),
                    f"{setup.engineer_months_per_month:g} engineer-months/month (the deployment's, charged once a "
                    f"month as in the monthly bill) over {over}, × {phase} share {share:.3f} (the GPU time's split)")


def self_host_unit_ledgers(cap: Capacity, setup: SelfHostSetup, *, utilization: float | None = None,
                           replicas: int | None = None, packing: Packing | None = None,
                           split: dict[str, tuple[float, float]] | None = None) -> tuple[Ledger, Ledger]:
    """(USD per 1M input tokens, USD per 1M output tokens) ledgers at ``utilization`` (default the setup's);
    ``replicas``: the replicas a monthly volume needs, whose good tokens share the people line (None: no volume, one
    replica); ``packing``: their whole instances (without a volume, one replica's), whose idle GPUs are an item
    (``instances.idle_item``); a mix of instance sizes prices the GPU-hour at its bill ÷ the GPUs it bills.
    ``split``: a volume given as input and output tokens (``volume.split_tokens``): per kind (tokens given, tokens the
    replicas are sized for); each kind's share of the bill is spread over the tokens given (the replicas' good tokens
    × given ÷ sized), so the ledgers × the volume's good tokens still add up to the bill."""
    u = setup.utilization if utilization is None else utilization
    out = []
    usd_gpu_h, src, mix = setup.gpu.usd_per_gpu_hour, setup.gpu.source, ""
    if packing is not None and packing.mixed:  # several instance sizes: their bill ÷ the GPUs billed
        usd_gpu_h, src = packing.usd_per_gpu_hour, packing.rate.source  # the source names the mix
        mix = (f"; at ${usd_gpu_h:,.4g}/GPU-h, the mix's {usd_text(packing.usd_per_hour)}/h ÷ {packing.billed_gpus} "
               f"GPUs billed ({packing.words()})")
    for kind, share in (("input", cap.prefill_share), ("output", 1.0 - cap.prefill_share)):
        phase = "prefill" if kind == "input" else "decode"
        ledger = Ledger(f"self-hosted cost per 1M {kind} tokens", f"USD per 1M {kind} tokens")
        tok_s, k, how = cap.good_tok_per_s(kind, u)
        scaled = ""
        given, sized = split[kind] if split is not None else (1.0, 1.0)  # the user's tokens ÷ those sized for
        if abs(given / sized - 1) > 1e-9:  # the side that does not bind: the bill is spread over the tokens given
            k *= given / sized
            scaled = (f" × {given / sized:.4f}, the volume's {given:,.0f} {kind} tokens ÷ the {sized:,.0f} of the "
                      "requests its replicas are sized for")
        how += scaled
        per_month = tok_s * 3600.0 * k * HOURS_PER_MONTH
        gpu_h = setup.num_gpus * 1e6 / (tok_s * 3600.0 * k) * share
        ledger.add(LineItem(f"{setup.gpu_item}, {phase} share of GPU time", "GPU-hour", gpu_h, usd_gpu_h, src,
                            setup.gpu.as_of, f"{setup.num_gpus} GPU × 10⁶ ÷ ({how}) × {phase} share {share:.3f} "
                            f"({cap.prefill_share_method}){mix}"))
        if (idle := idle_item(packing, gpu_h, phase)) is not None:
            ledger.add(idle)
        for item in tier_items(setup.kv_tiers, gpu_h, f" ({phase} share, as the GPU rental)"):
            ledger.add(item)
        at = (f"in {cap.load.words()}" if cap.load is not None else f"at utilization {u:.2f}") + scaled
        people = _people_item(setup, per_month, share, kind, replicas, at)
        if people is not None:
            ledger.add(people)
        out.append(ledger)
    return out[0], out[1]
