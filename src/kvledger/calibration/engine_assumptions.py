"""What a calibration assumed of the engine and its launch, for the profile's notes and its poor-fit hints: the
engine version where no record and no flag states one (``validate`` prints the same notes for the same runs)."""

from __future__ import annotations

from typing import Any

from kvledger.analyses.serving.notes import RELEASE_RULES
from kvledger.analyses.serving.sim_setup import SimRequestArgs, SimSetup
from kvledger.calibration.old_release import OLD_RELEASE

__all__ = ["engine_notes", "launch_given", "launch_recorded"]


def engine_notes(setups: list[SimSetup], args: SimRequestArgs) -> list[str]:
    """The engine assumptions ``validate`` prints for the same runs, for calibrate to print and store in the profile's
    notes: the engine version assumed where neither a run's record (``_with_run_settings``) nor --engine-version
    states one, the async-scheduling note it implies (``from_plan.default_async_scheduling``) and the rules of an
    older SGLang release given (``notes.sglang_release_rules``), and how a run of a vLLM release older than the rules
    read was replayed (``old_release.older_release``), each once."""
    out = []
    for s in setups:
        version = getattr(getattr(s.plan, "memory", None), "engine_version", None)
        if "engine_version" not in s.record_settings and args.engine_version is None and version is not None:
            engine = "vLLM" if s.plan.memory.engine == "vllm" else s.plan.memory.engine
            out.append(f"engine version: no run's record and no --engine-version states one; {engine} {version} "
                       "assumed (kvledger's default), whose defaults the replay and the fit use; pass --engine-version "
                       "as launched")
        out += [n for n in s.notes if n.startswith(("async scheduling", OLD_RELEASE)) or RELEASE_RULES in n
                or (args.kv_pool_source and (n.startswith("KV pool: ") or "the start-up log" in n))]  # --startup-log
    return list(dict.fromkeys(out))


def launch_given(setups: list[SimSetup], args: SimRequestArgs) -> dict[str, Any]:
    """The launch flags a poor fit's hints check (``profile_band.fit_quality``'s ``given``): --max-model-len,
    --engine-version, --max-num-seqs and --max-num-batched-tokens as the user passed them, else as the first run's
    record states them, None where neither."""
    rec = setups[0].record_settings if setups else {}
    return {k: getattr(args, k) if getattr(args, k) is not None else rec.get(k)
            for k in ("max_model_len", "engine_version", "max_num_seqs", "max_num_batched_tokens")}


def launch_recorded(runs: list[Any]) -> dict[str, tuple[Any, str]]:
    """``max_model_len`` and ``engine_version`` as the runs' own launch records state them (the first run that does),
    with the record's file: the replay applied them, so a poor fit's hints do not ask for them again."""
    out: dict[str, tuple[Any, str]] = {}
    for run in runs:
        extra = run.measured.metadata.extra if run.measured is not None else {}
        where = str(extra.get("record_file") or run.source)
        kw = {**(run.engine_hints or {}), **(extra.get("engine_kwargs") or {})}
        for key, v in (("max_model_len", kw.get("max_model_len")), ("engine_version", extra.get("vllm_version"))):
            if v is not None:
                out.setdefault(key, (v, where))
    return out
