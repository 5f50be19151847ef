"""``kvledger search MODEL --slo … --target 0.9``: which GPU, TP and engine settings serve the traffic at the lowest cost, and how many GPUs.

The command parses flags into a ``SearchSpec`` and ``Axes`` (``kvledger.analyses.search``),
runs the search with a progress bar, and renders: the table and frontier
(``kvledger.report.search_view``), ``--json``, ``--csv FILE``, ``--plot FILE``
(``kvledger.report.search_figures``). ``--show-command ID`` plans one candidate and prints its
launch commands without simulating.
"""

from __future__ import annotations

import csv
import io
import json
import sys
from pathlib import Path
from typing import Any

import typer

__all__ = ["register"]


def _split(text: str | None) -> list[str]:
    return [w.strip() for w in (text or "").split(",") if w.strip()]


def _ints(text: str | None, flag: str, *, tokens: bool = False) -> tuple[int, ...]:
    from kvledger.errors import InputError
    from kvledger.units import parse_tokens

    out = []
    for w in _split(text):
        if tokens:
            out.append(parse_tokens(w, what=flag))
        elif w.isdigit() and int(w) >= 1:
            out.append(int(w))
        else:
            raise InputError(f"{flag} takes whole numbers ≥ 1 separated by commas, got {w!r}")
    return tuple(out)


def _onoff(text: str | None) -> tuple[bool | None, ...]:
    from kvledger.errors import InputError

    vals = {"on": True, "off": False, "true": True, "false": False}
    words = _split(text)
    bad = [w for w in words if w.lower() not in vals]
    if bad:
        raise InputError(f"--prefix-caching takes on, off or on,off; got {bad[0]!r}")
    return tuple(vals[w.lower()] for w in words) or (None,)


def _splits(text: str) -> tuple[tuple[int, int], ...]:
    from kvledger.errors import InputError

    out = []
    for w in _split(text):
        p, _, d = w.partition(":")
        if not (p.isdigit() and d.isdigit() and int(p) >= 1 and int(d) >= 1):
            raise InputError(f"--disagg-splits takes P:D pairs of whole numbers ≥ 1 (prefill:decode replicas), got {w!r}")
        out.append((int(p), int(d)))
    return tuple(out)


def _axes(gpus: str | None, tp: str | None, kv: str | None, seqs: str | None, mnbt: str | None, pc: str | None,
          splits: tuple[tuple[int, int], ...]) -> Any:
    from kvledger.analyses.search import Axes

    return Axes(disagg_splits=splits, gpus=tuple(_split(gpus)), tps=_ints(tp, "--tp"), kv_cache_dtypes=tuple(_split(kv)) or ("auto",),
                max_num_seqs=_ints(seqs, "--max-num-seqs") or (None,),
                max_num_batched_tokens=_ints(mnbt, "--max-num-batched-tokens", tokens=True) or (None,),
                prefix_caching=_onoff(pc))


def _synthetic(prompt: str | None, output: str | None, cv: float | None, trace: str | None) -> Any:
    from kvledger.analyses.serving.sim_ledgers import SyntheticSpec
    from kvledger.errors import InputError

    if prompt is None and output is None and cv is None:
        return None
    if prompt is None or output is None:
        raise InputError("a synthetic workload needs both --prompt-lengths and --output-lengths")
    if trace is not None:
        raise InputError("give either --trace or a synthetic workload (--prompt-lengths/--output-lengths), not both")
    return SyntheticSpec(prompt, output, 1.0 if cv is None else cv)


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


def _exit_if_failed(result: Any) -> None:
    """Exit 1 after the output when a candidate could not be evaluated (a worker failed): scripts must not take a
    ranking with holes for a complete one. The failed candidates are named on stderr (and in the output)."""
    failed = [e for e in result.entries if e["status"] == "error"]
    if failed:
        names = "; ".join(f"{e['id']} ({e.get('reason')}: {e.get('detail', '')})" for e in failed)
        typer.echo(f"error: {len(failed)} candidate(s) could not be evaluated: {names}. "
                   "Run again with --resume LEDGER to redo only those.", err=True)
        raise typer.Exit(1)


def _show_command(spec: Any, cid: str, as_json: bool) -> None:
    from rich.console import Console

    from kvledger.analyses.search.launch import candidate_commands
    from kvledger.report.search_view import print_launch

    d = candidate_commands(spec, cid)
    if as_json:
        typer.echo(json.dumps(d, allow_nan=False))
    else:
        print_launch(Console(highlight=False), d, "launch commands")


def register(app: typer.Typer) -> None:
    """Add the ``search`` command to ``app``."""

    @app.command("search")
    def search_command(
        model: str = typer.Argument(..., help="model: HF id, alias, config.json path or Hub id"),
        slo: str = typer.Option(..., "--slo", help="SLOs with units, e.g. 'ttft=200ms,tpot=50ms'"),
        target: float = typer.Option(0.9, "--target", help="share of requests that must meet the SLO at the capacity"),
        trace: str | None = typer.Option(None, "--trace", help="azure-conv (default), azure-code, mooncake, arxiv, or a CSV/JSONL path", show_default=False),
        prompt_lengths: str | None = typer.Option(None, "--prompt-lengths", help="synthetic workload instead of a trace: e.g. fixed:512, exp:128:1536 (with --output-lengths)", show_default=False),
        output_lengths: str | None = typer.Option(None, "--output-lengths", help="synthetic workload: output lengths", show_default=False),
        arrival_cv: float | None = typer.Option(None, "--arrival-cv", help="synthetic workload: CV of inter-arrival gaps (default 1 = Poisson)", show_default=False),
        num_requests: int = typer.Option(2000, "--num-requests", help="requests per simulated probe (the same seeded requests for every candidate)"),
        seed: int = typer.Option(0, "--seed", help="RNG seed of the workload"),
        rate: float | None = typer.Option(None, "--rate", help="target mean load, req/s: sizes replicas, GPUs and the monthly bill", show_default=False),
        monthly_tokens: float | None = typer.Option(None, "--monthly-tokens", help="target load as input + output tokens per month (converted with the workload's mean tokens per request)", show_default=False),
        gpus: str | None = typer.Option(None, "--gpus", help="GPUs to try, comma-separated (default: every catalog GPU with a price row)", show_default=False),
        tp: str | None = typer.Option(None, "--tp", "--tensor-parallel-size", help="TPs to try, e.g. 1,2,4,8 (default: those of 1, 2, 4, 8 dividing the KV heads)", show_default=False),
        kv_cache_dtype: str | None = typer.Option(None, "--kv-cache-dtype", help="KV dtypes to try, e.g. auto,fp8 (default auto)", show_default=False),
        max_num_seqs: str | None = typer.Option(None, "--max-num-seqs", help="max_num_seqs values to try (default: vLLM's)", show_default=False),
        max_num_batched_tokens: str | None = typer.Option(None, "--max-num-batched-tokens", help="token budgets to try, e.g. 2048,8192 (default: vLLM's)", show_default=False),
        prefix_caching: str | None = typer.Option(None, "--prefix-caching", help="on, off or on,off (default: vLLM's, on)", show_default=False),
        disagg: bool = typer.Option(False, "--disagg", help="also try prefill/decode-disaggregated units: every prefill TP × decode TP on the --tp axis × --disagg-splits"),
        disagg_splits: str = typer.Option("1:1,1:2,2:1", "--disagg-splits", help="with --disagg: prefill:decode replica counts per unit"),
        max_model_len: str | None = typer.Option(None, "--max-model-len", help="tokens, for every candidate (default: from the config)", show_default=False),
        gpu_memory_utilization: float | None = typer.Option(None, "--gpu-memory-utilization", help="vLLM fraction of device memory, for every candidate (default by version)", show_default=False),
        engine_version: str | None = typer.Option(None, "--engine-version", help="vLLM version whose rules and defaults to apply", show_default=False),
        step_cost: str = typer.Option("roofline", "--step-cost", help="roofline or calibrated (see kvledger simulate --help)"),
        cpu_overhead: str | None = typer.Option(None, "--cpu-overhead", help="per-step CPU time added to the roofline, e.g. 2ms (default none)", show_default=False),
        gpu_provider: str | None = typer.Option(None, "--gpu-provider", help="price GPUs at this provider's rows (default: the cheapest row of each GPU)", show_default=False),
        utilization: float | None = typer.Option(None, "--utilization", help="average load ÷ capacity over billed hours for $ per token (default with --rate/--monthly-tokens: the sizing's realized utilization)", show_default=False),
        max_utilization: float = typer.Option(0.8, "--max-utilization", help="highest mean load per replica, as a share of its SLO capacity, when sizing"),
        api: str | None = typer.Option(None, "--api", help="API price row to compare with, e.g. OpenAI:gpt-4.1", show_default=False),
        batch_share: float = typer.Option(0.0, "--batch-share", help="share of API requests sent through the batch endpoint"),
        cache_hit_rate: float = typer.Option(0.0, "--cache-hit-rate", help="share of API input tokens that are prompt-cache reads"),
        cache_write_rate: float = typer.Option(0.0, "--cache-write-rate", help="share of API input tokens written to the prompt cache"),
        workers: int = typer.Option(1, "--workers", help="parallel capacity searches: a local Ray with N CPUs when Ray is installed, else a process pool"),
        ray_address: str | None = typer.Option(None, "--ray-address", help="run on an existing Ray cluster: auto or HOST:PORT (kvledger must be installed on its nodes)", show_default=False),
        backend: str = typer.Option("auto", "--backend", help="auto, serial, pool or ray"),
        ledger: Path | None = typer.Option(None, "--ledger", help="write the candidate ledger (JSON lines) here as candidates finish", show_default=False),
        resume: Path | None = typer.Option(None, "--resume", help="continue the search whose ledger is FILE: keep its finished candidates, run the rest", show_default=False),
        top: int = typer.Option(10, "--top", help="rows in the table"),
        verbose: bool = typer.Option(False, "--verbose", help="list each rejected and each cost-dominated candidate"),
        show_command: str | None = typer.Option(None, "--show-command", help="print the launch commands of one candidate id (e.g. nvidia_h100_sxm:tp4:kv-fp8) and exit", show_default=False),
        as_json: bool = typer.Option(False, "--json", help="print the whole result as JSON"),
        csv_out: Path | None = typer.Option(None, "--csv", help="write the candidate ledger as CSV", show_default=False),
        plot: Path | None = typer.Option(None, "--plot", help="write the frontier figure (.png or .svg)", show_default=False),
        force: bool = typer.Option(False, "--force", help="allow --ledger, --csv and --plot to overwrite files"),
    ) -> None:
        """Configuration search: every GPU × TP × engine setting planned, each feasible one's SLO capacity simulated,
        priced and sized; ranked, with the Pareto frontier and the launch command of the winner.

        Candidates are the product of the axes (--gpus, --tp, --kv-cache-dtype, --max-num-seqs,
        --max-num-batched-tokens, --prefix-caching); --disagg adds prefill/decode-disaggregated units
        (prefill TP × decode TP × --disagg-splits, KV over the GPU's NVLink or PCIe). Each is planned with vLLM's memory rules; one that
        does not fit, whose max_model_len does not fit, or has no price row is listed with the reason and
        numbers. Each feasible one gets its SLO capacity per replica (the rate search of `kvledger goodput
        --simulate --target`, the same seeded workload for all), $ per 1M input/output tokens, and with
        --rate or --monthly-tokens the replicas, GPUs and monthly bill; --api adds the API bill.
        """
        from kvledger.analyses.search import SearchSpec, run_search
        from kvledger.errors import InputError
        from kvledger.units import parse_tokens

        spec = SearchSpec(model=model, slo=slo, target=target, trace=trace or "azure-conv", num_requests=num_requests,
                          seed=seed, synthetic=_synthetic(prompt_lengths, output_lengths, arrival_cv, trace),
                          step_cost=step_cost, cpu_overhead=cpu_overhead, engine_version=engine_version,
                          max_model_len=parse_tokens(max_model_len, what="--max-model-len") if max_model_len else None,
                          gpu_memory_utilization=gpu_memory_utilization, gpu_provider=gpu_provider,
                          utilization=utilization, max_utilization=max_utilization, rate_req_per_s=rate,
                          monthly_tokens=monthly_tokens, api=api, batch_share=batch_share, cache_hit_rate=cache_hit_rate,
                          cache_write_rate=cache_write_rate)
        if show_command is not None:
            _show_command(spec, show_command, as_json)
            return
        if top < 1:
            raise InputError(f"--top must be ≥ 1, got {top}")
        if ledger is not None and resume is not None:
            raise InputError("--resume FILE continues that ledger; give it alone, without --ledger")
        if resume is not None and not resume.is_file():
            raise InputError(f"--resume {resume}: no such ledger file")
        _refuse_overwrite({"--ledger": ledger, "--csv": csv_out, "--plot": plot}, force, [trace, resume])
        if plot is not None and plot.suffix.lower() not in (".png", ".svg"):
            raise InputError(f"--plot {plot}: write .png or .svg")
        axes = _axes(gpus, tp, kv_cache_dtype, max_num_seqs, max_num_batched_tokens, prefix_caching,
                     _splits(disagg_splits) if disagg else ())
        with _progress_bar() as bar:
            task = bar.add_task("search", total=None, status="planning")

            def progress(entry: dict[str, Any], done: int, total: int, feasible: int, best: dict[str, Any] | None) -> None:
                best_text = f"best {best['id']}" if best else "no feasible one yet"
                bar.update(task, completed=done, total=total, status=f"{feasible} feasible; {best_text}")

            result = run_search(spec, axes, workers=workers, backend=backend, ray_address=ray_address,
                                ledger=resume if resume is not None else ledger, resume=resume is not None,
                                progress=progress)
        if csv_out is not None:
            _write_csv(result, csv_out)
        if plot is not None and result.ranking:
            from kvledger.report.search_figures import frontier_figure, save_figure

            save_figure(frontier_figure(result), plot)
        if as_json:
            typer.echo(json.dumps(result.to_dict(), allow_nan=False))
        else:
            from kvledger.report.search_view import print_search

            print_search(result, top, verbose)
        _exit_if_failed(result)
