"""``kvledger doctor``: read a vLLM server log, compare its start-up figures with the KV-cache ledger, and diagnose
capacity (preemptions at a full KV cache), prefix-cache routing and the TTFT/ITL batching trade-off.

Public API: :func:`diagnose_file` (a path) and :func:`diagnose` (a parsed :class:`~kvledger.evidence.vllm_log.VllmLog`),
both returning a :class:`DoctorReport` with ``to_dict`` for ``--json``. The thresholds and rules are module
constants in ``doctor_capacity`` and ``doctor_traffic``, each with its reason.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kvledger.analyses.doctor.capacity import diagnose_capacity
from kvledger.analyses.doctor.context import DoctorContext, build_context
from kvledger.analyses.doctor.crash import diagnose_crash
from kvledger.analyses.doctor.dp_balance import diagnose_dp_balance
from kvledger.analyses.doctor.dp_startup import diagnose_dp_startup
from kvledger.analyses.doctor.failure import diagnose_failure
from kvledger.analyses.doctor.lifecycle import request_errors_finding, startups, startups_line, stopped_line
from kvledger.analyses.doctor.log_consistency import utilization_contradiction
from kvledger.analyses.doctor.log_gpu import gpu_mismatch
from kvledger.analyses.doctor.log_model import model_mismatch, quantization_mismatch
from kvledger.analyses.doctor.max_len_fix import max_len_fix, override_started
from kvledger.analyses.doctor.replica_note import with_replica_note
from kvledger.analyses.doctor.restarts import restart_lines
from kvledger.analyses.doctor.startup import compare_startup
from kvledger.analyses.doctor.traffic import diagnose_batching, diagnose_prefix_cache
from kvledger.analyses.doctor.types import ComparisonRow, DoctorReport, Finding, StartupComparison
from kvledger.evidence.vllm_log import VllmLog, read_vllm_log, require_vllm
from kvledger.evidence.vllm_log.preemption_counts import preemption_counting

__all__ = ["diagnose", "diagnose_file", "DoctorReport", "Finding", "StartupComparison", "ComparisonRow"]


def _summary(log: VllmLog) -> dict[str, Any]:
    stats = log.stats
    times = [s.time_text for s in stats if s.time_text]
    return {"engine": log.engine, "version": log.version, "version_source": log.version_source,
            "generation": log.generation,
            "rules_version": log.rules_version, "rules_reason": log.rules_reason, "total_lines": log.total_lines,
            "vllm_lines": log.vllm_lines, "skipped_lines": log.skipped_lines, "metrics_lines": len(stats),
            "preemption_lines": len(log.preemptions), "preemption_counting": preemption_counting(log)[0],
            "preemption_counting_words": preemption_counting(log)[1], "first_metrics": times[0] if times else None,
            "last_metrics": times[-1] if times else None, "workers": list(log.startup.workers),
            "startup_fields": log.startup.found(), "notes": list(log.notes)}


def diagnose(log: VllmLog, *, model: str | None = None, gpu: str | None = None, replicas: int = 1,
             prefix_share: float | None = None, engine_version: str | None = None,
             launch: dict[str, Any] | None = None) -> DoctorReport:
    """Every diagnosis for one vLLM log.

    Args:
        model: bundled model name or config.json path (default: the model the log names, when bundled).
        gpu: catalog GPU or GPU file (default: a GPU with the device total the log prints).
        replicas: replicas the traffic is spread over (prefix-cache routing rule).
        prefix_share: fraction of prompt tokens the traffic repeats, 0–1 (prefix-cache rule; None: no verdict).
        engine_version: vLLM version whose ledger rules to apply (default: printed or inferred from the log).
        launch: the server's launch settings for a log that does not print them (``context.build_context``).

    Raises:
        UnsupportedLogError: not a vLLM log. InputError, UnknownNameError, ConfigError: bad options.
    """
    require_vllm(log)
    if engine_version is not None:  # refused as plan refuses it, before anything is read with it
        from kvledger.accounting.vllm_rules import parse_version

        parse_version(engine_version)
    ctx = build_context(log, model=model, gpu=gpu, replicas=replicas, prefix_share=prefix_share,
                        engine_version=engine_version, launch=launch)
    failed = diagnose_failure(ctx) or diagnose_crash(ctx)
    findings = tuple(f for f in (failed, request_errors_finding(log)) if f) + (
        with_replica_note(diagnose_capacity(ctx)), diagnose_prefix_cache(ctx), diagnose_batching(ctx)) + tuple(
        f for f in (diagnose_dp_balance(ctx), diagnose_dp_startup(ctx)) if f)  # only where the log holds two DP
    # engines' metrics lines, or two DP ranks' start-up capacity lines
    mismatch = model_mismatch(log, model, ctx.model) if model and ctx.model else None
    summary = _summary(log)  # the rules the ledger applied (context._settings: the flag's, else the log's)
    summary.update(rules_version=ctx.settings["engine_version"], rules_reason=ctx.sources["engine_version"])
    unfinished = None if failed or log.serving_line is not None or not log.startup.lines else (
        "the log shows no line of the server serving (vLLM's 'Starting vLLM API server', uvicorn's 'Application "
        "startup complete', a metrics line): it ends during start-up — still starting, or cut — so it does not show "
        "that the server started; the figures compared are those it printed before it ends")
    warned = tuple(w for w in (mismatch, quantization_mismatch(log, model, ctx.model), gpu_mismatch(log, gpu, ctx.gpu),
                               version_mismatch(ctx),
                               unfinished, utilization_contradiction(log.startup), _impossible_pct(log),
                               _cut_metrics(log)) if w)
    runs = tuple(startups(log))
    lifecycle = tuple(x for x in (startups_line(log), *restart_lines(log, [r["outcome"] for r in runs[:-1]]),
                                  None if failed else stopped_line(log)) if x)
    return DoctorReport(log.source, summary, ctx.model.name if ctx.model else None,
                        ctx.gpu.name if ctx.gpu else None,
                        compare_startup(ctx), findings, ctx.notes, warned, unfinished=unfinished is not None,
                        stopped=None if failed else log.stopped_line, startups=runs,
                        lifecycle=lifecycle, max_len_fix=max_len_fix(ctx), override_started=override_started(ctx))


def version_mismatch(ctx: DoctorContext) -> str | None:
    """The warning when ``--engine-version`` names another release than the one the log printed (None when none was
    given, the log printed none, or they agree): the ledger then applies another release's rules to this start-up
    (a fresh-user trial: 99.0's rules on a 0.19.0 log, 57.38 GiB against the log's 58.11, "within 2%", unsaid), a
    forecast; or rules that size it as the log's own do (``same_rules``: 0.19.1 on a 0.19.0 log), a check."""
    from kvledger.analyses.doctor.startup_verdicts import MEMORY_TOLERANCE, other_release, same_rules

    if (other := other_release(ctx)) is None:  # a log's version is what ran: compared, never refused
        return None
    given, log = other[0], ctx.log
    head = f"--engine-version {given} is not the vLLM this log printed ({log.version}, {log.version_source}): "
    if same_rules(ctx):
        return (head + f"{given}'s rules size this start-up's memory as {log.version}'s do (the same ledger figures), "
                "so the comparison below is a check of the log against its own release's figures, and a difference "
                f"outside the plan's own range for the KV memory (the {MEMORY_TOLERANCE:.0%} it is validated to "
                "where it gives none) is a miss")
    return (head + f"the log's figures are {log.version}'s own, and the ledger below is a forecast of {given}'s rules "
            f"on this start-up (the settings the log states, {given}'s defaults for the rest), so a difference is the "
            f"upgrade's effect as modelled, not a mismatch; drop --engine-version to check the log against its own "
            f"release")


def diagnose_file(path: str | Path, **options: Any) -> DoctorReport:
    """``diagnose`` on a log file (see ``read_vllm_log`` for the errors it raises on reading)."""
    return diagnose(read_vllm_log(path), **options)


def _impossible_pct(log: VllmLog) -> str | None:
    """The warning for metrics lines whose percentages lie outside 0–100 %, which vLLM never prints (a usage is a
    share of the pool's blocks, a hit rate a share of queried tokens): the log was edited or garbled there."""
    bad = [(s.line_no, name, v) for s in log.stats for name, v in (
        ("GPU KV cache usage", s.gpu_kv_usage_pct), ("CPU KV cache usage", s.cpu_kv_usage_pct),
        ("Prefix cache hit rate", s.prefix_cache_hit_pct)) if v is not None and not 0.0 <= v <= 100.0]
    if not bad:
        return None
    shown = "; ".join(f"line {n}: {name} {v:g}%" for n, name, v in bad[:3]) + ("; …" if len(bad) > 3 else "")
    return (f"{len(bad):,} metrics figure(s) outside 0–100% ({shown}): vLLM never prints such a share, so the log was "
            "edited or garbled there; the findings below read them as printed")


def _cut_metrics(log: VllmLog) -> str | None:
    """The warning for metrics lines not read because a figure every vLLM prints is missing (cut or garbled)."""
    cut = log.cut_metrics
    if not cut:
        return None
    shown = ", ".join(map(str, cut[:5])) + (", …" if len(cut) > 5 else "")
    return (f"{len(cut):,} metrics line(s) cut short or garbled before their Running, Waiting or GPU KV usage figure "
            f"(line {shown}): not read, so the findings below do not take a missing figure as 0")
