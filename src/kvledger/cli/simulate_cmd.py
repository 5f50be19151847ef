"""``kvledger simulate``: serve a real or synthetic trace on a simulated engine sized by the memory plan (vLLM's;
SGLang's
for ``--policy sglang``)."""

from __future__ import annotations

from pathlib import Path

import typer

from kvledger import strict_json
from kvledger.cli.flag_groups import EngineFlags, GroupUse, SessionFlags, TierFlags, WorkloadFlags, with_groups
from kvledger.cli.sim_opts import TIER_HELP

__all__ = ["register"]

OUT_FILES = ("records.parquet", "steps.parquet", "trace.json", "summary.json")
#: the tier flags as simulate takes them: SGLang's apply with --policy sglang (SGLang's memory plan and radix cache)
_TIERS = GroupUse(TierFlags, help=TIER_HELP)


@with_groups(workload=WorkloadFlags, sessions=SessionFlags, engine=EngineFlags, tiers=_TIERS)
def simulate(
    model: str = typer.Argument(..., help="Bundled model (HF id or alias), a config.json path or a Hub id."),
    gpu: str = typer.Option(..., "--gpu", help="Catalog GPU (see `kvledger gpus`) or a GPU file."),
    workload: WorkloadFlags = WorkloadFlags(),
    sessions: SessionFlags = SessionFlags(),
    engine: EngineFlags = EngineFlags(),
    tiers: TierFlags = TierFlags(),
    as_json: bool = typer.Option(False, "--json", help="Print JSON for scripts."),
    out: Path | None = typer.Option(None, "--out", help="Write records.parquet (every request, token times included; "
                                                        "goodput and cost read it), steps.parquet (every engine step) "
                                                        "and summary.json here."),
    force: bool = typer.Option(False, "--force", help="Allow --out to overwrite existing files."),
    chrome_trace: bool = typer.Option(False, "--chrome-trace", help="With --out, also write trace.json "
                                                                    "(chrome://tracing / Perfetto; one JSON document, "
                                                                    "large for long runs)."),
    record_token_times: bool = typer.Option(False, "--record-token-times", help="Keep every token time of every "
                                                                                "request (on with --out: the records "
                                                                                "file carries them for ITL SLOs). Off, "
                                                                                "memory follows the active requests "
                                                                                "and the ITL distribution is still "
                                                                                "exact."),
) -> None:
    """Simulate serving a trace or multi-turn sessions: TTFT/ITL/TPOT/E2E distributions, throughput, KV usage,
    preemptions, prefix-cache hits; with a host KV tier, the hit rate, loads and TTFT per tier."""
    from kvledger.analyses.serving.sim_ledgers import prepare_run, simulate_document
    from kvledger.cli.sim_opts import sim_request
    from kvledger.cli.tier_opts import check_session_flags, tier_settings, tiers_given

    session_run = check_session_flags(sessions, workload)
    args, synthetic = sim_request(model, gpu, workload, engine)
    tier = tier_settings(tiers, engine_flag="--policy") if tiers_given(tiers) else None
    if out is not None:
        from kvledger.cli.outputs import prepare_output_dir

        prepare_output_dir(out, OUT_FILES, force=force, inputs=[args.trace, args.step_cost])
    if session_run:
        from kvledger.analyses.serving.sim_tiers import (
            DEFAULT_SESSION_RATE,
            DEFAULT_SESSIONS,
            prepare_sessions,
            session_args,
        )

        n, rate = sessions.sessions, sessions.session_rate
        args, cap_source = session_args(args)  # offload's session default when --max-model-len is not given
        setup = prepare_sessions(args, sessions.session_workload, DEFAULT_SESSIONS if n is None else n,
                                 DEFAULT_SESSION_RATE if rate is None else rate, cap_source)
    else:
        setup = prepare_run(args, synthetic)
    keep_times = record_token_times or out is not None
    tier_report = None
    if tier is not None:
        from kvledger.analyses.serving.sim_ledgers import finish_run
        from kvledger.analyses.serving.sim_tiers import run_with_tier

        result, tier_report = run_with_tier(setup, tier, record_steps=out is not None, record_token_times=keep_times)
        result = finish_run(setup, args, result, synthetic).result
    else:
        result = _run(setup, args, record_steps=out is not None, show_progress=not as_json,
                      record_token_times=keep_times)
    payload = simulate_document(setup, result)
    doc = payload.to_dict() if tier_report is None else {**payload.to_dict(), "kv_tiers": tier_report.to_dict()}
    if out is not None:
        _write_outputs(out, result, doc, chrome_trace)
    if as_json:
        typer.echo(strict_json.dumps(doc, indent=2))
    else:
        from rich.console import Console

        from kvledger.report.simulate_view import render_summary

        render_summary(payload, Console(), out)
        if tier_report is not None:
            from kvledger.report.sim_tiers_view import render_sim_tiers

            render_sim_tiers(tier_report, Console(), sessions=session_run,
                             workload=sessions.session_workload if session_run else "")


def _run(setup, args, record_steps: bool, show_progress: bool, record_token_times: bool):
    """The simulator's result; its records carry the GPU count, offered rate and max_num_seqs (for `kvledger cost`)."""
    from rich.console import Console

    from kvledger.analyses.serving.sim_ledgers import run_prepared

    console = Console(stderr=True)  # a bar on a terminal only: elsewhere rich leaves a blank line on stdout
    if not show_progress or setup.num_requests < 5000 or not console.is_terminal:
        return run_prepared(setup, args, record_steps=record_steps, record_token_times=record_token_times).result
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    with Progress(TextColumn("simulating"), BarColumn(), TextColumn("{task.completed:,}/{task.total:,} requests"),
                  TimeElapsedColumn(), transient=True, console=console) as bar:
        task = bar.add_task("sim", total=setup.num_requests)
        return run_prepared(setup, args, record_steps=record_steps, record_token_times=record_token_times,
                            progress=lambda done, total: bar.update(task, completed=done, total=total)).result


def _write_outputs(out: Path, result, doc: dict, chrome_trace: bool) -> None:  # doc: the --json document
    """Write the files, each atomically (temporary file + rename): a failure leaves no half-written file."""
    from kvledger.dynamics.outputs.steps_parquet import write_steps_parquet
    from kvledger.evidence.records_parquet import write_parquet
    from kvledger.outputs import write_atomic, write_text_atomic

    write_atomic(out / "records.parquet", lambda tmp: write_parquet(result.records, tmp))
    write_atomic(out / "steps.parquet", lambda tmp: write_steps_parquet(result.steps, tmp))
    if chrome_trace:
        write_text_atomic(out / "trace.json", strict_json.dumps(result.chrome_trace()))
    elif (out / "trace.json").is_file() and not (out / "trace.json").is_symlink():
        # an earlier run's trace (an input there was refused before the work): the folder holds one run only
        (out / "trace.json").unlink()
    write_text_atomic(out / "summary.json", strict_json.dumps(doc, indent=2))


def register(app: typer.Typer) -> None:
    app.command("simulate")(simulate)
