"""The computation of ``kvledger cost``, from its flag groups to the priced ledger that ``--json`` prints, with no typer
context, printing or exit: the command (``cost_cmd``) and the Python API (``kvledger.cost``) both call
:func:`compute_cost`, so the two cannot differ."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvledger.cli import bill_opts as bo
from kvledger.cli.cost_flags import CostBillFlags, CostFlags, CostMoreFlags
from kvledger.cli.cost_inputs import check_inputs, check_seeds, file_run, gpu_rate_for, seed_costs, sim_run
from kvledger.cli.flag_groups import EngineFlags, WorkloadFlags

__all__ = ["CostRequest", "CostOutcome", "compute_cost", "check_source_choice", "request_of"]


@dataclass(frozen=True)
class CostRequest:
    """What ``kvledger cost`` is asked: the FILE(s) or the model to simulate, the flag groups, every parameter by its
    name (``params``: the ranges, the bill and the volume read them) and each parameter's flag (``flags``: what an
    error names)."""

    files: list[Path] | None
    simulate: str | None
    prices: CostFlags
    bill: CostBillFlags
    more: CostMoreFlags
    workload: WorkloadFlags
    engine: EngineFlags
    params: dict[str, Any]
    flags: dict[str, str]


@dataclass(frozen=True)
class CostOutcome:
    """The priced ledger: ``document`` is ``cost --json``'s; ``report``, ``basis``, ``sim`` and ``capacity`` are what
    the tables for people are printed from (``report.cost_view.print_cost_report``)."""

    document: dict[str, Any]
    report: Any
    basis: Any
    sim: Any
    capacity: Any


def request_of(files: list[Path] | None, simulate: str | None, values: dict[str, Any],
               flags: dict[str, str]) -> CostRequest:
    """The request from every given value by its field name (the groups' fields; the others keep their defaults)."""
    groups = [cls(**{f.name: values[f.name] for f in dataclasses.fields(cls) if f.name in values})
              for cls in (CostFlags, CostBillFlags, CostMoreFlags, WorkloadFlags, EngineFlags)]
    params: dict[str, Any] = {"files": files}  # in the command's order: FILE(s), the cost groups, --simulate, the rest
    for i, g in enumerate(groups):
        if i == 3:
            params["simulate"] = simulate
        params.update({f.name: getattr(g, f.name) for f in dataclasses.fields(g)})
    return CostRequest(files, simulate, *groups, params, flags)


def check_source_choice(file: Path | None, simulate: str | None) -> None:
    """FILE(s) or --simulate, not both nor neither."""
    from kvledger.errors import InputError

    if (file is None) == (simulate is None):
        raise InputError(
            "give either FILE(s) to read or --simulate MODEL (with --gpu) to simulate, not "
            + ("both" if file else "neither")
        )


def _check_request(r: CostRequest) -> None:
    """The checks before any work: --seeds, the source, no simulation flag with a FILE, the inputs' values."""
    from kvledger.cli.sim_opts import reject_sim_flags
    from kvledger.errors import InputError

    file = r.files[0] if r.files else None
    if r.more.seeds != 1:  # no capacity search to repeat per seed: refused before any work
        check_seeds(file is not None, r.more.at_offered_load, r.params)
    check_source_choice(file, r.simulate)
    if file is not None:
        reject_sim_flags(r.workload, r.engine)
        if r.more.at_offered_load:
            raise InputError("--at-offered-load apply to --simulate (a measured FILE cannot be re-run at another "
                             "load)")


@dataclass(frozen=True)
class _Priced:
    """What the cost is computed from: the run (records), the SLO, the API row, the GPU's USD per GPU-hour, the GPUs
    serving the run and their catalog id, and for a simulation its result and capacity search (None for a FILE),
    for several FILEs the sweep."""

    run: Any
    slo: Any
    api_price: Any
    gpu_rate: Any
    num_gpus: int
    hardware: str
    sim: Any
    capacity: Any
    sweep: Any


def compute_cost(r: CostRequest) -> CostOutcome:
    """The itemised self-host-versus-API ledger of ``r``, every input checked first (all input errors at once).

    Raises:
        InputError, UnknownNameError, FormatError: bad inputs, named by their flags (``r.flags``);
        NoAnswerError: no request, or as few as none, met the SLO — its ``payload`` is the JSON the command prints.
    """
    _check_request(r)
    c, more = r.prices, r.more
    api_price, gpu_rate, the_slo, usd = check_inputs(r.params, c.gpu, r.flags)
    sim = capacity = sweep = None
    if r.files:
        run, n_gpus, hardware, sweep = file_run(r.files, more.format, more.run_index, c.num_gpus, the_slo,
                                                more.target)
    else:
        sim, capacity = sim_run(r.simulate, c.gpu, (r.workload, r.engine), r.params, the_slo)
        run, n_gpus, hardware = sim.run, sim.num_gpus, sim.gpu_id
    if gpu_rate is None:
        # a GPU file simulated is "custom": priced under the --gpu it was given as (its path keys a price list)
        named = c.gpu and (bool(r.files) or hardware == "custom")
        gpu_rate = gpu_rate_for(c.gpu if named else hardware, c.gpu_provider, c.instance, usd)
    priced = _Priced(run, the_slo, api_price, gpu_rate, n_gpus, hardware, sim, capacity, sweep)
    return _price(r, None if r.files else r.simulate, priced)


def _price(r: CostRequest, simulated: str | None, p: _Priced) -> CostOutcome:
    """Price ``p`` (``cost_run.cost_payload``), with ``--seeds N`` each seed's capacity priced the same way
    (``cost_inputs.seed_costs``), and add the KV tiers' notes of a simulation."""
    from kvledger.analyses.serving.cost_run import cost_payload
    from kvledger.analyses.serving.decision_inputs import decision_inputs
    from kvledger.ledgers.api_cost import ApiMix
    from kvledger.ledgers.cost import SelfHostSetup
    from kvledger.ledgers.cost_summary import DecisionFactors

    c, more, params, is_file = r.prices, r.more, r.params, simulated is None
    people = bo.people(params)
    setup = SelfHostSetup(p.gpu_rate, p.num_gpus, c.utilization, people.engineer_months_per_month,
                          people.engineer_usd_per_month,
                          c.prefill_share, c.max_utilization, people.source, kv_tiers=bo.kv_tiers(params))
    model_name = (c.served_model or p.run.metadata.model) if is_file else simulated
    inputs, notes = decision_inputs(model_name, p.api_price, (c.gpu or p.hardware) if is_file else p.hardware, p.sim,
                                    bo.host_bill(params), people, params.get("peak_to_mean") or 1.0)

    def price(run: Any, sim: Any, capacity: Any) -> Any:
        return cost_payload(run, p.slo, setup, None, ApiMix(c.batch_share, c.cache_hit_rate, c.cache_write_rate),
                            DecisionFactors(more.data_sovereignty, more.model_control, more.team_capability),
                            bo.volume(params), sim=sim, capacity=capacity,
                            gpu=c.gpu if is_file and c.gpu else p.hardware, model=c.served_model, inputs=inputs,
                            sweep=p.sweep)

    # what a measured run was, and where each name was read (validate and goodput say it too)
    said = _run_names(p.run.metadata, c, model_name, (c.gpu or p.hardware), p.num_gpus) if is_file else None
    res = _priced_or_no_answer(lambda: price(p.run, p.sim, p.capacity), said)
    res.report.notes.extend(notes)
    rep, d = res.report, res.payload
    if said is not None:
        rep.notes.insert(0, said)
        d["notes"] = [said, *d.get("notes", [])]
    if more.seeds > 1:
        spread = seed_costs(simulated, c.gpu, (r.workload, r.engine), params, p.slo, more.seeds, p.capacity, d,
                            lambda cap: price(cap.priced_run.run, cap.priced_run, cap).payload)
        extra = [spread.text()] + [n for n in (spread.capacity.note, spread.note) if n]
        rep.notes.extend(extra)
        d["notes"] = [*d.get("notes", []), *extra]
        d["seed_spread"] = spread.to_dict()
    if not is_file and setup.kv_tiers is not None and setup.kv_tiers.tiers:
        from kvledger.report.cost_tier_notes import tier_notes

        for tier_note in tier_notes(setup.kv_tiers, p.capacity):
            rep.notes.append(tier_note)
            d["notes"] = [*d.get("notes", []), tier_note]
    return CostOutcome(d, rep, res.basis, p.sim, p.capacity)


def _priced_or_no_answer(price: Any, said: str | None) -> Any:
    """``price()``; a NoAnswerError saying what it can (``cost_unbounded``) raised again with ``said`` leading its
    payload's notes."""
    from kvledger.errors import NoAnswerError

    try:
        return price()
    except NoAnswerError as err:
        if err.payload is not None and said is not None:
            err.payload["notes"] = [said, *err.payload["notes"]]
        raise


def _run_names(md: Any, c: CostFlags, model: str | None, gpu: str | None, num_gpus: int) -> str:
    """``priced run: model M (where it was read), GPU G (where), N GPUs (where)`` of a measured file: a flag, or the
    run's record (SGLang's server_info: ``extra["num_gpus_source"]``)."""
    read = next((d for d in md.definitions if d.startswith("model from ")), "from the run's file")
    m_src = "--model" if c.served_model else read.removeprefix("model ")
    g_src = "--gpu" if c.gpu else next((f"from {d.split(' from ', 1)[1]}" for d in md.definitions
                                        if d.startswith("GPU type")), "from the run's file")
    stated = md.extra.get("num_gpus_source") or "the run's file"
    n_src = "--num-gpus" if c.num_gpus is not None else f"from {stated}"
    return (f"priced run: model {model or 'not named'} ({m_src}), GPU {gpu or 'not named'} ({g_src}), "
            f"{num_gpus:,} GPU{'s' if num_gpus != 1 else ''} a replica ({n_src})")
