"""The ``kvledger cost`` composition as one API function: a run, its goodput, the GPU and API prices → the cost report
and its JSON.

``kvledger cost`` (``cli/cost_cmd.py``), ``kvledger report`` and ``kvledger ui`` all call :func:`cost_payload`, so
the JSON the command prints and the numbers the report draws are the same objects. GPU rental prices are resolved here
(:func:`gpu_rate`) through the GPU catalog's names and aliases before the price table is read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvledger.errors import InputError, NoAnswerError, UnknownNameError
from kvledger.jsonable import to_jsonable
from kvledger.ledgers.capacity_basis import CapacityBasis

__all__ = ["price_key", "gpu_rate", "cheapest_gpu_row", "capacity_basis", "CostRun", "cost_payload", "SweepCapacity",
           "sweep_capacity_run"]


def price_key(name: str) -> str:
    """A GPU name as the price table keys it: the catalog id when ``get_gpu`` knows the name or alias (H100,
    nvidia-h100-80gb, "NVIDIA H100 80GB HBM3" → nvidia_h100_sxm); otherwise the name as given (the table also
    matches its own GPU names)."""
    from kvledger.catalog.gpus import get_gpu

    try:
        return get_gpu(name).gpu_id
    except UnknownNameError:
        return name


def _is_gpu_file(name: str) -> bool:
    return Path(name).suffix in (".json", ".toml")


def cheapest_gpu_row(name: str, provider: str | None) -> tuple[Any, tuple[Any, ...]]:
    """(the cheapest rental row per GPU-hour for the GPU, of ``provider`` when given, ties by provider and instance;
    the rows it was chosen from) — where ``cost`` and ``report`` start when no row is named; the bill then packs the
    replicas on the cheapest mix of those rows (``kvledger.ledgers.instances.pack``)."""
    from kvledger.catalog.prices import find_gpu_prices

    rows = tuple(find_gpu_prices(price_key(name), provider))
    return min(rows, key=lambda r: (r.usd_per_gpu_hour, r.provider, r.instance_type)), rows


def gpu_rate(name: str | None, provider: str | None, instance: str | None,
             usd: float | Mapping[str, float] | None) -> Any:
    """The GPU's rental price: ``usd`` (``--gpu-usd-per-hour``: one number, or the list's price for ``name``), else
    the price-table row of ``name`` (resolved through the GPU catalog's aliases).

    Raises:
        InputError: no name, a custom GPU without a price, a price list that does not name the GPU.
    Without --instance every row of the GPU (of --gpu-provider when given) is an option: the bill packs the replicas
    on the cheapest mix of them (``kvledger.ledgers.instances.pack``) and says which.
        UnknownNameError: no row for the GPU (or the provider / instance).
    """
    from kvledger.catalog.prices import find_gpu_price
    from kvledger.ledgers.cost import GpuRate

    if usd is not None:
        from kvledger.catalog.given_prices import price_of
        from kvledger.catalog.price_names import check_gpu_provider

        at = check_gpu_provider(provider)  # it labels the user's price (an unknown one refused as without the price)
        price, source = price_of(usd, name, at)
        given = GpuRate.given(price, f"{name or 'GPU'}{f' at {at}' if at else ''}", source)
        return _on_provider_rows(given, name, at, instance) if at and name else given
    if name is None:
        raise InputError("no GPU price: the run does not name its GPU; pass --gpu (e.g. H100 or nvidia_h100_sxm) with "
                         "--gpu-provider, or --gpu-usd-per-hour")
    if name == "custom" or _is_gpu_file(name):
        raise InputError(f"the GPU {name!r} is a custom GPU with no rental price in the table; pass --gpu-usd-per-hour")
    if instance is None:  # several rows (of the provider, or of all): the bill packs on the cheapest, stated
        row, rows = cheapest_gpu_row(name, provider)
        return GpuRate.from_catalog(row, rows)
    return GpuRate.from_catalog(find_gpu_price(price_key(name), provider, instance))


def _on_provider_rows(given: Any, name: str, provider: str, instance: str | None) -> Any:
    """The user's price (``given``) on the instances ``provider`` sells the GPU in: its rows (``--instance``'s alone
    where given) keep their shape — GPUs per instance, whether a one-GPU row rents several per replica — at the
    price given per GPU-hour, so a TP-4 replica on a provider that sells 8-GPU instances is billed the whole instance
    as its catalog price would be; ``given`` as it is where the table has no row of the GPU at the provider."""
    from dataclasses import replace

    from kvledger.catalog.prices import find_gpu_price
    from kvledger.ledgers.instances import GpuRate

    try:
        row, rows = ((find_gpu_price(price_key(name), provider, instance), ()) if instance is not None
                     else cheapest_gpu_row(name, provider))
    except (InputError, UnknownNameError):
        return given

    def mine(r: Any) -> Any:
        return replace(r, usd_per_gpu_hour=given.usd_per_gpu_hour, confidence=given.confidence, as_of=given.as_of,
                       label=f"{given.label} ({r.instance_type}, your price)",
                       source=f"{given.source}; billed in {r.row_key}'s instances of {r.gpus_per_instance} GPU"
                              f"{'' if r.gpus_per_instance == 1 else 's'} (gpu_prices.csv)")

    rate = GpuRate.from_catalog(row, rows)
    return replace(mine(rate), options=tuple(mine(o) for o in rate.options))


def capacity_basis(run: Any, gp: Any, slo: Any, sim: Any, capacity: Any) -> CapacityBasis:
    """The ``capacity_basis`` of the report: the SLO-capacity search, or the run's own goodput with the load checks
    (a simulated run that ``simulate`` reads as kept up is not called fallen behind: ``sim_report.kept_up``)."""
    from kvledger.analyses.serving.sim_report import kept_up
    from kvledger.ledgers.capacity_basis import check_load, measured_basis

    if capacity is not None:
        return CapacityBasis("slo_capacity", capacity.text(), notes=list(capacity.notes), probes=capacity.probes_text())
    kept = sim is not None and kept_up(sim.setup, sim.result)
    return measured_basis(gp, check_load(run, gp, slo, kept_up=kept), simulated=sim is not None, run=run)


@dataclass
class CostRun:
    """The cost report of one run, its capacity basis and the JSON ``kvledger cost --json`` prints (``payload``)."""

    report: Any
    basis: CapacityBasis
    payload: dict[str, Any]
    sim: Any = None  # the SimulatedRun priced, when simulated
    capacity: Any = None  # its SimCapacity, when found by search


def cost_payload(run: Any, slo: Any, setup: Any, api_price: Any, mix: Any, factors: Any, volume: Any = None, *,
                 sim: Any = None, capacity: Any = None, gpu: str | None = None, model: str | None = None,
                 inputs: Any = None, sweep: SweepCapacity | None = None, gp: Any = None) -> CostRun:
    """Goodput of ``run`` under ``slo``, the itemised self-host and API ledgers, and the JSON of ``kvledger cost``.

    Args:
        run: the records (measured, or ``SimulatedRun.run``); ``setup``: GPU rate, GPU count, utilization, people;
        api_price / mix / factors / volume: as ``kvledger.ledgers.cost_summary.build_cost_report`` takes them;
        sim / capacity: the SimulatedRun and SimCapacity when the run is simulated (added under ``"simulation"``);
        gpu / model: a measured run's GPU and model names for the roofline floor under its prefill share (default: the
        names the file gives); inputs: the decision's DecisionInputs (API rows, bought GPUs, people source, what it
        rests on; ``kvledger.analyses.serving.decision_inputs``); sweep: when ``run`` is the run of a sweep at its SLO
        capacity (``sweep_capacity_run``), the choice, stated in the capacity basis (its ``sweep`` and ahead of its
        text); gp: the goodput to price at (default: ``run``'s under ``slo``).

    A run priced at its own goodput that looks under-loaded is priced as a lower bound on the capacity (the answer
    says so: ``cost_summary.build_cost_report``), and a capacity warning leads the JSON's notes.

    Raises:
        NoAnswerError: no request met the SLO, or only the lower bound of an estimate is 0: the cost per good token
            then has no upper bound (``cost_unbounded``: what can be said, priced at the upper bound).
    """
    from kvledger.analyses.serving.capacity_bands import band_inputs
    from kvledger.analyses.serving.sweep_bracket import bracketed
    from kvledger.ledgers.goodput import goodput

    gp = goodput(run, slo) if gp is None else gp
    basis = capacity_basis(run, gp, slo, sim, capacity)
    if gp.num_good == 0 and gp.num_completed and gp.goodput_req_per_s is not None:
        from kvledger.analyses.serving.cost_unbounded import no_good_requests

        hi = gp.at_upper_bound()
        best = None if hi is None else cost_payload(run, slo, setup, api_price, mix, factors, volume, sim=sim,
                                                   capacity=capacity, gpu=gpu, model=model, inputs=inputs,
                                                   sweep=sweep, gp=hi)
        raise no_good_requests(gp, best, basis)
    lower, inputs = bracketed(basis, sweep, inputs)  # under-loaded, unless the sweep's next run brackets it
    floor = None
    if sim is None and setup.prefill_share is None and "gpu_time_split" not in run.metadata.extra:
        from kvledger.ledgers.prefill_floor import prefill_floor

        got, why = prefill_floor(run, model or run.metadata.model, gpu or run.metadata.hardware, setup.num_gpus)
        floor = got or why
    sized = _searched(capacity)
    inputs = band_inputs(_with_mix_caveats(inputs, mix, sim), getattr(capacity, "error_band", None))  # the band shown
    build = _builder(api_price, mix, factors, inputs)
    rep = build(run, gp, setup, volume, floor, inputs, **sized, lower_bound=lower)
    if setup.utilization is None:  # priced at the volume's realized load: the good share of a run at that load
        from kvledger.analyses.serving.load_run import load_share_for

        load = load_share_for(capacity, rep.decision if rep.decision is not None else getattr(rep, "month", None))
        if load is not None:
            rep = build(run, gp, setup, volume, floor, inputs, **sized, load=load,
                        lower_bound=lower)
    if (inputs is not None or api_price is not None) and mix is not None:  # a comparison with an API: its mix said
        from kvledger.analyses.serving.mix_notes import mix_notes

        rep.notes.extend(n for n in mix_notes(mix, sim) if n not in rep.notes)
        _no_batch_api(rep, mix)
    return CostRun(rep, basis, _payload(rep, basis, sim, capacity, sweep))


def _searched(capacity: Any) -> dict[str, Any]:
    """The capacity search's rates for the ledger (``cost.capacity_from``): the SLO capacity found and the bound where
    it caps that (the rate then sized on); none without a search."""
    return {} if capacity is None else {"slo_capacity_req_per_s": capacity.rate_req_per_s,
                                        "capacity_bound_req_per_s": capacity.binding_bound}


def _no_batch_api(rep: Any, mix: Any) -> None:
    """Drop the batch share's note and caveat from ``rep`` when its API row has no batch API (billed on demand)."""
    from kvledger.analyses.serving.mix_notes import drop_batch_words

    d = getattr(rep, "decision", None)
    if d is not None and d.primary.price.batch_discount is None:
        rep.notes[:], d.rests_on[:] = drop_batch_words(rep.notes, mix), drop_batch_words(d.rests_on, mix)


def _with_mix_caveats(inputs: Any, mix: Any, sim: Any) -> Any:
    """``inputs`` with the API mix's caveats added to what the verdict rests on (``mix_notes.mix_caveats``: what the
    mix assumes that the self-hosted run does not)."""
    if inputs is None or mix is None:
        return inputs
    from dataclasses import replace

    from kvledger.analyses.serving.mix_notes import mix_caveats

    return replace(inputs, rests_on=(*inputs.rests_on, *mix_caveats(mix, sim)))


def _builder(api_price: Any, mix: Any, factors: Any, inputs: Any) -> Any:
    """The report builder: the self-hosted ledger alone (``ledgers.self_host_only``) when no API row was named and
    none serves the model (``inputs.api_rows`` empty), else the comparison (``cost_summary.build_cost_report``)."""
    if api_price is None and inputs is not None and not inputs.api_rows:
        from kvledger.ledgers.self_host_only import build_self_host_report

        return build_self_host_report
    from kvledger.ledgers.cost_summary import build_cost_report

    def build(run: Any, gp: Any, setup: Any, volume: Any, floor: Any, inputs: Any, **kw: Any) -> Any:
        return build_cost_report(run, gp, setup, api_price, mix, factors, volume, floor, inputs, **kw)

    return build


def _payload(rep: Any, basis: CapacityBasis, sim: Any, capacity: Any, sweep: SweepCapacity | None) -> dict[str, Any]:
    """``cost --json``: the report, its capacity basis (a warning of it also leads the notes: in the text it opens the
    answer, under-loaded, and closes the report), a simulation's provenance, search and error band."""
    if sweep is not None:
        basis.sweep, basis.text = to_jsonable(sweep), sweep.text + ". " + basis.text
    d = rep.to_dict()
    if basis.warning:
        d["notes"] = [f"WARNING: {basis.warning}", *d["notes"]]
    d["capacity_basis"] = basis.to_dict()
    if sim is not None:  # no error band on the verdict where there is no verdict (self-hosted ledger alone)
        search = {"capacity_search": capacity.to_dict()} if capacity else {}
        d["simulation"] = {**sim.provenance().to_dict(), **search}
        from kvledger.analyses.serving.capacity_bands import cost_band

        band = None if rep.verdict is None else cost_band(sim.setup, rep, *(
            (capacity.sizing_req_per_s, getattr(capacity, "error_band", None)) if capacity is not None else ()))
        if band is not None:
            d["error_band"], basis.error_band = band.to_dict(), band
    d["seed_spread"] = None  # one seed (or a measured file): null, as simulate writes it; cost --seeds N fills it
    return d


@dataclass(frozen=True, slots=True)
class SweepCapacity:
    """The run of a sweep priced as its SLO capacity: its index, the load axis and value, the choice in words, and the
    boundary search over the sweep (``ledgers.boundary.BoundaryResult``)."""

    run_index: int
    axis: str
    value: float
    text: str
    boundary: Any


def sweep_capacity_run(runs: list[Any], slo: Any, target: float, where: str) -> tuple[Any, SweepCapacity]:
    """The run of a sweep that is its SLO capacity: the highest load (request rate, else concurrency) up to which every
    run has ≥ ``target`` of its requests within the SLO (``ledgers.boundary.boundary_from_sweep``), with the choice.

    Raises:
        InputError: the runs state neither a rate nor a concurrency.
        NoAnswerError: even the lowest load misses the target (no SLO capacity).
    """
    from kvledger.analyses.serving import notes as N
    from kvledger.ledgers.boundary import axis_value, boundary_from_sweep

    axis = None
    for candidate in ("request_rate", "concurrency"):
        try:
            values = [axis_value(r, candidate) for r in runs]
        except InputError:
            continue
        if len(set(values)) == len(values):
            axis = candidate
            break
    labels = [r.metadata.extra.get("run_label") or r.metadata.source for r in runs]
    if axis is None:
        raise InputError(N.sweep_without_load(where, labels))
    res = boundary_from_sweep(runs, slo, target, axis, values)
    attained = [(p.label, p.value, p.attainment) for p in res.points]
    if res.boundary_value is None:
        raise NoAnswerError(N.sweep_misses_target(where, target, attained))  # no capacity: exit 1, as goodput
    k = values.index(res.boundary_value)
    text = N.sweep_capacity(k, labels[k], res.boundary_value, axis, target, attained)
    return runs[k], SweepCapacity(k, axis, res.boundary_value, text, res)
