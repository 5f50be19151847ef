"""The body of ``kvledger simulate``, free of typer: the typer command (``simulate_cmd.py``) and the console entry
point's quick path (``quick_argv.py``, which reads a plain simulate command line without typer) both call
:func:`run_simulate` with the parsed options and the filled flag groups."""

from __future__ import annotations

import sys
from pathlib import Path

from kvledger import strict_json
from kvledger.cli.broken_pipe import will_end_with
from kvledger.cli.flag_groups import EngineFlags, TierFlags, WorkloadFlags
from kvledger.cli.session_flags import SessionFlags

__all__ = ["OUT_FILES", "run_simulate", "simulate_inputs"]

OUT_FILES = ("records.parquet", "steps.parquet", "trace.json", "summary.json")


def run_simulate(model: str, gpu: str, workload: WorkloadFlags, sessions: SessionFlags, engine: EngineFlags,
                 tiers: TierFlags, as_json: bool, out: Path | None, force: bool, chrome_trace: bool,
                 record_token_times: bool, seeds: int = 1, dp=None) -> None:
    """Simulate and print (``--json``: the document on stdout, as ``typer.echo`` writes it; else the rich summary);
    with ``out``, write the files there. The options are those of ``simulate_cmd.simulate``; ``seeds`` > 1 runs the
    same simulation with seeds seed … seed+seeds−1 after the first and adds each figure's min–max over them
    (``analyses.serving.seed_spread``); the files and the reported figures stay the first seed's. ``dp``: the
    ``SimDataParallelFlags`` (vLLM's DP ranks of a MoE model in lock-step: analyses/serving/sim_dp.py)."""
    from kvledger.analyses.serving.sim_run import simulate_payload

    if chrome_trace and out is None:
        from kvledger.errors import InputError

        raise InputError("--chrome-trace writes trace.json into the --out folder: give --out DIR with it")
    from kvledger.cli.outputs import refuse_lone_force

    refuse_lone_force(force, {"--out": out})
    args, prep, tier = simulate_inputs(model, gpu, workload, sessions, engine, tiers, dp)
    if out is not None:
        from kvledger.cli.outputs import paths_in, prepare_output_dir

        prepare_output_dir(out, OUT_FILES, force=force, inputs=[args.trace, args.step_cost, *paths_in(model, gpu,
                                                                                                   workload, engine)])
    keep_times = record_token_times or out is not None
    payload, result = simulate_payload(args, prep, tier, seeds, record_steps=out is not None,
                                       record_token_times=keep_times,
                                       plain=None if as_json else _with_progress(out is not None, keep_times))
    doc = payload.to_dict()
    if out is not None:
        _write_outputs(out, result, doc, chrome_trace)
    none_finished = bool(payload.summary["num_requests"] and not payload.summary["num_finished"])
    will_end_with(1 if none_finished else 0)  # kept by a reader that stops reading (`| head -1`)
    if as_json:
        sys.stdout.write(strict_json.dumps(doc, indent=2) + "\n")  # as typer.echo (click.echo) writes it: ASCII JSON
        sys.stdout.flush()
        from kvledger.analyses.serving.sim_document import rejected_said

        if none_finished and (said := rejected_said(payload)):  # why it exits 1 (a note too)
            sys.stderr.write(f"warning: {said}\n")
    else:
        _render(payload, out, gpu, prep.sessions)
    if none_finished:
        sys.exit(1)  # no request finished (every one rejected): an answer a script must not take as complete


def simulate_inputs(model: str, gpu: str, workload: WorkloadFlags, sessions: SessionFlags, engine: EngineFlags,
                    tiers: TierFlags, dp=None):
    """(SimRequestArgs, the ``SimPrepare`` of the run, the host tier's ``TierSettings`` or None) from simulate's flag
    groups, checked as the command checks them (``kvledger.simulate`` calls it with the same groups).

    Raises:
        InputError: session flags without ``--workload`` or with workload flags sessions ignore, unreadable or
            too large tier sizes, a DP group the rest refuses; whatever ``sim_request`` refuses.
    """
    from kvledger.analyses.serving.sim_run import SessionDraw, SimPrepare
    from kvledger.cli.sim_opts import sim_request
    from kvledger.cli.tier_opts import check_session_flags, check_tier_sizes, tier_settings, tiers_given, with_hicache

    session_run = check_session_flags(sessions, workload)
    args, synthetic = sim_request(model, gpu, workload, engine)
    tier = tier_settings(tiers, engine_flag="--policy") if tiers_given(tiers) else None
    args = with_hicache(_with_dp(args, dp, session_run, tier), tier)  # HiCache also sets the prefill-graph rule
    check_tier_sizes(tier, args.gpu, args.tp)
    if not session_run:
        return args, SimPrepare(synthetic, None, None), tier
    from kvledger.analyses.serving.sim_tiers import session_args

    args, cap_source = session_args(args)  # offload's session default when --max-model-len is not given
    draw = SessionDraw(sessions.session_workload.strip().lower(), sessions.sessions, sessions.session_rate)
    return args, SimPrepare(synthetic, draw, cap_source), tier


def _with_dp(args, dp, session_run: bool, tier):
    """``args`` with ``--data-parallel-size`` (above 1), checked (``dp_flags.with_dp``); unchanged without it."""
    from kvledger.cli.dp_flags import with_dp

    return with_dp(args, dp, "the session flags" if session_run else "the host KV tier flags" if tier is not None
                   else None)


def _render(payload, out: Path | None, gpu: str, sessions) -> None:
    from rich.console import Console

    from kvledger.report.simulate_view import render_summary

    render_summary(payload, Console(emoji=False), out)
    from kvledger.report.tables import print_gpu_alias_note

    print_gpu_alias_note(Console(emoji=False), gpu)
    if payload.kv_tiers is not None:
        from kvledger.report.sim_tiers_view import render_sim_tiers

        render_sim_tiers(payload.kv_tiers, Console(emoji=False), sessions=sessions is not None,
                         workload=sessions.kind if sessions is not None else "")


def _with_progress(record_steps: bool, record_token_times: bool):
    """The plain run with a progress bar on a terminal for 5,000 requests or more (``sim_run.PlainRun``); its records
    carry the GPU count, offered rate and max_num_seqs (for `kvledger cost`)."""
    from kvledger.analyses.serving.sim_ledgers import run_prepared

    def run(setup, args):
        if setup.num_requests < 5000:  # no bar: rich is not imported
            return run_prepared(setup, args, record_steps=record_steps, record_token_times=record_token_times).result
        from rich.console import Console

        console = Console(stderr=True)  # a bar on a terminal only: elsewhere rich leaves a blank line on stdout
        if not console.is_terminal:
            return run_prepared(setup, args, record_steps=record_steps, record_token_times=record_token_times).result
        from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

        with Progress(TextColumn("simulating"), BarColumn(), TextColumn("{task.completed:,}/{task.total:,} requests"),
                      TimeElapsedColumn(), transient=True, console=console) as bar:
            task = bar.add_task("sim", total=setup.num_requests)
            return run_prepared(setup, args, record_steps=record_steps, record_token_times=record_token_times,
                                progress=lambda done, total: bar.update(task, completed=done, total=total)).result

    return run


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


