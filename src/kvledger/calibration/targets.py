"""Every measured file ``calibrate`` and ``validate`` accept, as fit/compare targets: per-request runs, inference-perf
stage files, and aggregate-only benchmark runs (one per request rate) compared by rate.

A per-request run replays its own requests; a stage or an aggregate run replays a synthetic workload like it
(``kvledger.calibration.sweep``) and is compared on the aggregates it holds. A file with several runs (an SGLang
``bench_serving`` JSONL file of a line per request rate, a vLLM sweep's summary) gives one target per run: the
aggregate ones in rate order, then those with per-request records (``--output-details``) in file order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from kvledger.calibration.aggregate_stage import aggregate_stage, closed_loop_users
from kvledger.calibration.replay import DISTSERVE_PREFIX, MeasuredRun, load_measured, replayable
from kvledger.calibration.stage_launch import sent_at_inf
from kvledger.calibration.sweep import Stage, looks_like_stage, read_stage, stage_run
from kvledger.errors import FormatError, InputError

if TYPE_CHECKING:
    from kvledger.analyses.serving.sim_setup import SimRequestArgs

__all__ = ["Target", "placed", "load_targets", "input_names", "with_record_model", "record_model",
           "not_a_sweep",
           "refuse_repeated", "check_sweep", "pick_run"]


@dataclass
class Target:
    """One run to fit or compare: the replayable run and, for aggregates, the stage it stands for (else None)."""

    run: MeasuredRun
    stage: Stage | None = None
    order: int = 0  # its place among the file's runs (``--run``)
    #: a per-request run's place in a sweep (``record_stage``: its rate, what was sent and served); never compared on
    summary: Stage | None = None

    @property
    def placed(self) -> Stage | None:
        """The stage it stands for in a sweep: an aggregate run's own, a per-request run's ``summary``."""
        return self.stage if self.stage is not None else self.summary


def placed(targets: list[Target]) -> list[Target]:
    """``targets`` with each per-request run's place in a sweep read off its records (``record_stage``)."""
    from kvledger.calibration.record_stage import record_stage

    return [t if t.stage is not None else replace(t, summary=record_stage(t.run)) for t in targets]


def refuse_repeated(paths: list[str]) -> None:
    """Refuse a file given twice (the same file by any path): a sweep's stages would count it as two.

    Raises:
        InputError: the first file named twice, with both spellings.
    """
    import os

    seen: dict[str, str] = {}
    for p in paths:
        key = os.path.realpath(p)
        if key in seen:
            twice = p if seen[key] == p else f"{seen[key]} and {p}"
            raise InputError(f"{twice}: the same file given twice; give each stage or run once")
        seen[key] = p


def input_names(paths: list[str]) -> list[str]:
    """Each input's name in tables and notes (``kvledger.names.file_labels``): its file name without the suffix, or,
    where that name is shared by several inputs (inference-sim/training: every experiment's
    ``<exp>/results/stage_0_lifecycle_metrics.json``), the nearest folder above it that tells them apart with the
    file's short name (``20260217-231439-llama-2-7b-tp1-general/stage_0``).

    >>> input_names(["a/results/stage_0_lifecycle_metrics.json", "b/results/stage_0_lifecycle_metrics.json"])
    ['a/stage_0', 'b/stage_0']

    Raises:
        InputError: a file given twice (``refuse_repeated``): a sweep would count it as two stages, a fit twice.
    """
    from kvledger.names import file_labels

    refuse_repeated(paths)
    return file_labels(paths)


def _aggregates(path: str, seed: int, client_concurrency: int | None, name: str) -> list[Target] | None:
    """The runs in ``path`` as targets, one per run: the aggregate-only ones as stages (rate order), those with
    per-request records replayed as recorded (file order, after them); None for a file of one per-request run, or
    one the benchmark readers do not know (``load_measured`` reads those)."""
    from kvledger.evidence.aggregate import AggregateRun
    from kvledger.evidence.llmservingsim import looks_like_llmservingsim
    from kvledger.evidence.read import read_runs

    p = Path(path)
    if path.startswith(DISTSERVE_PREFIX) or path.endswith(".exp") or not p.is_file() or looks_like_llmservingsim(p):
        return None
    try:
        runs = read_runs(p, aggregate_samples=True)  # a sample of a run's requests is not its load
    except FormatError:
        return None  # not a benchmark file the readers know: load_measured says why
    if not runs or (len(runs) == 1 and not isinstance(runs[0], AggregateRun)):
        return None
    out, timed = [], []
    for i, agg in enumerate(runs):
        rate, cap = agg.metadata.request_rate, agg.metadata.concurrency
        if not isinstance(agg, AggregateRun):  # a per-request line of a file of several (bench_serving JSONL)
            tag = f"{rate:g} req/s" if rate and math.isfinite(rate) else f"{cap:,} clients" if cap else None
            timed.append(Target(replayable(agg, path, f"{name} @ {tag}" if tag else f"{name} #{i}"), order=i))
            continue
        label = f"{name} @ {rate:g} req/s" if rate else f"{name} #{i}"
        users = closed_loop_users(agg, client_concurrency)
        if users is not None:  # under a client cap: named by its clients (rate, place if several)
            tag, rate = agg.metadata.extra.get("run_label"), agg.metadata.request_rate
            paced = f"{rate:g} req/s, ≤ {users[0]:,} in flight" if rate and math.isfinite(rate) else None
            label = f"{name}" + (f" [{tag}]" if tag else "") + f" @ {paced or f'{users[0]:,} clients'}"
        st = aggregate_stage(agg, label, users)
        run = stage_run(st, label, seed + i, client_concurrency)
        _keep_model(run, agg)
        _drawn_lengths(run, agg)
        out.append(Target(run, st, i))
    return sorted(out, key=lambda t: t.stage.requested_rate) + timed


#: the drawn output lengths' mean this far from the file's (total ÷ completed) is said (``_drawn_lengths``)
DRAWN_LENGTH_NOTE = 0.03


def _drawn_lengths(run: MeasuredRun, agg: Any) -> None:
    """Say where the replay's drawn output lengths average ≥ ``DRAWN_LENGTH_NOTE`` away from the file's own mean: the
    throughput in tokens, and the time each request decodes, differ by about that much before any step cost does."""
    done, total = agg.num_completed, agg.total_output_tokens
    if not run.requests or not done or not total:
        return
    drawn, stated = sum(r.num_output_tokens for r in run.requests) / len(run.requests), total / done
    if abs(drawn / stated - 1) >= DRAWN_LENGTH_NOTE:
        run.measured.metadata.extra["drawn_lengths"] = (
            f"output lengths: the replay's {len(run.requests):,} drawn requests average {drawn:,.1f} tokens, the "
            f"file's {done:,} completed ones {stated:,.1f} ({total:,} ÷ {done:,}), {drawn / stated - 1:+.1%}: output "
            "throughput and each request's decode time differ by about that much before any step-cost error")


def _keep_model(run: MeasuredRun, agg: Any) -> None:
    """The model the benchmark file names (vLLM's ``model_id``, AIPerf's served name), kept on the replayed run's
    metadata where nothing beside the file named one (``stage_run`` reads launch records and client configs only), and
    the server's record the file carries (``SERVER_RECORD_KEYS``: settings, their file, the engine's version)."""
    meta = run.measured.metadata
    meta.extra.update({k: agg.metadata.extra[k] for k in ("multi_turn",) if k in agg.metadata.extra})  # its sessions
    if meta.model is None and agg.metadata.model:
        meta.model = agg.metadata.model
        meta.extra["model_source"] = f"the benchmark file ({agg.metadata.source_format})"
    if meta.hardware is None and agg.metadata.hardware:  # the GPU the file states (vLLM bench's "gpu", …)
        meta.hardware = agg.metadata.hardware
        meta.extra["gpu_source"] = f"the benchmark file ({agg.metadata.source_format})"
    if not run.engine_hints and agg.metadata.extra.get("engine_kwargs"):  # the server's own record in the file
        from kvledger.evidence.metadata_keys import SERVER_RECORD_KEYS

        stated = agg.metadata.extra  # all of it, the version too: read as a per-request run's is
        meta.extra.update({k: stated[k] for k in SERVER_RECORD_KEYS if k in stated})


def load_targets(path: str, *, seed: int = 0, client_concurrency: int | None = None,
                 name: str | None = None) -> list[Target]:
    """The targets in ``path`` (module docstring), a stage or aggregate run labelled ``name`` (``input_names``; the
    file name without its suffix by default).

    Raises:
        FormatError / InputError: unreadable file, or nothing in it to compare (the reason named).
    """
    name = name or input_names([path])[0]  # a stage file alone by its folders too (names.stage_label)
    if looks_like_stage(path):
        st = read_stage(path)
        return [Target(stage_run(st, name, seed, client_concurrency), st)]
    agg = _aggregates(path, seed, client_concurrency, name)
    if agg:
        return agg
    return [Target(load_measured(path))]


def record_model(t: Target) -> str | None:
    """The model the run's record names (meta.json's ``model``, a stage's launch record or client config), or None."""
    meta = t.run.measured.metadata if t.run.measured is not None else None
    return meta.model if meta is not None and meta.model else None


def with_record_model(t: Target, args: SimRequestArgs) -> tuple[SimRequestArgs, str | None]:
    """``args`` with the model the run's record names (meta.json's ``model``, a stage's launch record or client
    config.yaml) when ``--model`` was not given, and the note that says where it was read. A --model the user gave
    wins over the record: the note then says what the record names when that differs (None when it agrees or names
    none).

    Raises:
        InputError: neither names one.
    """
    meta = t.run.measured.metadata if t.run.measured is not None else None
    named = record_model(t)
    if args.model:
        if named is None or named.strip().lower() == str(args.model).strip().lower():
            return args, None
        said = f"--model {args.model} replayed, as given; the run's record names {named} (from {_model_source(meta)})"
        other = _other_architecture(str(args.model), named)
        return args, (f"WARNING: {said}, another architecture ({other}): the replay is of a model the run did not "
                      "measure" if other else said)
    if named is None:
        raise InputError(f"{t.run.source}: the run's record names no model; pass --model (the served model)")
    return replace(args, model=named), f"model {named} from {_model_source(meta)} (no --model given)"


@lru_cache(maxsize=64)  # a sweep asks it once per stage, of the same two names
def _other_architecture(given: str, named: str) -> str | None:
    """How two models' shapes differ ("32 layers, 4,096 hidden, 8 KV heads × 128 against 36, 4,096, 8 × 128"), or
    None when they agree or either cannot be read without the Hub (a local checkpoint's path, say)."""
    from kvledger.catalog.models import load_model
    from kvledger.errors import KvLedgerError

    try:
        a, b = load_model(given, allow_hub=False), load_model(named, allow_hub=False)
    except KvLedgerError:
        return None

    def shape(m: Any) -> tuple[int, int, int, int]:
        return m.num_layers, m.hidden_size, m.num_kv_heads, m.head_dim

    if shape(a) == shape(b):
        return None
    (la, ha, ka, da), (lb, hb, kb, db) = shape(a), shape(b)
    return f"{la} layers, {ha:,} hidden, {ka} KV heads × {da} against {lb}, {hb:,}, {kb} × {db}"


def _model_source(meta: Any) -> str:
    """Where the record's model was read: a stage's launch record or client config, meta.json's field."""
    return meta.extra.get("model_source") or next((d.removeprefix("model from ") for d in meta.definitions
                                                   if d.startswith("model from ")),
                                                  f"the run's record ({meta.source_format})")


def not_a_sweep(paths: list[str], staged: int, per_request: int, runs: list[Target] | tuple = ()) -> str:
    """Why the files given to ``--sweep`` (or several files) are not a load sweep: what they hold, what a sweep needs
    (two or more stages with a request rate) and the command to run instead. ``runs``: the per-request runs among
    them, whose models and rates are named when they differ (different deployments, never one sweep)."""
    held = ", ".join(x for x in (f"{staged} load stage" + ("s" if staged != 1 else "") if staged else "",
                                 f"{per_request} per-request run" + ("s" if per_request != 1 else "")
                                 if per_request else "") if x) or "nothing to replay"
    one = ("validate it on its own: kvledger validate " + paths[0] if len(paths) == 1
           else "validate each file on its own (kvledger validate FILE, one per call)")
    head = (f"--sweep (or several files) compares the load stages of one sweep, which needs two or more stages with a "
            f"request rate (inference-perf stage_N_lifecycle_metrics.json files, or benchmark runs at several rates, "
            f"per-request or aggregate); {'this file holds' if len(paths) == 1 else 'these files hold'} {held}")
    if not per_request:
        return f"{head}: give the sweep's other stage files too, or {one} without --sweep"
    named = [t.run.measured.metadata for t in runs if t.run.measured is not None and t.run.measured.metadata.model]
    models = {md.model for md in named}  # a run whose record states no model is not said to differ
    which = "; ".join(f"{t.run.label}: {t.run.measured.metadata.model}" + (
        f" at {t.run.measured.metadata.request_rate:g} req/s" if t.run.measured.metadata.request_rate else "")
        for t in runs if t.run.measured is not None and t.run.measured.metadata.model)
    differ = (f" These are runs of different models ({which}): different deployments, which no sweep mixes."
              if len(models) > 1 else "")
    tail = (f"Validate it on its own: kvledger validate {paths[0]}" if len(paths) == 1
            else "Validate them one at a time (kvledger validate FILE, one file per call)")
    whose = ("whose file states", "it has") if per_request == 1 else ("whose files state", "they have")
    return (f"{head} {whose[0]} neither a request rate nor a client cap (max_concurrency), so {whose[1]} no place on "
            f"a sweep's axis: such a run is replayed request by request and judged on its own.{differ} {tail}.")


def pick_run(targets: list[Target], path: str, run: int | None) -> list[Target]:
    """The ``run``-th of the file's runs in file order (``--run``; all of them when None).

    Raises:
        InputError: ``run`` past the file's runs.
    """
    if run is None:
        return targets
    ordered = sorted(targets, key=lambda t: t.order)
    if run >= len(ordered):
        raise InputError(f"--run {run}: {path} holds {len(ordered)} run(s), numbered from 0")
    return [ordered[run]]


def check_sweep(paths: list[str], stages: list[Target], num_targets: int, runs: list[Target] | tuple = ()) -> None:
    """Refuse what is not a load sweep: fewer than two stages (``not_a_sweep``), or closed-loop stages (runs sent at
    request_rate inf under a client cap, a sweep over clients) mixed with stages at a request rate (a sweep over
    rates; runs at a rate under a cap, paced, are among them): the knee is read on one axis.

    Raises:
        InputError: the reason, with what to run instead.
    """
    if len(stages) < 2:
        raise InputError(not_a_sweep(paths, len(stages), num_targets - len(stages), runs))
    closed = [t.run.label for t in stages if sent_at_inf(t.placed)]
    if closed and len(closed) < len(stages):
        rated = [t.run.label for t in stages if math.isfinite(t.placed.requested_rate)]
        raise InputError(f"{', '.join(closed)}: sent at request_rate inf under a client cap (closed loops of that many "
                         f"clients), and {', '.join(rated)} at a request rate: a sweep reads its knee on one axis, "
                         "the request rate or the clients; validate the two kinds apart (one file each, or --run N "
                         "for run N of a file of several, numbered from 0 in file order)")
