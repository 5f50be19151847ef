"""``kvledger cost FILE|--simulate MODEL --slo ... --api MODEL --utilization U``: the itemised self-host-versus-API ledger and break-even.

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

from pathlib import Path
from typing import Any

import typer

from kvledger import strict_json
from kvledger.cli import sim_opts as so
from kvledger.cli.flag_groups import EngineFlags, GroupUse, PricingFlags, WorkloadFlags, with_groups
from kvledger.report.progress import working

__all__ = ["register"]

#: cost takes every pricing flag; the utilization is required (the ledger is priced at it).
PRICING = GroupUse(PricingFlags, help={
    "utilization": "Average load ÷ the capacity priced (see Capacity above) over the billed hours, (0, 1] (required)."})


def _collect(problems: list[Exception], fn: Any) -> Any:
    from kvledger.errors import KvLedgerError

    try:
        return fn()
    except KvLedgerError as err:
        problems.append(err)
        return None


def _check_inputs(p: dict[str, Any], gpu_known: str | None, flags: dict[str, str] | None = None) -> tuple[Any, Any, Any]:
    """(API price row, GPU rate or None when the GPU is named only by the run, SLO) — every input error at once.

    Checks that --slo, --api and --utilization are given, then --slo, every numeric option's range
    (``kvledger.cli.limits``), the --api row and, when ``gpu_known``, its price row, and raises them together (one
    error alone keeps its type).
    """
    from kvledger.analyses.serving.cost_run import gpu_rate
    from kvledger.catalog.prices import find_api_price
    from kvledger.cli.limits import range_problems
    from kvledger.errors import InputError
    from kvledger.ledgers.slo import parse_slo

    missing = [flag for flag, key in (("--slo", "slo"), ("--api", "api"), ("--utilization", "utilization")) if p[key] is None]
    problems: list[Exception] = []
    if missing:
        problems.append(InputError(f"missing {', '.join(missing)}: cost needs the SLO (e.g. --slo ttft=200ms,tpot=50ms), the API "
                                   "price row (e.g. --api OpenAI:gpt-4.1; kvledger prices lists them) and the utilization "
                                   "(e.g. --utilization 0.5)"))
    slo = _collect(problems, lambda: parse_slo(p["slo"])) if p["slo"] is not None else None
    problems += list(range_problems("cost", p, flags))
    usd = p["gpu_usd_per_hour"]
    api = _collect(problems, lambda: find_api_price(p["api"])) if p["api"] is not None else None
    rate = None
    if usd is None and gpu_known is not None:
        rate = _collect(problems, lambda: gpu_rate(gpu_known, p["gpu_provider"], p["instance"], None))
    if len(problems) == 1:
        raise problems[0]
    if problems:
        raise InputError(f"{len(problems)} problems with the inputs:\n" + "\n".join(f"  - {e}" for e in problems))
    return api, rate, slo


def _sim_source(model: str, gpu: str | None, groups: tuple[WorkloadFlags, EngineFlags], params: dict[str, Any],
                target: float | None) -> Any:
    """The CostSource of ``--simulate`` (FILE-only flags refused; 2,000 requests per probe of the capacity search
    unless --num-requests, the whole workload with --at-offered-load)."""
    from kvledger.analyses.serving.cost_request import CostSource
    from kvledger.analyses.serving.sim_boundary import PROBE_NUM_REQUESTS
    from kvledger.cli.sim_opts import sim_request
    from kvledger.errors import InputError

    file_only = (("num_gpus", "--num-gpus"), ("run_index", "--run"), ("format", "--format"),
                 ("served_model", "--model"))
    given = [flag for name, flag in file_only if params.get(name) is not None]
    if given:
        raise InputError(f"{', '.join(given)} apply to a FILE; with --simulate the GPU count is replicas × TP "
                         "(--replicas, --tp)")
    at_offered_load = bool(params.get("at_offered_load"))
    if at_offered_load and target is not None:
        raise InputError("--target sets the attainment target of the capacity search, which --at-offered-load skips; "
                         "give one of them")
    args, synthetic = sim_request(model, gpu, *groups,
                                  num_requests_default=None if at_offered_load else PROBE_NUM_REQUESTS)
    return CostSource(simulation=args, synthetic=synthetic, at_offered_load=at_offered_load, target=target)


def register(app: typer.Typer) -> None:
    """Add the ``cost`` command to ``app``."""

    @app.command("cost")
    @with_groups(pricing=PRICING, workload=so.SIM_WORKLOAD, engine=so.SIM_ENGINE)
    def cost_command(
        ctx: typer.Context,
        files: list[Path] | None = typer.Argument(None, help="benchmark output(s) or kvledger records file (kvledger simulate --out DIR writes DIR/records.parquet); several runs (a rate sweep) are priced at the run at their SLO capacity; or use --simulate", show_default=False),
        slo: str | None = typer.Option(None, "--slo", help="SLOs with units, e.g. 'ttft=200ms,tpot=50ms' (required)", show_default=False),
        api: str | None = typer.Option(None, "--api", help="API price row: MODEL or PROVIDER:MODEL, e.g. 'OpenAI:gpt-4.1' (required; kvledger prices lists them)", show_default=False),
        gpu: str | None = typer.Option(None, "--gpu", help="FILE: GPU id or name for the price table, e.g. nvidia_h100_sxm (default: the GPU the file names). --simulate: the GPU to simulate (catalog name such as H100, or a GPU file), priced by its catalog id"),
        pricing: PricingFlags = PricingFlags(),
        num_gpus: int | None = typer.Option(None, "--num-gpus", help="FILE: GPUs serving the measured run (default: as the file states)"),
        served_model: str | None = typer.Option(None, "--model", help="FILE: the served model (bundled name or config.json) for the roofline floor under the prefill share (default: the model the file names)", show_default=False),
        prefill_share: float | None = typer.Option(None, "--prefill-share", help="share of GPU time charged to input tokens (default: --simulate, each step split by the step-cost model's terms; FILE, Σ TTFT ÷ Σ E2E raised to the prompts' roofline FLOP floor)"),
        monthly_requests: float | None = typer.Option(None, "--monthly-requests", help="volume: good requests per month"),
        monthly_input_tokens: float | None = typer.Option(None, "--monthly-input-tokens", help="volume: input tokens per month (with --monthly-output-tokens)"),
        monthly_output_tokens: float | None = typer.Option(None, "--monthly-output-tokens", help="volume: output tokens per month"),
        data_sovereignty: str = typer.Option("not_required", "--data-sovereignty", help="required, preferred or not_required"),
        model_control: str = typer.Option("any", "--model-control", help="custom_weights, open_weights or any"),
        team_capability: str = typer.Option("some", "--team-capability", help="experienced, some or none"),
        run_index: int | None = typer.Option(None, "--run", help="FILE: which run of a multi-run file or of several FILEs (0-based; default: the run at the sweep's SLO capacity)"),
        format: str | None = typer.Option(None, "--format", help="FILE: force a reader instead of auto-detection"),
        at_offered_load: bool = typer.Option(False, "--at-offered-load", help="[--simulate] price the simulated run at the workload's own load (the trace's rate, or --rate/--concurrency) instead of at the SLO capacity found by search"),
        target: float | None = typer.Option(None, "--target", help="attainment target of the capacity search (--simulate) or of the sweep's capacity run (several runs): the share of requests within the SLO at the capacity priced (default 0.9)", show_default=False),
        json_out: bool = typer.Option(False, "--json", help="JSON for scripts: line items and totals per 1M input and output tokens"),
        out: Path | None = typer.Option(None, "--out", help="also write the JSON to this file (refuses to overwrite without --force)"),
        force: bool = typer.Option(False, "--force", help="allow --out to overwrite an existing file"),
        simulate: so.Simulate = None,
        workload: WorkloadFlags = WorkloadFlags(),
        engine: EngineFlags = EngineFlags(),
    ) -> None:
        """Self-host vs API: USD per 1M input/output tokens priced by goodput, monthly bills, break-even, deciding factors.

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
        every SLO metric's p90 is at most half its limit — a warning says capacity is likely higher.

        GPU prices: --gpu (or the GPU the file names) is resolved through the GPU catalog's names and
        aliases (H100, nvidia-h100-80gb, nvidia_h100_sxm), then --gpu-provider/--instance pick the row.
        """
        from kvledger.analyses.serving.cost_request import CostPrices, CostRequest, CostSource, run_cost
        from kvledger.cli.sim_opts import reject_sim_flags
        from kvledger.errors import InputError
        from kvledger.ledgers.api_cost import ApiMix
        from kvledger.ledgers.cost_summary import DecisionFactors, MonthlyVolume
        from kvledger.report.cost_view import print_cost_report

        file = files[0] if files else None
        if (file is None) == (simulate is None):
            raise InputError("give either FILE(s) to read or --simulate MODEL (with --gpu) to simulate, not " + ("both" if file else "neither"))
        if out is not None:
            from kvledger.cli.outputs import prepare_output_file

            prepare_output_file(out, force=force, inputs=list(files or []))
        if file is not None:
            reject_sim_flags(workload, engine)
            if at_offered_load:
                raise InputError("--at-offered-load apply to --simulate (a measured FILE cannot be re-run at another load)")
        api_price, gpu_rate, the_slo = _check_inputs(ctx.params, gpu, {prm.name: prm.opts[0] for prm in ctx.command.params})
        if file is not None:
            source = CostSource(tuple(files), format, run_index, num_gpus, target=target)
        else:
            source = _sim_source(simulate, gpu, (workload, engine), ctx.params, target)
        volume = None
        if monthly_requests is not None or monthly_input_tokens is not None or monthly_output_tokens is not None:
            volume = MonthlyVolume(monthly_requests, monthly_input_tokens, monthly_output_tokens)
        p = pricing
        prices = CostPrices(gpu, gpu_rate, p.gpu_provider, p.instance, p.gpu_usd_per_hour, p.utilization,
                            p.max_utilization, p.engineer_months, p.engineer_usd, prefill_share, api_price,
                            ApiMix(p.batch_share, p.cache_hit_rate, p.cache_write_rate),
                            DecisionFactors(data_sovereignty, model_control, team_capability), volume, served_model)
        res = run_cost(CostRequest(source, the_slo, prices), working)
        text = strict_json.dumps(res.payload) + "\n"
        if out is not None:
            from kvledger.strict_json import write_text_atomic

            write_text_atomic(out, text)
        if json_out:
            typer.echo(text, nl=False)
        else:
            print_cost_report(res.report, res.basis, res.sim, res.capacity)
