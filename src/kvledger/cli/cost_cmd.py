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

from pathlib import Path
from typing import Any

import typer

from kvledger import strict_json
from kvledger.cli import bill_opts as bo
from kvledger.cli import sim_opts as so
from kvledger.cli.cost_inputs import check_inputs, check_seeds, file_run, gpu_rate_for, seed_costs, sim_run
from kvledger.cli.flag_groups import EngineFlags, WorkloadFlags, with_groups

__all__ = ["register"]


def register(app: typer.Typer) -> None:
    """Add the ``cost`` command to ``app``."""

    @app.command("cost")
    @with_groups(workload=so.SIM_WORKLOAD, engine=so.SIM_ENGINE)
    def cost_command(
        ctx: typer.Context,
        files: list[Path] | None = typer.Argument(None, help="benchmark output(s) or kvledger records file (kvledger "
                                                             "simulate --out DIR writes DIR/records.parquet); several "
                                                             "runs (a rate sweep) are priced at the run at their SLO "
                                                             "capacity; or use --simulate", show_default=False),
        slo: str | None = typer.Option(None, "--slo", help="SLOs with units, e.g. 'ttft=200ms,tpot=50ms' (required)",
                                       show_default=False),
        api: str | None = typer.Option(None, "--api", help="API price row: MODEL or PROVIDER:MODEL, e.g. "
                                                           "'OpenAI:gpt-4.1' (default: every catalog row serving the "
                                                           "same model; kvledger prices lists them)",
                                                               show_default=False),
        utilization: float | None = typer.Option(None, "--utilization", help="override: average load ÷ the capacity "
                                                                             "priced over the billed hours, (0, 1] "
                                                                             "(default: the volume's realized "
                                                                             "utilization)", show_default=False),
        gpu: str | None = typer.Option(None, "--gpu", help="FILE: GPU id or name for the price table, e.g. "
                                                           "nvidia_h100_sxm (default: the GPU the file names). "
                                                           "--simulate: the GPU to simulate (catalog name such as "
                                                           "H100, or a GPU file), priced by its catalog id"),
        gpu_provider: str | None = typer.Option(None, "--gpu-provider", help="rental provider, e.g. Nebius, AWS, "
                                                                             "CoreWeave"),
        instance: str | None = typer.Option(None, "--instance", help="instance type when a provider lists several"),
        gpu_usd_per_hour: float | None = typer.Option(None, "--gpu-usd-per-hour", help="your own price, USD per "
            "GPU-hour (overrides the table)"),
        num_gpus: int | None = typer.Option(None, "--num-gpus", help="FILE: GPUs serving the measured run (default: as "
                                                                     "the file states)"),
        served_model: str | None = typer.Option(None, "--model", help="FILE: the served model (bundled name or "
                                                                      "config.json) for the roofline floor under the "
                                                                      "prefill share (default: the model the file "
                                                                      "names)", show_default=False),
        max_utilization: float = typer.Option(0.8, "--max-utilization", help="highest average utilization per replica "
                                                                             "when sizing for a monthly volume"),
        prefill_share: float | None = typer.Option(None, "--prefill-share", help="share of GPU time charged to input "
            "tokens (default: --simulate, each step split by the step-cost model's terms; FILE, Σ TTFT ÷ Σ E2E raised "
            "to the prompts' roofline FLOP floor)"),
        batch_share: float = typer.Option(0.0, "--batch-share", help="share of requests sent through the API's batch "
                                                                     "endpoint"),
        cache_hit_rate: float = typer.Option(0.0, "--cache-hit-rate", help="share of API input tokens that are "
                                                                           "prompt-cache reads"),
        cache_write_rate: float = typer.Option(0.0, "--cache-write-rate", help="share of API input tokens written to "
                                                                               "the prompt cache"),
        engineer_months: bo.EngMonths = None, engineer_usd: bo.EngUsd = None, monthly_tokens: bo.MonthlyTokens = None,
        peak_to_mean: bo.PeakToMean = 1.0,
        monthly_requests: bo.MonthlyRequests = None, monthly_input_tokens: bo.MonthlyIn = None,
        monthly_output_tokens: bo.MonthlyOut = None, gpu_capex_usd: bo.GpuCapex = None,
            amortization_months: bo.Amortization = 36.0,
        annual_interest: bo.Interest = 0.0, pue: bo.Pue = 1.3, usd_per_kwh: bo.UsdPerKwh = 0.12,
        hosting_usd_per_gpu_month: bo.Hosting = 0.0, board_power_w: bo.BoardPower = None,
            idle_power_w: bo.IdlePower = None,
        kv_tier_host: bo.TierHost = None, kv_tier_nvme: bo.TierNvme = None,
        host_memory_usd_per_gib_month: bo.HostMemPrice = None, nvme_usd_per_gib_month: bo.NvmePrice = None,
        data_sovereignty: str = typer.Option("not_required", "--data-sovereignty", help="required, preferred or "
            "not_required"),
        model_control: str = typer.Option("any", "--model-control", help="custom_weights, open_weights or any"),
        team_capability: str = typer.Option("some", "--team-capability", help="experienced, some or none"),
        run_index: int | None = typer.Option(None, "--run", help="FILE: which run of a multi-run file or of several "
                                                                 "FILEs (0-based; default: the run at the sweep's SLO "
                                                                 "capacity)"),
        format: str | None = typer.Option(None, "--format", help="FILE: force a reader instead of auto-detection"),
        at_offered_load: bool = typer.Option(False, "--at-offered-load", help="[--simulate] price the simulated run at "
                                                                              "the workload's own load (the trace's "
                                                                              "rate, or --rate/--concurrency) instead "
                                                                              "of at the SLO capacity found by search"),
        target: float | None = typer.Option(None, "--target", help="attainment target of the capacity search "
                                                                   "(--simulate) or of the sweep's capacity run "
                                                                   "(several runs): the share of requests within the "
                                                                   "SLO at the capacity priced (default 0.9)",
                                                                       show_default=False),
        json_out: bool = typer.Option(False, "--json", help="JSON for scripts: line items and totals per 1M input and "
                                                            "output tokens"),
        out: Path | None = typer.Option(None, "--out", help="also write the JSON to this file (refuses to overwrite "
                                                            "without --force)"),
        force: bool = typer.Option(False, "--force", help="allow --out to overwrite an existing file"),
        seeds: int = typer.Option(1, "--seeds", help="[--simulate] search the SLO capacity once per seed, --seed to "
                                                     "--seed+N−1 (1 to 64; about N times the time), each priced by "
                                                     "the same ledger: the cost per 1M tokens' range over them, and "
                                                     "a note when the verdict flips; the ledger shown is the first "
                                                     "seed's"),
        simulate: so.Simulate = None,
        workload: WorkloadFlags = WorkloadFlags(),
        engine: EngineFlags = EngineFlags(),
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
        every SLO metric's p90 is at most half its limit — a warning says capacity is likely higher.

        GPU prices: --gpu (or the GPU the file names) is resolved through the GPU catalog's names and
        aliases (H100, nvidia-h100-80gb, nvidia_h100_sxm), then --gpu-provider/--instance pick the row.
        """
        from kvledger.analyses.serving.cost_run import cost_payload
        from kvledger.analyses.serving.decision_inputs import decision_inputs
        from kvledger.cli.sim_opts import reject_sim_flags
        from kvledger.errors import InputError
        from kvledger.ledgers.api_cost import ApiMix
        from kvledger.ledgers.cost import SelfHostSetup
        from kvledger.ledgers.cost_summary import DecisionFactors
        from kvledger.report.cost_view import print_cost_report

        file = files[0] if files else None
        if (file is None) == (simulate is None):
            raise InputError(
                "give either FILE(s) to read or --simulate MODEL (with --gpu) to simulate, not "
                + ("both" if file else "neither")
            )
        if out is not None:
            from kvledger.cli.outputs import prepare_output_file

            prepare_output_file(out, force=force, inputs=list(files or []))
        if seeds != 1:
            check_seeds(file is not None, at_offered_load, ctx.params)
        if file is not None:
            reject_sim_flags(workload, engine)
            if at_offered_load:
                raise InputError("--at-offered-load apply to --simulate (a measured FILE cannot be re-run at another "
                                 "load)")
        api_price, gpu_rate, the_slo = check_inputs(ctx.params, gpu,
                                                     {prm.name: prm.opts[0] for prm in ctx.command.params})
        sim = capacity = sweep = None
        if file is not None:
            run, n_gpus, hardware, sweep = file_run(files, format, run_index, num_gpus, the_slo, target)
        else:
            sim, capacity = sim_run(simulate, gpu, (workload, engine), ctx.params, the_slo)
            run, n_gpus, hardware = sim.run, sim.num_gpus, sim.gpu_id
        if gpu_rate is None:
            gpu_rate = gpu_rate_for(gpu if file is not None and gpu else hardware, gpu_provider, instance,
                                 gpu_usd_per_hour)
        people = bo.people(ctx.params)
        setup = SelfHostSetup(gpu_rate, n_gpus, utilization, people.engineer_months_per_month,
                              people.engineer_usd_per_month,
                              prefill_share, max_utilization, people.source, kv_tiers=bo.kv_tiers(ctx.params))
        model_name = simulate if file is None else (served_model or run.metadata.model)
        inputs, notes = decision_inputs(model_name, api_price, gpu_rate,
                                        hardware if file is None else (gpu or hardware),
                                        sim, bo.host_bill(ctx.params), people)
        def price(run: Any, sim: Any, capacity: Any) -> Any:
            return cost_payload(run, the_slo, setup, None, ApiMix(batch_share, cache_hit_rate, cache_write_rate),
                                DecisionFactors(data_sovereignty, model_control, team_capability),
                                bo.volume(ctx.params), sim=sim, capacity=capacity,
                                gpu=gpu if file is not None and gpu else hardware, model=served_model, inputs=inputs,
                                sweep=sweep)

        res = price(run, sim, capacity)
        res.report.notes.extend(notes)
        rep, basis, d = res.report, res.basis, res.payload
        if seeds > 1:
            spread = seed_costs(simulate, gpu, (workload, engine), ctx.params, the_slo, seeds, capacity, d,
                                lambda cap: price(cap.run.run, cap.run, cap).payload)
            extra = [spread.text()] + [n for n in (spread.capacity.note, spread.note) if n]
            rep.notes.extend(extra)
            d["notes"] = [*d.get("notes", []), *extra]
            d["seed_spread"] = spread.to_dict()
        if file is None and setup.kv_tiers is not None and setup.kv_tiers.tiers:
            from kvledger.report.cost_tier_notes import tier_notes

            for tier_note in tier_notes(setup.kv_tiers, capacity):
                rep.notes.append(tier_note)
                d["notes"] = [*d.get("notes", []), tier_note]
        text = strict_json.dumps(d) + "\n"
        if out is not None:
            from kvledger.strict_json import write_text_atomic

            write_text_atomic(out, text)
        if json_out:
            typer.echo(text, nl=False)
        else:
            print_cost_report(rep, basis, sim, capacity)
