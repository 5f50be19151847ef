"""``kvledger cost FILE|--simulate MODEL --slo ... --api MODEL --utilization U``: the itemised self-host-versus-API
ledger and break-even.

FILE is a benchmark output or a kvledger records file (what ``kvledger simulate --out``
writes); ``--simulate MODEL --gpu GPU`` runs the simulator instead, with ``kvledger
simulate``'s workload and engine flags (``kvledger.analyses.serving.sim_ledgers``), and prices the
simulated GPU by its catalog id. The self-hosted capacity is the SLO capacity found by a
request-rate search (``kvledger.analyses.serving.sim_capacity``) for a simulation, or the measured
goodput of a FILE, checked for under-load (``kvledger.ledgers.capacity_basis``); GPU and API
prices come from the bundled price tables (or ``--gpu-usd-per-hour``). Tables for people
(``kvledger.report.cost_view``), ``--json`` for scripts (line items, totals per million input and
output tokens, ``capacity_basis``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer

from kvledger import strict_json
from kvledger.cli import bill_opts as bo
from kvledger.cli import sim_opts as so
from kvledger.cli.broken_pipe import will_end_with
from kvledger.cli.cost_flags import CostBillFlags, CostFlags, CostMoreFlags
from kvledger.cli.cost_inputs import check_inputs, check_seeds, file_run, gpu_rate_for, seed_costs, sim_run
from kvledger.cli.dp_flags import DataParallelFlags
from kvledger.cli.flag_groups import EngineFlags, WorkloadFlags, with_groups

__all__ = ["register"]


@with_groups(prices=CostFlags, bill=CostBillFlags, more=CostMoreFlags, workload=so.SIM_WORKLOAD, engine=so.SIM_ENGINE,
             dp=DataParallelFlags)
def cost_command(
    ctx: typer.Context,
    files: list[Path] | None = typer.Argument(None, help="benchmark output(s) or kvledger records file (kvledger "
                                                         "simulate --out DIR writes DIR/records.parquet); several "
                                                         "runs (a rate sweep) are priced at the run at their SLO "
                                                         "capacity; or use --simulate", show_default=False),
    prices: CostFlags = CostFlags(),
    bill: CostBillFlags = CostBillFlags(),
    more: CostMoreFlags = CostMoreFlags(),
    simulate: so.Simulate = None,
    workload: WorkloadFlags = WorkloadFlags(),
    engine: EngineFlags = EngineFlags(), dp: DataParallelFlags = DataParallelFlags(),  # dp: refused (dp_flags.py)
) -> None:
    """Self-host vs API: USD per 1M input/output tokens priced by goodput, monthly bills, break-even, deciding
    factors.

    The run is a FILE (a benchmark output, or the records.parquet `kvledger simulate --out` writes) or a
    simulation: `--simulate MODEL --gpu GPU` with `kvledger simulate`'s workload and engine flags
    (marked [--simulate] below).

    Capacity. The self-hosted cost divides GPU time by the goodput taken as one replica's capacity.
    With --simulate that is the SLO capacity: the request-rate boundary search of `kvledger goodput
    --simulate --target` (2,000 requests per probe unless --num-requests) finds the highest rate at
    which --target (default 0.9) of the requests meet --slo, and the ledger is priced at the goodput of
    the run there; the search is listed among the sources and under "simulation" in --json.
    `--at-offered-load` prices the run at the workload's own load instead (the whole trace unless
    --num-requests): the same ledger as `simulate --out DIR` then `cost DIR/records.parquet`. A FILE cannot
    be re-run, so its measured goodput is taken as the capacity, which the output always states
    ("capacity_basis" in --json); when the run looks under-loaded — it states its rate or concurrency,
    kept pace with it (good req/s ≥ 90% of the offered rate; closed loop ≥ 95% of requests good) and
    every SLO metric's p90 is at most half its limit — a warning says capacity is likely higher, and the
    answer treats it as a lower bound (the self-hosted bill and replicas are upper bounds). A run of which
    no request, or from its percentiles as few as none, met --slo has no cost per good token to give: it
    says the lower bound it can and exits 1.

    API prices: the catalog rows serving the same model, or --api's. Where none serves it and no --api is given: the
    self-hosted ledger alone (bill, replicas, utilization, USD per 1M tokens and per 1k requests), no verdict.

    GPU prices: --gpu (or the GPU the file names) is resolved through the GPU catalog's names and
    aliases (H100, nvidia-h100-80gb, nvidia_h100_sxm), then --gpu-provider/--instance pick the row.
    """
    file = files[0] if files else None
    if more.seeds != 1:  # no capacity search to repeat per seed: refused before any work
        check_seeds(file is not None, more.at_offered_load, ctx.params)
    _check_sources(file, files, simulate, more, (workload, engine))
    api_price, gpu_rate, the_slo, usd = check_inputs(ctx.params, prices.gpu,
                                                      {prm.name: prm.opts[0] for prm in ctx.command.params})
    sim = capacity = sweep = None
    if file is not None:
        run, n_gpus, hardware, sweep = file_run(files, more.format, more.run_index, prices.num_gpus, the_slo,
                                                more.target)
    else:
        sim, capacity = sim_run(simulate, prices.gpu, (workload, engine), ctx.params, the_slo)
        run, n_gpus, hardware = sim.run, sim.num_gpus, sim.gpu_id
    if gpu_rate is None:
        # a GPU file simulated is "custom": priced under the --gpu it was given as (its path keys a price list)
        named = prices.gpu and (file is not None or hardware == "custom")
        gpu_rate = gpu_rate_for(prices.gpu if named else hardware, prices.gpu_provider, prices.instance, usd)
    priced = _Priced(run, the_slo, api_price, gpu_rate, n_gpus, hardware, sim, capacity, sweep)
    _report(ctx.params, prices, more, simulate if file is None else None, priced, (workload, engine))


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


def _check_sources(file: Path | None, files: list[Path] | None, simulate: str | None, more: CostMoreFlags,
                   groups: tuple) -> None:
    """FILE(s) or --simulate, not both nor neither; --out writable; no simulation flag with a FILE."""
    from kvledger.cli.sim_opts import reject_sim_flags
    from kvledger.errors import InputError

    if (file is None) == (simulate is None):
        raise InputError(
            "give either FILE(s) to read or --simulate MODEL (with --gpu) to simulate, not "
            + ("both" if file else "neither")
        )
    from kvledger.cli.outputs import refuse_lone_force

    refuse_lone_force(more.force, {"--out": more.out})
    if more.out is not None:
        from kvledger.cli.outputs import paths_in, prepare_output_file

        prepare_output_file(more.out, force=more.force, inputs=[*(files or []), *paths_in(simulate, *groups)])
    if file is not None:
        reject_sim_flags(*groups)
        if more.at_offered_load:
            raise InputError("--at-offered-load apply to --simulate (a measured FILE cannot be re-run at another "
                             "load)")


def _report(params: dict[str, Any], c: CostFlags, more: CostMoreFlags, simulated: str | None, p: _Priced,
            groups: tuple) -> None:
    """Price ``p`` (``cost_run.cost_payload``), with ``--seeds N`` each seed's capacity priced the same way
    (``cost_inputs.seed_costs``), add the KV tiers' notes of a simulation, write --out, print."""
    from kvledger.analyses.serving.cost_run import cost_payload
    from kvledger.analyses.serving.decision_inputs import decision_inputs
    from kvledger.ledgers.api_cost import ApiMix
    from kvledger.ledgers.cost import SelfHostSetup
    from kvledger.ledgers.cost_summary import DecisionFactors
    from kvledger.report.cost_view import print_cost_report

    is_file = simulated is None
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
    said = _run_names(p.run.metadata, c, model_name, (c.gpu or p.hardware)) if is_file else None
    res = _priced_or_exit(lambda: price(p.run, p.sim, p.capacity), said, more)
    res.report.notes.extend(notes)
    rep, basis, d = res.report, res.basis, res.payload
    if said is not None:
        rep.notes.insert(0, said)
        d["notes"] = [said, *d.get("notes", [])]
    if more.seeds > 1:
        spread = seed_costs(simulated, c.gpu, groups, params, p.slo, more.seeds, p.capacity, d,
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
    if not _wrote_json(d, more):
        print_cost_report(rep, basis, p.sim, p.capacity)


def _wrote_json(d: dict, more: CostMoreFlags) -> bool:
    """Write ``d`` as strict JSON to --out (where given) and to stdout with --json; whether --json took stdout."""
    text = strict_json.dumps(d) + "\n"
    if more.out is not None:
        from kvledger.strict_json import write_text_atomic

        write_text_atomic(more.out, text)
    if more.json_out:
        typer.echo(text, nl=False)
    return bool(more.json_out)


def _priced_or_exit(price: Callable[[], Any], said: str | None, more: CostMoreFlags) -> Any:
    """``price()``; where it cannot answer (a NoAnswerError saying what it can: no request, or as few as none, met
    the SLO, ``cost_unbounded``) that instead — its JSON with --json and in --out, led by ``said`` — then exit 1."""
    from kvledger.errors import NoAnswerError

    try:
        return price()
    except NoAnswerError as err:
        if err.payload is None:
            raise
        d = err.payload
        d["notes"] = [said, *d["notes"]] if said is not None else d["notes"]
        will_end_with(1)  # kept by a reader that stops reading (`| head -1`)
        if not _wrote_json(d, more):
            from kvledger.report.decision_view import print_no_answer

            print_no_answer(d)
        raise typer.Exit(1) from None


def _run_names(md: Any, c: CostFlags, model: str | None, gpu: str | None) -> str:
    """``priced run: model M (where it was read), GPU G (where)`` of a measured file: a flag, or the run's record."""
    read = next((d for d in md.definitions if d.startswith("model from ")), "from the run's file")
    m_src = "--model" if c.served_model else read.removeprefix("model ")
    g_src = "--gpu" if c.gpu else next((f"from {d.split(' from ', 1)[1]}" for d in md.definitions
                                        if d.startswith("GPU type")), "from the run's file")
    return (f"priced run: model {model or 'not named'} ({m_src}), GPU {gpu or 'not named'} ({g_src})")


def register(app: typer.Typer) -> None:
    """Add the ``cost`` command to ``app``."""
    app.command("cost")(cost_command)
