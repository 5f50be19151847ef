"""``kvledger search MODEL --slo … --target 0.9``: which GPU, TP and engine settings serve the traffic at the lowest
cost, and how many GPUs.

The command parses flags into a ``SearchSpec`` and ``Axes`` (``kvledger.analyses.search``),
runs the search with a progress bar, and renders: the table and frontier
(``kvledger.report.search_view``), ``--json``, ``--csv FILE``, ``--plot FILE``
(``kvledger.report.search_figures``). ``--show-command`` prints one candidate's launch commands
(kvledger.cli.search_show).
"""

from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path
from typing import Any

import typer

from kvledger.cli.flag_groups import EngineFlags, GroupUse, SessionFlags, WorkloadFlags, with_groups
from kvledger.cli.pricing_flags import PricingFlags
from kvledger.cli.search_axes import axes_of, splits_of, workload_of
from kvledger.cli.search_show import rank_of, show_command_of, show_ranked
from kvledger.units import count_option

__all__ = ["register"]

#: search varies TP, KV dtype, max_num_seqs, the token budget and prefix caching itself (its own list flags); the
#: rest of the engine, the workload and the pricing flags are the shared groups'.
WORKLOAD = GroupUse(WorkloadFlags, only=("trace", "prompt_lengths", "output_lengths", "arrival_cv", "num_requests",
                                         "seed"),
                    defaults={"num_requests": 2000, "seed": 0},
                    help={"num_requests": "Requests per simulated probe (the same seeded requests for every "
                                          "candidate).",
                          "seed": "RNG seed of the workload."})
ENGINE = GroupUse(EngineFlags, only=("max_model_len", "gpu_memory_utilization", "engine_version", "step_cost",
                                     "cpu_overhead", "gpu_profile", "wddm", "client_latency"),
                  defaults={"step_cost": "roofline"})
SESSIONS = GroupUse(SessionFlags, help={
    "session_workload": "Multi-turn sessions instead of a trace: chat or agent (the presets of `kvledger offload`), "
                        "probed at turn rates (session starts × turns per session).",
    "sessions": "Sessions per probe, count (default 200; the same seeded sessions for every candidate).",
    "session_rate": "The load to size for, session starts per second (× the drawn sessions' turns per session = "
                    "req/s)."})
PRICING = GroupUse(PricingFlags, only=("gpu_provider", "gpu_usd_per_hour", "utilization", "max_utilization",
                                       "batch_share", "cache_hit_rate", "cache_write_rate"),
                   help={"utilization": "Average load ÷ capacity over billed hours for $ per token (default with "
                                        "--rate/--monthly-tokens: the sizing's realized utilization)."})


def _refuse_overwrite(paths: dict[str, Path | None], force: bool, inputs: list[Any]) -> None:
    """Every file the search writes, checked before the work (kvledger.outputs)."""
    from kvledger.outputs import prepare_output_file

    for flag, p in paths.items():
        if p is not None:
            prepare_output_file(p, force=force, inputs=inputs, flag=flag)


def _progress_bar() -> Any:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("candidates"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[status]}"),
                    TimeElapsedColumn(), console=Console(stderr=True), transient=True, disable=not sys.stderr.isatty())


def _write_csv(result: Any, path: Path) -> None:
    from kvledger.analyses.search import CSV_COLUMNS, csv_rows
    from kvledger.outputs import write_text_atomic

    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_COLUMNS, lineterminator="\n")
    w.writeheader()
    w.writerows(csv_rows(result))
    write_text_atomic(path, buf.getvalue())


def _check_wddm_gpus(gpus: tuple[str, ...], wddm: bool) -> None:
    """With --wddm, refuse a named GPU it cannot apply to (a server module), in `plan --wddm`'s words, before any work;
    the default GPUs (every priced one) are screened per candidate instead ("invalid setting")."""
    if not wddm:
        return
    from kvledger.accounting.settings import make_settings
    from kvledger.accounting.wddm_engines import check_wddm
    from kvledger.catalog.gpu_file import resolve_gpu

    for g in gpus:
        check_wddm(make_settings(wddm=True), resolve_gpu(g))


def _exit_if_none_can_start(result: Any) -> None:
    """Exit 3 after the output (its headline says why) when every candidate was rejected for memory: a script must
    not take "nothing can start" for a ranking (analyses.search.frontier.none_can_start)."""
    from kvledger.analyses.search.frontier import none_can_start

    if none_can_start(result.entries):
        raise typer.Exit(3)


def _exit_if_failed(result: Any) -> None:
    """Exit 1 after the output when a candidate could not be evaluated (a worker failed): scripts must not take a
    ranking with holes for a complete one. The failed candidates are named on stderr (and in the output)."""
    failed = [e for e in result.entries if e["status"] == "error"]
    if failed:
        names = "; ".join(f"{e['id']} ({e.get('reason')}: {e.get('detail', '')})" for e in failed)
        typer.echo(f"error: {len(failed)} candidate(s) could not be evaluated: {names}. "
                   "Run again with --resume LEDGER to redo only those.", err=True)
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add the ``search`` command to ``app``."""

    @app.command("search")
    @with_groups(workload=WORKLOAD, sessions=SESSIONS, engine=ENGINE, pricing=PRICING)
    def search_command(
        model: str = typer.Argument(..., help="model: HF id, alias, config.json path or Hub id"),
        slo: str = typer.Option(..., "--slo", help="SLOs with units, e.g. 'ttft=200ms,tpot=50ms'"),
        target: float = typer.Option(0.9, "--target", help="share of requests that must meet the SLO at the capacity"),
        workload: WorkloadFlags = WorkloadFlags(),
        sessions: SessionFlags = SessionFlags(),
        rate: float | None = typer.Option(None, "--rate", help="target mean load, req/s: sizes replicas, GPUs and the "
                                                               "monthly bill", show_default=False),
        monthly_tokens: float | None = typer.Option(None, "--monthly-tokens", parser=count_option("--monthly-tokens"),
            help="target load as input + output tokens per month, e.g. 3B (K, M, B, T: powers of 1000); converted with "
                 "the workload's mean tokens per request", show_default=False),
        gpus: str | None = typer.Option(None, "--gpus", help="GPUs to try, comma-separated (default: every catalog GPU "
                                                             "with a price row)", show_default=False),
        gpu: list[str] | None = typer.Option(None, "--gpu", help="the same as --gpus, as the other commands take it: "
                                             "repeat it or comma-separate (--gpu H100 --gpu H200, --gpu H100,H200)",
                                             show_default=False),
        tp: str | None = typer.Option(None, "--tp", "--tensor-parallel-size", help="TPs to try, e.g. 1,2,4,8 (default: "
            "those of 1, 2, 4, 8 dividing the KV heads)", show_default=False),
        kv_cache_dtype: str | None = typer.Option(None, "--kv-cache-dtype", help="KV dtypes to try, e.g. auto,fp8 "
            "(default auto)", show_default=False),
        max_num_seqs: str | None = typer.Option(None, "--max-num-seqs", help="max_num_seqs values to try (default: "
                                                                             "vLLM's)", show_default=False),
        max_num_batched_tokens: str | None = typer.Option(None, "--max-num-batched-tokens", help="token budgets to "
            "try, e.g. 2048,8192 (default: vLLM's)", show_default=False),
        prefix_caching: str | None = typer.Option(None, "--prefix-caching", help="on, off or on,off (default: vLLM's, "
            "on)", show_default=False),
        disagg: bool = typer.Option(
            False, "--disagg",
            help="also try prefill/decode-disaggregated units: every prefill TP × decode TP on the --tp axis × "
                 "--disagg-splits"),
        disagg_splits: str = typer.Option("1:1,1:2,2:1", "--disagg-splits", help="with --disagg: prefill:decode "
            "replica counts per unit"),
        engine: EngineFlags = EngineFlags(),
        pricing: PricingFlags = PricingFlags(),
        api: str | None = typer.Option(None, "--api", help="API price row to compare with, e.g. OpenAI:gpt-4.1",
                                       show_default=False),
        workers: int | None = typer.Option(None, "--workers", help="parallel capacity searches: a local Ray with N "
                                           "CPUs when Ray is installed, else a process pool [default: one process per "
                                           "usable core, in a process pool, when 8 or more candidates are simulated; "
                                           "else in process]", show_default=False),
        ray_address: str | None = typer.Option(None, "--ray-address", help="run on an existing Ray cluster: auto or "
                                                                           "HOST:PORT (kvledger must be installed on "
                                                                           "its nodes)", show_default=False),
        backend: str = typer.Option("auto", "--backend", help="auto, serial, pool or ray"),
        ledger: Path | None = typer.Option(None, "--ledger", help="write the candidate ledger (JSON lines) here as "
                                                                  "candidates finish", show_default=False),
        resume: Path | None = typer.Option(None, "--resume", help="continue the search whose ledger is FILE: keep its "
                                                                  "finished candidates, run the rest",
                                                                      show_default=False),
        top: int = typer.Option(10, "--top", help="rows in the table"),
        verbose: bool = typer.Option(False, "--verbose", help="list each rejected and each cost-dominated candidate"),
        show_command: str | None = typer.Option(None, "--show-command", help="print the launch commands of one "
            "candidate and exit: its id (nvidia_h100_sxm:tp4:kv-fp8) or its name in the table (h100_sxm tp4 fp8), "
            "planned without simulating; or its rank number in the table (3), which runs the search first",
            show_default=False),
        as_json: bool = typer.Option(False, "--json", help="print the whole result as JSON"),
        csv_out: Path | None = typer.Option(None, "--csv", help="write the candidate ledger as CSV",
                                            show_default=False),
        plot: Path | None = typer.Option(None, "--plot", help="write the frontier figure (.png or .svg)",
                                         show_default=False),
        force: bool = typer.Option(False, "--force", help="allow --ledger, --csv and --plot to overwrite files"),
        offload: str | None = typer.Option(None, "--offload", help="KV tiers to add to each colocated candidate "
                                           "(feasible, or meeting the SLO at no rate), each variant ranked with the "
                                           "rest: none,cpu:256GiB,disk:1TiB (GiB per GPU; default none)"),
        host_memory_usd_per_gib_month: float | None = typer.Option(
            None, "--host-memory-usd-per-gib-month", help="[--offload cpu] your price, USD/GiB-month (default: "
            "tier_prices.csv's cheapest dated row, named in the output)"),
        nvme_usd_per_gib_month: float | None = typer.Option(
            None, "--nvme-usd-per-gib-month", help="[--offload disk] your price, USD/GiB-month (default: "
            "tier_prices.csv's dated row, named in the output)"),
        seeds: int = typer.Option(1, "--seeds", help="re-check the winner and the runner-up with seeds --seed to "
                                  "--seed+N−1 (1 to 64; 2(N−1) more capacity searches): their capacity and cost range "
                                  "and whether the winner stays first; the ranking is the first seed's"),
        exhaustive: bool = typer.Option(False, "--exhaustive", help="simulate every planned candidate; by default one "
                                        "whose analytic bounds prove it cannot win, be the runner-up or reach a "
                                        "frontier is decided by bound, unsimulated"),
    ) -> None:
        """Configuration search: every GPU × TP × engine setting planned, each feasible one's SLO capacity simulated,
        priced and sized; ranked, with the Pareto frontier and the launch command of the winner.

        Candidates are the product of the axes (--gpus, --tp, --kv-cache-dtype, --max-num-seqs,
        --max-num-batched-tokens, --prefix-caching); --disagg adds prefill/decode-disaggregated units
        (prefill TP × decode TP × --disagg-splits, KV over the GPU's NVLink or PCIe). Each is planned with vLLM's
        memory rules; one that
        does not fit, whose max_model_len does not fit, or has no price row is listed with the reason and
        numbers. Each feasible one gets its SLO capacity per replica (the rate search of `kvledger goodput
        --simulate --target`, the same seeded workload for all), $ per 1M input/output tokens, and with
        --rate or --monthly-tokens the replicas, GPUs and monthly bill; --api adds the API bill. A candidate whose
        analytic bounds (roofline work, TTFT/TPOT lower bounds) prove it cannot win, be the runner-up or reach a
        frontier is decided by bound, unsimulated, with the margin (--exhaustive simulates every one).

        Exit status: 0 with a ranking (or none meeting the SLO); 1 when a candidate could not be evaluated; 2 for bad
        input; 3 when no candidate can start, every one rejected for memory (its max_model_len or its weights do not
        fit), as `plan` exits 3 when the model does not fit.
        """
        from kvledger.analyses.search import SearchSpec, run_search
        from kvledger.errors import InputError
        from kvledger.units import parse_tokens

        w, e, p = workload, engine, pricing
        mml = parse_tokens(e.max_model_len, what="--max-model-len") if e.max_model_len else None
        wl, rate, load_notes = workload_of(w, sessions.session_workload, sessions.sessions, sessions.session_rate,
                                           rate, monthly_tokens, model, mml, w.seed, disagg)
        spec = SearchSpec(model=model, slo=slo, target=target, trace=w.trace or "azure-conv",
                          num_requests=w.num_requests,
                          seed=w.seed, synthetic=wl, step_cost=e.step_cost, cpu_overhead=e.cpu_overhead,
                          gpu_profile=e.gpu_profile,
                          engine_version=e.engine_version, max_model_len=mml,
                          gpu_memory_utilization=e.gpu_memory_utilization, gpu_provider=p.gpu_provider,
                          utilization=p.utilization, max_utilization=p.max_utilization, rate_req_per_s=rate,
                          monthly_tokens=monthly_tokens, api=api, batch_share=p.batch_share,
                          cache_hit_rate=p.cache_hit_rate, cache_write_rate=p.cache_write_rate,
                          gpu_usd_per_hour=p.gpu_usd_per_hour, wddm=bool(e.wddm), client_latency=e.client_latency)
        axes = axes_of(",".join([gpus or "", *(gpu or [])]), tp, kv_cache_dtype, max_num_seqs, max_num_batched_tokens,
                     prefix_caching, splits_of(disagg_splits) if disagg else ())
        if e.gpu_profile is not None and axes.gpus:
            from kvledger.accounting.gpu_profile import check_profile_gpus
            from kvledger.catalog.gpu_file import resolve_gpu

            check_profile_gpus(e.gpu_profile, [resolve_gpu(g).name for g in axes.gpus])
        _check_wddm_gpus(axes.gpus, bool(e.wddm))
        rank = rank_of(show_command)
        if show_command is not None and rank is None:
            show_command_of(spec, axes, show_command, as_json)
            return
        if ledger is not None and resume is not None:
            raise InputError("--resume FILE continues that ledger; give it alone, without --ledger")
        if resume is not None and not resume.is_file():
            raise InputError(f"--resume {resume}: no such ledger file")
        _refuse_overwrite({"--ledger": ledger, "--csv": csv_out, "--plot": plot}, force, [w.trace, resume])
        if plot is not None and plot.suffix.lower() not in (".png", ".svg"):
            raise InputError(f"--plot {plot}: write .png or .svg")
        from kvledger.analyses.search.offload_axis import check_prices, offload_pass, offload_summary, parse_offload
        from kvledger.analyses.search.seed_check import attach_seed_check

        tiers = parse_offload(offload)
        prices = {"host": host_memory_usd_per_gib_month, "nvme": nvme_usd_per_gib_month}
        with_tiers = bool(check_prices(tiers, prices))
        if seeds > 1 and with_tiers:
            raise InputError("--seeds re-checks the winner's own capacity search, which --offload's do not run alone")
        with _progress_bar() as bar:
            task = bar.add_task("search", total=None, status="planning")

            def progress(entry: dict[str, Any], done: int, total: int, feasible: int, best: dict[str,
                Any] | None) -> None:
                best_text = f"best {best['id']}" if best else "no feasible one yet"
                bar.update(task, completed=done, total=total, status=f"{feasible} feasible; {best_text}")

            result = run_search(spec, axes, workers=workers, backend=backend, ray_address=ray_address,
                                ledger=resume if resume is not None else ledger, resume=resume is not None,
                                progress=progress, exhaustive=exhaustive)
        variants = None
        if with_tiers:  # tier variants ranked with the rest (analyses/search/tier_entries.py)
            from kvledger.analyses.search.rank import build_result

            variants = offload_pass(spec, result.entries, tiers, prices)
            result = build_result(spec, result.entries + variants)
        result.notes[:0] = load_notes  # how a --session-rate became the req/s the sizing uses
        if seeds > 1:  # the winner and the runner-up per seed (analyses/search/seed_check.py)
            attach_seed_check(result, seeds)
        if csv_out is not None:
            _write_csv(result, csv_out)
        if plot is not None and result.ranking:
            from kvledger.report.search_figures import frontier_figure, save_figure

            save_figure(frontier_figure(result), plot)
        if rank is not None:
            show_ranked(result, rank, as_json)
        elif as_json:
            typer.echo(json.dumps(result.to_dict() | ({"offload": offload_summary(variants)} if variants is not None
                                                      else {}), allow_nan=False))
        else:
            from kvledger.report.search_view import print_search

            print_search(result, top, verbose)
            if variants is not None:
                from kvledger.report.offload_axis_view import print_offload_axis

                print_offload_axis(variants, result.ranking)
        _exit_if_failed(result)
        _exit_if_none_can_start(result)
