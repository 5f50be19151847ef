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
output tokens, ``capacity_basis``). The inputs are checked and made a request by ``cost_boundary``, which
``kvledger.cost`` uses too, and priced by ``analyses.serving.cost_compute``: this module parses, writes and prints.
"""

from __future__ import annotations

import inspect
from functools import cache
from pathlib import Path
from typing import NoReturn, get_args

import typer

from kvledger import strict_json
from kvledger.cli import sim_opts as so
from kvledger.cli.broken_pipe import will_end_with
from kvledger.cli.cost_boundary import CostArgs, check_choice, cost_outcome, cost_request
from kvledger.cli.cost_flags import CostBillFlags, CostFlags, CostMoreFlags
from kvledger.cli.dp_flags import SIM_DP, SimDataParallelFlags, refuse_dp_on_files
from kvledger.cli.flag_groups import EngineFlags, WorkloadFlags, with_groups
from kvledger.errors import NoAnswerError

__all__ = ["register", "flag_names"]


@with_groups(prices=CostFlags, bill=CostBillFlags, more=CostMoreFlags, workload=so.SIM_WORKLOAD, engine=so.SIM_ENGINE,
             dp=SIM_DP)
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
    engine: EngineFlags = EngineFlags(), dp: SimDataParallelFlags = SimDataParallelFlags(),  # DP ranks: dp_flags.py
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
    if files:
        refuse_dp_on_files(dp)
    args = CostArgs(files, simulate, prices, bill, more, workload, engine, ctx.params, flag_names(), dp)
    check_choice(args)  # --seeds and the source, then the outputs, then the rest (cost_boundary)
    _check_outputs(files, simulate, more, (workload, engine))
    try:
        out = cost_outcome(cost_request(args))
    except NoAnswerError as err:
        if err.payload is None or "no_answer" not in err.payload:  # the capacity search's own: the common handler
            raise
        _no_answer(err.payload, more)
    if not _wrote_json(out.document, more):
        from kvledger.report.cost_view import print_cost_report

        print_cost_report(out.report, out.basis, out.sim, out.capacity)


def _check_outputs(files: list[Path] | None, simulate: str | None, more: CostMoreFlags, groups: tuple) -> None:
    """--force only with --out; --out writable and none of the inputs (the other checks: ``cost_boundary``)."""
    from kvledger.cli.outputs import refuse_lone_force

    refuse_lone_force(more.force, {"--out": more.out})
    if more.out is not None:
        from kvledger.cli.outputs import paths_in, prepare_json_out

        inputs = [*(files or []), *paths_in(simulate, *groups)]
        prepare_json_out(more.out, "cost's report", force=more.force, inputs=inputs)


def _wrote_json(d: dict, more: CostMoreFlags) -> bool:
    """Write ``d`` as strict JSON to --out (where given) and to stdout with --json; whether --json took stdout."""
    text = strict_json.dumps(d) + "\n"
    if more.out is not None:
        from kvledger.strict_json import write_text_atomic

        write_text_atomic(more.out, text)
    if more.json_out:
        typer.echo(text, nl=False)
    return bool(more.json_out)


def _no_answer(d: dict, more: CostMoreFlags) -> NoReturn:
    """Where the cost cannot be answered (no request, or as few as none, met the SLO: ``cost_unbounded``), what it
    can say — its JSON with --json and in --out — then exit 1."""
    will_end_with(1)  # kept by a reader that stops reading (`| head -1`)
    if not _wrote_json(d, more):
        from kvledger.report.decision_view import print_no_answer

        print_no_answer(d)
    raise typer.Exit(1) from None


@cache
def flag_names() -> dict[str, str]:
    """Each parameter of the command → the flag its errors name (click's first spelling, up to a ``/``; FILE(s) by its
    name), read once from the command's signature, for the command and for ``kvledger.cost``."""
    out = {}
    for name, prm in inspect.signature(cost_command).parameters.items():
        info = next((m for m in get_args(prm.annotation)[1:] if hasattr(m, "param_decls")), prm.default)
        # inside Annotated, typer reads a text default as the first spelling (typer.Option("--model", ...))
        first = [info.default] if isinstance(getattr(info, "default", None), str) else []
        decls = [*first, *(getattr(info, "param_decls", None) or ())]
        if name != "ctx":
            bare = name if _is_argument(info) else "--" + name.replace("_", "-")
            out[name] = decls[0].split("/")[0] if decls else bare
    return out


def _is_argument(info: object) -> bool:
    from typer.models import ArgumentInfo

    return isinstance(info, ArgumentInfo)


def register(app: typer.Typer) -> None:
    """Add the ``cost`` command to ``app``."""
    app.command("cost")(cost_command)
