"""The computation of ``kvledger cost``: from a checked :class:`~cost_request.CostRequest` to the priced ledger that
``--json`` prints, with no command line, printing or exit. The command (``cli.cost_cmd``) and the Python API
(``kvledger.cost``) both build the request (``cli.cost_boundary``) and call :func:`compute_cost`, so the two cannot
differ."""

from __future__ import annotations

from contextlib import nullcontext
from dataclasses import dataclass
from typing import Any

from kvledger.analyses.serving.cost_request import CostPrices, CostRequest, FileSource, SimSource
from kvledger.analyses.serving.cost_runs import Working, file_run, seed_costs, sim_run

__all__ = ["CostOutcome", "compute_cost"]


@dataclass(frozen=True)
class CostOutcome:
    """The priced ledger: ``document`` is ``cost --json``'s; ``report``, ``basis``, ``sim`` and ``capacity`` are what
    the tables for people are printed from (``report.cost_view.print_cost_report``); ``kv_tiers``: the KV tiers priced
    (``ledgers.tier_items.KvTierBill``) or None."""

    document: dict[str, Any]
    report: Any
    basis: Any
    sim: Any
    capacity: Any
    kv_tiers: Any


def _quiet(message: str) -> Any:
    return nullcontext()


@dataclass(frozen=True)
class _Priced:
    """What the cost is computed from: the run (records), the API row, the GPU's USD per GPU-hour, the GPUs
    serving the run and their catalog id, and for a simulation its result and capacity search (None for a FILE),
    for several FILEs the sweep."""

    run: Any
    api_price: Any
    gpu_rate: Any
    num_gpus: int
    hardware: str
    sim: Any
    capacity: Any
    sweep: Any


def compute_cost(r: CostRequest, working: Working = _quiet) -> CostOutcome:
    """The itemised self-host-versus-API ledger of ``r`` (its inputs checked by the caller); ``working(message)``
    shows progress while a simulation runs.

    Raises:
        InputError, FormatError: a file that cannot be read, a run that does not state its GPU count;
        NoAnswerError: no request, or as few as none, met the SLO — its ``payload`` is the JSON the command prints.
    """
    c, src = r.prices, r.source
    sim = capacity = sweep = None
    if isinstance(src, FileSource):
        run, n_gpus, hardware, sweep = file_run(src, c.slo, r.target)
    else:
        sim, capacity = sim_run(src, c.slo, r.target, working)
        run, n_gpus, hardware = sim.run, sim.num_gpus, sim.gpu_id
    gpu_rate = c.gpu_rate
    if gpu_rate is None:
        from kvledger.analyses.serving.cost_run import gpu_rate as rate_of

        # a GPU file simulated is "custom": priced under the --gpu it was given as (its path keys a price list)
        named = c.gpu and (isinstance(src, FileSource) or hardware == "custom")
        gpu_rate = rate_of(c.gpu if named else hardware, c.gpu_provider, c.instance, c.usd)
    return _price(r, _Priced(run, c.api_price, gpu_rate, n_gpus, hardware, sim, capacity, sweep), working)


def _price(r: CostRequest, p: _Priced, working: Working) -> CostOutcome:
    """Price ``p`` (``cost_run.cost_payload``), with ``--seeds N`` each seed's capacity priced the same way
    (``cost_runs.seed_costs``)."""
    from kvledger.analyses.serving.cost_run import cost_payload
    from kvledger.analyses.serving.decision_inputs import decision_inputs
    from kvledger.ledgers.api_cost import ApiMix
    from kvledger.ledgers.cost import SelfHostSetup
    from kvledger.ledgers.cost_summary import DecisionFactors

    c, bill, src = r.prices, r.bill, r.source
    is_file = isinstance(src, FileSource)
    people = bill.people(r.team_capability)
    setup = SelfHostSetup(p.gpu_rate, p.num_gpus, c.utilization, people.engineer_months_per_month,
                          people.engineer_usd_per_month,
                          c.prefill_share, c.max_utilization, people.source, kv_tiers=bill.kv_tiers(),
                          engine_replicas=p.sim.replicas if p.sim is not None else 1)  # --replicas: one unit's
    model_name = (src.served_model or p.run.metadata.model) if is_file else src.model
    inputs, notes = decision_inputs(model_name, p.api_price, (c.gpu or p.hardware) if is_file else p.hardware, p.sim,
                                    bill.host_bill(), people, bill.peak_to_mean or 1.0)

    def price(run: Any, sim: Any, capacity: Any) -> Any:
        return cost_payload(run, c.slo, setup, None, ApiMix(c.batch_share, c.cache_hit_rate, c.cache_write_rate),
                            DecisionFactors(r.data_sovereignty, r.model_control, r.team_capability),
                            bill.volume(), sim=sim, capacity=capacity,
                            gpu=c.gpu if is_file and c.gpu else p.hardware,
                            model=src.served_model if is_file else None, inputs=inputs, sweep=p.sweep)

    # what a measured run was, and where each name was read (validate and goodput say it too)
    said = _run_names(p.run.metadata, c, src, model_name, (c.gpu or p.hardware), p.num_gpus) if is_file else None
    res = _priced_or_no_answer(lambda: price(p.run, p.sim, p.capacity), said)
    res.report.notes.extend(notes)
    rep, d = res.report, res.payload
    if said is not None:
        rep.notes.insert(0, said)
        d["notes"] = [said, *d.get("notes", [])]
    if isinstance(src, SimSource) and src.seeds > 1:
        spread = seed_costs(src, c.slo, r.target, working, p.capacity, d,
                            lambda cap: price(cap.priced_run.run, cap.priced_run, cap).payload)
        extra = [spread.text()] + [n for n in (spread.capacity.note, spread.note) if n]
        rep.notes.extend(extra)
        d["notes"] = [*d.get("notes", []), *extra]
        d["seed_spread"] = spread.to_dict()
    return CostOutcome(d, rep, res.basis, p.sim, p.capacity, setup.kv_tiers)


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


def _run_names(md: Any, c: CostPrices, src: FileSource, model: str | None, gpu: str | None, num_gpus: int) -> str:
    """``priced run: model M (where it was read), GPU G (where), N GPUs (where)`` of a measured file: a flag, or the
    run's record (SGLang's server_info: ``extra["num_gpus_source"]``)."""
    read = next((d for d in md.definitions if d.startswith("model from ")), "from the run's file")
    m_src = "--model" if src.served_model else read.removeprefix("model ")
    g_src = "--gpu" if c.gpu else next((f"from {d.split(' from ', 1)[1]}" for d in md.definitions
                                        if d.startswith("GPU type")), "from the run's file")
    stated = md.extra.get("num_gpus_source") or "the run's file"
    n_src = "--num-gpus" if src.num_gpus is not None else f"from {stated}"
    return (f"priced run: model {model or 'not named'} ({m_src}), GPU {gpu or 'not named'} ({g_src}), "
            f"{num_gpus:,} GPU{'s' if num_gpus != 1 else ''} a replica ({n_src})")
