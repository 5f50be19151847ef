"""What ``validate`` and ``calibrate`` say of a run's own launch record: the file it was read from, the KV pool note
with the record named as the source of what it gave, and the recorded settings a flag given on the command line
replaces."""

from __future__ import annotations

from pathlib import PurePath
from typing import Any

from kvledger.analyses.serving import notes as N
from kvledger.calibration.served_by import other_server_note

__all__ = ["record_name", "pool_note", "overridden", "record_overrides"]

#: the serving engines a benchmark file's ``backend`` names that kvledger replays, by the name its --engine takes
_ENGINES = {"vllm": "vLLM", "sglang": "SGLang"}


def record_name(run: Any) -> str:
    """The file the run's launch settings were read from: its reader's record file (LLMServingSim: meta.json beside
    requests.jsonl) when it names one, else the run's own file."""
    extra = run.measured.metadata.extra if run.measured is not None else {}
    return str(extra.get("record_file") or run.source)


def pool_note(note: str, setup: Any, record: str, taken: dict[str, Any], given: str | None = None) -> str:
    """The simulation's "KV pool: …" note with the record named as the source of what it gave (from_plan.py writes it
    as if every setting came from a flag or a default), or ``given``, where the block count came from (--startup-log:
    the log, its figure and line)."""
    plan, config = setup.plan, setup.config
    m = plan.memory
    if not note.startswith("KV pool: ") or m.engine != "vllm":
        return note
    limits = [k for k in ("max_model_len", "max_num_batched_tokens", "max_num_seqs") if k in taken]
    if "num_gpu_blocks_override" in taken:  # the record's file name here; the note above names it in full
        pool = N.pool_from_override(m, f"num_gpu_blocks_override in the run's record ({PurePath(record).name})")
    elif plan.settings.num_gpu_blocks_override:
        pool = N.pool_from_override(m, given or "--num-gpu-blocks-override")
    else:
        pool = N.pool_from_plan(m)
    said = (f"{', '.join(limits)}: the run's record; the others a flag or the engine's default" if limits
            else "engine defaults unless set")
    return N.kv_pool(pool, N.limits(m, said if len(limits) < 3 else "all three from the run's record", config=config))


def record_overrides(args: Any, rec: Any, run: Any) -> list[str]:
    """What the command line replaces of the run's own record (``overridden``), and a WARNING when --engine (or
    --batching sglang) names another engine than the benchmark file's ``backend`` (``rec.backend``): the replay then
    runs another scheduler and memory plan than the one measured."""
    out = []
    given = "sglang" if "sglang" in (args.policy, args.batching) else "vllm" if args.policy == "vllm" else None
    if rec.backend in _ENGINES and given is not None and given != rec.backend:
        out.append(f"WARNING: --engine {given} replays the run with {_ENGINES[given]}'s scheduler and memory plan, but "
                   f"{run.source} names {_ENGINES[rec.backend]} as the server it measured (backend "
                   f"\"{rec.backend}\"): the errors are those of another engine than the one that ran; drop --engine "
                   "to replay the engine the file names")
    extra = run.measured.metadata.extra if run.measured is not None else {}
    if other := other_server_note(extra, _ENGINES[given or "vllm"]):
        out.append(other)
    if over := overridden(args, rec):
        out.append(f"the command line overrides the run's own record ({record_name(run)}): {over}; the replay is of "
                   "the flags, not of what ran")
    return out + _log_against_record(args, rec, run)


def _log_against_record(args: Any, rec: Any, run: Any) -> list[str]:
    """Where --startup-log set the pool (``args.kv_pool_source``) and the run's record states a block count too: that
    they agree, or by how many blocks they disagree and that the log's is used (given on the command line, it wins as
    a flag does)."""
    recorded, n = rec.flags.get("num_gpu_blocks_override"), args.num_gpu_blocks_override
    if not args.kv_pool_source or recorded is None or n is None:
        return []
    where = record_name(run)
    if int(recorded) == n:
        return [f"the run's record ({where}) gives the same block count as the start-up log: num_gpu_blocks "
                f"{n:,}"]
    return [f"WARNING: the run's record ({where}) gives num_gpu_blocks {int(recorded):,}, the start-up log {n:,} "
            f"({n - int(recorded):+,} blocks): they disagree, and the log's is used (--startup-log wins, as a flag "
            "does); is the log that of the server that was measured? Drop --startup-log to replay the record's pool"]


def overridden(args: Any, rec: Any) -> str:
    """The recorded settings a flag given on the command line replaces, in words ("engine_version 0.19.0 → 0.11.0"),
    each compared as read (a token count parsed, "8K" = 8,192; a vLLM version normalised, "0.19" = 0.19.0); "" when
    none (a flag equal to the record replaces nothing)."""
    logged = ("num_gpu_blocks_override",) if args.kv_pool_source else ()  # --startup-log: said by its own note
    pairs = [(k, _read(k, v), _read(k, getattr(args, k))) for k, v in rec.flags.items()
             if k != "kv_cache_dtype" and k not in logged]
    if rec.engine_version is not None:
        pairs.append(("engine_version", _read("engine_version", rec.engine_version),
                      _read("engine_version", args.engine_version)))
    return ", ".join(f"{k} {v} → {given}" for k, v, given in pairs if given is not None and given != v)


_TOKEN_FLAGS = ("max_model_len", "max_num_batched_tokens")


def _read(key: str, value: Any) -> Any:
    """A setting as the replay reads it, for comparing a flag with the record (unparseable: the text itself; the
    replay refuses it elsewhere)."""
    from kvledger.errors import InputError

    if value is None:
        return None
    try:
        if key in _TOKEN_FLAGS:
            from kvledger.units import parse_tokens

            return parse_tokens(value)
        if key == "engine_version":
            from kvledger.accounting.vllm_rules import parse_version

            return ".".join(map(str, parse_version(str(value))))
    except InputError:
        return str(value)
    return value
