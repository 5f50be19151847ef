"""``kvledger cost FILE|--simulate MODEL --slo ... --api MODEL --utilization U``: the itemised self-host-versus-API ledger and break-even.

FILE is a benchmark output or a kvledger records file (what ``kvledger simulate --out``
writes); ``--simulate MODEL --gpu GPU`` runs the simulator instead, with ``kvledger
simulate``'s workload and engine flags (``kvledger.analyses.sim_ledgers``), and prices the
simulated GPU by its catalog id. Goodput under the SLO sets the self-hosted capacity; GPU
and API prices come from the bundled price tables (or ``--gpu-usd-per-hour``). Tables for
people, ``--json`` for scripts (line items and the totals per million input and output tokens).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer

from kvledger.cli import sim_opts as so

__all__ = ["register"]


def _num(x: float) -> str:
    a = abs(x)
    if a == 0:
        return "0"
    if a >= 100:
        return f"{x:,.0f}"
    if a >= 1:
        return f"{x:,.2f}"
    return f"{x:.4g}"


def _ledger_table(ledger: Any, sources: list[str]) -> Any:
    """Narrow table: item, quantity and unit, unit price, amount, and a [n] reference into ``sources``."""
    from rich.table import Table

    t = Table(title=f"{ledger.name} ({ledger.per})", title_justify="left")
    for col in ("item", "quantity", "× unit price $", "= amount $", "src"):
        t.add_column(col, justify="left" if col == "item" else "right", overflow="fold")
    for i in ledger.items:
        ref = f"{i.source} (as of {i.as_of})" + (f"; {i.note}" if i.note else "")
        if ref not in sources:
            sources.append(ref)
        t.add_row(i.name, f"{_num(i.quantity)} {i.unit}", _num(i.unit_price_usd), f"{i.amount_usd:,.4f}", f"[{sources.index(ref) + 1}]")
    t.add_row("total (sum of the items)", "", "", f"{ledger.total_usd:,.4f}", "")
    return t


def _print_human(rep: Any, sim: Any = None) -> None:
    from rich.console import Console
    from rich.markup import escape

    con = Console(highlight=False)
    cap = rep.capacity
    sources: list[str] = sim.source_lines() if sim is not None else []
    title = f"simulated {sim.setup.model_name} on {sim.num_gpus}× {sim.setup.gpu_name}" if sim is not None else Path(rep.source).name
    con.print(f"[bold]{escape(title)}[/] under SLO {escape(rep.slo['text'])}" + (" (goodput is an estimate)" if cap["estimate"] else ""))
    if sim is not None:
        con.print(f"one deployment unit = {sim.replicas} replica(s) × TP {sim.setup.tp} = {sim.num_gpus} GPU(s); "
                  f"workload {escape(sim.setup.workload_info['trace'])} (sources [1]–[3] below)")
    con.print(f"{'simulated per deployment unit [1]' if sim is not None else 'measured per replica'}: {cap['goodput_req_per_s']:.3f} good req/s, {cap['good_input_tok_per_s']:,.1f} good input tok/s, "
              f"{cap['good_output_tok_per_s']:,.1f} good output tok/s; mean {cap['mean_input_tokens']:.1f} in / {cap['mean_output_tokens']:.1f} out tokens per good request")
    con.print(f"GPU time split: prefill {cap['prefill_share']:.3f} / decode {1 - cap['prefill_share']:.3f} — {escape(cap['prefill_share_method'])}")
    for name in ("self_host_input", "self_host_output", "api_input", "api_output"):
        con.print(_ledger_table(getattr(rep, name), sources))
    st = rep.sticker
    con.print(f"sticker (throughput-priced) self-host cost: ${st['usd_per_mtok_input']:.4f}/M input, ${st['usd_per_mtok_output']:.4f}/M output; "
              f"goodput-priced ÷ sticker = {st['multiplier_output']:.2f}× (effective-cost multiplier)")
    bu = rep.break_even_utilization
    con.print(f"\n[bold]break-even utilization[/]: {bu['utilization']:.1%} = {escape(bu['formula'])}" + ("" if bu["reachable"] else " — above 100%: not reachable"))
    bv = rep.break_even_volume
    if bv.get("requests_per_month") is not None:
        con.print(f"[bold]break-even volume[/]: {bv['requests_per_month']:,.0f} good requests/month ({bv['input_tokens_per_month']:,.0f} input + "
                  f"{bv['output_tokens_per_month']:,.0f} output tokens) with {bv['replicas_at_break_even']} replica(s) — {escape(bv['reason'])}")
    else:
        con.print(f"[bold]break-even volume[/]: none — {escape(bv['reason'])}")
    if rep.monthly is not None:
        m = rep.monthly
        con.print(f"\n[bold]monthly at {m['requests']:,.0f} requests[/] ({m['input_tokens']:,.0f} input, {m['output_tokens']:,.0f} output tokens; {escape(m['how'])}): "
                  f"{m['replicas']} replica(s), realized utilization {m['realized_utilization']:.1%}")
        con.print(_ledger_table(m["self_host"], sources))
        con.print(_ledger_table(m["api"], sources))
    con.print("\n[bold]sources of the line items[/]")
    for k, src in enumerate(sources, start=1):
        con.print(f"  [{k}] {escape(src)}")
    con.print("\n[bold]deciding factors[/]")
    for f in rep.factors:
        con.print(f"  {f['factor']}: {escape(f['value'])} — {escape(f['effect'])}")
    con.print(f"\n[bold]verdict on cost[/]: {escape(rep.verdict)}")
    for n in rep.notes:
        con.print(f"  - {escape(n)}")


def _pick_run(runs: list[Any], index: int | None, path: Path) -> Any:
    from kvledger.errors import InputError

    if index is None:
        if len(runs) == 1:
            return runs[0]
        labels = ", ".join(f"{i}: {r.metadata.extra.get('run_label', i)}" for i, r in enumerate(runs))
        raise InputError(f"{path} holds {len(runs)} runs ({labels}); choose one with --run INDEX")
    if not 0 <= index < len(runs):
        raise InputError(f"--run {index} is out of range: {path} holds {len(runs)} runs (0–{len(runs) - 1})")
    return runs[index]


def _gpu_rate(gpu: str | None, provider: str | None, instance: str | None, usd: float | None, hardware: str | None) -> Any:
    from kvledger.catalog.prices import find_gpu_price
    from kvledger.errors import InputError
    from kvledger.ledgers.cost import GpuRate

    if usd is not None:
        return GpuRate.given(usd, gpu or hardware or "GPU")
    name = gpu or hardware
    if name is None:
        raise InputError("no GPU price: the run does not name its GPU; pass --gpu (e.g. nvidia_h100_sxm) with --gpu-provider, or --gpu-usd-per-hour")
    if name == "custom":
        raise InputError("the simulated GPU is a custom GPU with no rental price in the table; pass --gpu-usd-per-hour")
    return GpuRate.from_catalog(find_gpu_price(name, provider, instance))


def _file_run(file: Path, fmt: str | None, run_index: int | None, num_gpus: int | None) -> tuple[Any, int, str | None]:
    """(run, GPU count, GPU name for the price table) from a benchmark or records file."""
    from kvledger.errors import InputError
    from kvledger.evidence import read_runs

    run = _pick_run(read_runs(file, format=fmt), run_index, file)
    md = run.metadata
    n_gpus = num_gpus if num_gpus is not None else md.num_gpus
    if n_gpus is None:
        raise InputError(f"{file} does not state how many GPUs served the run; pass --num-gpus")
    gpu_id = md.extra.get("gpu_id")  # written by kvledger simulate: the catalog id the price table uses
    return run, n_gpus, gpu_id if gpu_id not in (None, "custom") else md.hardware


def _sim_run(model: str, gpu: str | None, params: dict[str, Any]) -> Any:
    """The simulated run for ``--simulate`` (FILE-only flags refused)."""
    from kvledger.analyses.sim_ledgers import simulate_run
    from kvledger.cli.sim_opts import sim_request
    from kvledger.errors import InputError

    given = [flag for name, flag in (("num_gpus", "--num-gpus"), ("run_index", "--run"), ("format", "--format")) if params.get(name) is not None]
    if given:
        raise InputError(f"{', '.join(given)} apply to a FILE; with --simulate the GPU count is replicas × TP (--replicas, --tp)")
    args, synthetic = sim_request(model, gpu, params)
    return simulate_run(args, synthetic)


def register(app: typer.Typer) -> None:
    """Add the ``cost`` command to ``app``."""

    @app.command("cost")
    def cost_command(
        ctx: typer.Context,
        file: Path | None = typer.Argument(None, help="benchmark output or kvledger records file (kvledger simulate --out DIR writes DIR/records.json); or use --simulate", show_default=False),
        slo: str = typer.Option(..., "--slo", help="SLOs with units, e.g. 'ttft=200ms,tpot=50ms'"),
        api: str = typer.Option(..., "--api", help="API price row: MODEL or PROVIDER:MODEL, e.g. 'OpenAI:gpt-4.1'"),
        utilization: float = typer.Option(..., "--utilization", help="average load ÷ measured goodput capacity over the billed hours, (0, 1]"),
        gpu: str | None = typer.Option(None, "--gpu", help="FILE: GPU id or name for the price table, e.g. nvidia_h100_sxm (default: the GPU the file names). --simulate: the GPU to simulate (catalog name such as H100, or a GPU file), priced by its catalog id"),
        gpu_provider: str | None = typer.Option(None, "--gpu-provider", help="rental provider, e.g. Nebius, AWS, CoreWeave"),
        instance: str | None = typer.Option(None, "--instance", help="instance type when a provider lists several"),
        gpu_usd_per_hour: float | None = typer.Option(None, "--gpu-usd-per-hour", help="your own price, USD per GPU-hour (overrides the table)"),
        num_gpus: int | None = typer.Option(None, "--num-gpus", help="FILE: GPUs serving the measured run (default: as the file states)"),
        max_utilization: float = typer.Option(0.8, "--max-utilization", help="highest average utilization per replica when sizing for a monthly volume"),
        prefill_share: float | None = typer.Option(None, "--prefill-share", help="share of GPU time charged to input tokens (default: measured Σ TTFT ÷ Σ E2E)"),
        batch_share: float = typer.Option(0.0, "--batch-share", help="share of requests sent through the API's batch endpoint"),
        cache_hit_rate: float = typer.Option(0.0, "--cache-hit-rate", help="share of API input tokens that are prompt-cache reads"),
        cache_write_rate: float = typer.Option(0.0, "--cache-write-rate", help="share of API input tokens written to the prompt cache"),
        engineer_months: float = typer.Option(0.0, "--engineer-months-per-month", help="people time to run the service, engineer-months per month"),
        engineer_usd: float = typer.Option(0.0, "--engineer-usd-per-month", help="fully loaded cost of one engineer-month, USD"),
        monthly_requests: float | None = typer.Option(None, "--monthly-requests", help="volume: good requests per month"),
        monthly_input_tokens: float | None = typer.Option(None, "--monthly-input-tokens", help="volume: input tokens per month (with --monthly-output-tokens)"),
        monthly_output_tokens: float | None = typer.Option(None, "--monthly-output-tokens", help="volume: output tokens per month"),
        data_sovereignty: str = typer.Option("not_required", "--data-sovereignty", help="required, preferred or not_required"),
        model_control: str = typer.Option("any", "--model-control", help="custom_weights, open_weights or any"),
        team_capability: str = typer.Option("some", "--team-capability", help="experienced, some or none"),
        run_index: int | None = typer.Option(None, "--run", help="FILE: which run of a multi-run file (0-based)"),
        format: str | None = typer.Option(None, "--format", help="FILE: force a reader instead of auto-detection"),
        json_out: bool = typer.Option(False, "--json", help="JSON for scripts: line items and totals per 1M input and output tokens"),
        out: Path | None = typer.Option(None, "--out", help="also write the JSON to this file (refuses to overwrite without --force)"),
        force: bool = typer.Option(False, "--force", help="allow --out to overwrite an existing file"),
        simulate: so.Simulate = None, trace: so.Trace = None, rate: so.Rate = None, rate_scale: so.RateScale = None,
        num_requests: so.NumRequests = None, seed: so.Seed = None, concurrency: so.Concurrency = None,
        think_time: so.ThinkTime = None, prompt_lengths: so.PromptLengths = None, output_lengths: so.OutputLengths = None,
        arrival_cv: so.ArrivalCv = None, tp: so.Tp = None, replicas: so.Replicas = None, router: so.Router = None,
        engine_version: so.EngineVersion = None, max_model_len: so.MaxModelLen = None,
        gpu_memory_utilization: so.GpuMemUtil = None, kv_cache_dtype: so.KvCacheDtype = None, block_size: so.BlockSize = None,
        max_num_batched_tokens: so.MaxNumBatchedTokens = None, max_num_seqs: so.MaxNumSeqs = None,
        num_gpu_blocks_override: so.NumGpuBlocksOverride = None, prefix_caching: so.PrefixCaching = None,
        chunked_prefill: so.ChunkedPrefill = None, policy: so.Policy = None, step_cost: so.StepCost = None,
        cpu_overhead: so.CpuOverhead = None,
    ) -> None:
        """Self-host vs API: USD per 1M input/output tokens priced by goodput, monthly bills, break-even, deciding factors.

        The run is a FILE (a benchmark output, or the records.json `kvledger simulate --out` writes) or a
        simulation: `--simulate MODEL --gpu GPU` with `kvledger simulate`'s workload and engine flags
        (marked [--simulate] below; the whole trace unless --num-requests). A simulation gives the
        same ledger as `simulate --out DIR` then `cost DIR/records.json` with the same flags; its GPU
        count is replicas × TP, its GPU is priced by catalog id (pick a row with --gpu-provider), and the
        simulator, step-cost model and memory-plan figures are listed among the sources.
        """
        from kvledger.catalog.prices import find_api_price
        from kvledger.cli.sim_opts import reject_sim_flags
        from kvledger.errors import InputError
        from kvledger.ledgers.api_cost import ApiMix
        from kvledger.ledgers.cost import SelfHostSetup
        from kvledger.ledgers.cost_report import DecisionFactors, MonthlyVolume, build_cost_report
        from kvledger.ledgers.goodput import goodput
        from kvledger.ledgers.slo import parse_slo

        if (file is None) == (simulate is None):
            raise InputError("give either a FILE to read or --simulate MODEL (with --gpu) to simulate, not " + ("both" if file else "neither"))
        if out is not None and out.exists() and not force:
            raise InputError(f"{out} already exists; refusing to overwrite it (pass --force)")
        the_slo = parse_slo(slo)
        sim = None
        if file is not None:
            reject_sim_flags(ctx.params)
            run, n_gpus, hardware = _file_run(file, format, run_index, num_gpus)
        else:
            sim = _sim_run(simulate, gpu, ctx.params)
            run, n_gpus, hardware, gpu = sim.run, sim.num_gpus, sim.gpu_id, None
        setup = SelfHostSetup(_gpu_rate(gpu, gpu_provider, instance, gpu_usd_per_hour, hardware), n_gpus, utilization,
                              engineer_months, engineer_usd, prefill_share, max_utilization)
        volume = None
        if monthly_requests is not None or monthly_input_tokens is not None or monthly_output_tokens is not None:
            volume = MonthlyVolume(monthly_requests, monthly_input_tokens, monthly_output_tokens)
        gp = goodput(run, the_slo)
        rep = build_cost_report(run, gp, setup, find_api_price(api), ApiMix(batch_share, cache_hit_rate, cache_write_rate),
                                DecisionFactors(data_sovereignty, model_control, team_capability), volume)
        d = rep.to_dict()
        if sim is not None:
            d["simulation"] = sim.provenance()
        text = json.dumps(d, default=str) + "\n"
        if out is not None:
            out.write_text(text, encoding="utf-8")
        if json_out:
            typer.echo(text, nl=False)
        else:
            _print_human(rep, sim)
