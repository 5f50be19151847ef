"""Which deployment served a run: the launch record its reader found (a manifests.yaml, a launch record, or the
settings a server_info block states), and the model it names.

One rule for every command that joins runs into one sweep (``validate --sweep``, ``goodput --target``): runs whose
launch records differ come from different deployments, and so do runs of different models.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kvledger.errors import InputError
from kvledger.evidence.metadata_keys import OWN_KEYS_SUFFIX, RECORD_SUFFIX

__all__ = ["launch_record", "refuse_mixed_sweep"]


def launch_record(metadata: Any, ignore: tuple[str, ...] = ()) -> str | None:
    """The run's launch record: the record file its reader found, or the settings of the server_info block (or the
    result's own top-level keys) the file carries (those a start profiles for itself, max_total_tokens, and those in
    ``ignore``, left out); None when the run names neither."""
    where = metadata.extra.get("record_file") if metadata is not None else None
    inline = where.endswith(("server_info", RECORD_SUFFIX, OWN_KEYS_SUFFIX)) if where else False
    kw = metadata.extra.get("engine_kwargs") if inline else None
    kw = {k: v for k, v in (kw or {}).items()  # a start's own profiling is not a setting; a swept one is the axis
          if k != "max_total_tokens" and k not in ignore}
    how = "server_info" if where and where.endswith("server_info") else "the result's top-level keys"
    return f"the settings {sorted(kw.items(), key=str)} ({how})" if inline else where


def _named(run: Any) -> str:
    md = run.metadata
    label = md.extra.get("run_label")
    return f"{Path(md.source).name} [{label}]" if label else Path(md.source).name


def _gpu(metadata: Any, counted: bool) -> str | None:
    """The run's GPU as the catalog names it (the file's own words for one it does not know), with the GPU count
    where every run of the sweep states one; None when the run names no GPU."""
    name = metadata.hardware
    if not name:
        return None
    from kvledger.catalog.gpus import get_gpu
    from kvledger.errors import KvLedgerError

    try:
        name = get_gpu(name).name
    except KvLedgerError:
        name = name.strip()
    return f"{name} × {metadata.num_gpus}" if counted else name


def refuse_mixed_sweep(runs: list[Any], what: str, axis: str | None = None) -> None:
    """Refuse runs that cannot be one deployment's load sweep: two models named (both known), two GPUs named (or GPU
    counts, where every run states one), or two launch records
    (every run naming one, as ``validate --sweep`` requires), saying which files belong together.

    Args:
        runs: RunRecords or AggregateRun, each with ``metadata``.
        what: the flag and what it does, the sentence's subject, e.g. "--target finds the SLO boundary".
        axis: the setting the sweep varies (``max_num_seqs``), left out of the launch records compared.

    Raises:
        InputError: the groups of files, by model or by launch record, and what to do instead.
    """
    models = {run.metadata.model for run in runs}
    counted = all(run.metadata.num_gpus for run in runs)
    gpus = {_gpu(run.metadata, counted) for run in runs}
    if len(models - {None}) > 1:
        by, were, key = "model", "are of different models", (lambda run: run.metadata.model or "model not stated")
    elif len(gpus - {None}) > 1:  # calibrate refuses mixed GPUs alike: one sweep is one deployment's hardware
        by, were, key = "GPU", "ran on different GPUs", (lambda run: _gpu(run.metadata, counted) or "GPU not stated")
    else:
        ignore = (axis,) if axis else ()
        records = {launch_record(run.metadata, ignore) for run in runs}
        if len(records) < 2 or None in records:
            return
        by, were = "launch record", "were launched by different records"
        key = (lambda run: launch_record(run.metadata, ignore))  # noqa: E731
    groups: dict[str, list[str]] = {}
    for run in runs:
        groups.setdefault(key(run), []).append(_named(run))
    listed = "; ".join(f"{k}: {', '.join(v)}" for k, v in sorted(groups.items()))
    raise InputError(f"{what} over the load stages of one deployment; these runs {were}, so the sweep would mix "
                     f"deployments. By {by}: {listed}. Give one group's files per call.")
