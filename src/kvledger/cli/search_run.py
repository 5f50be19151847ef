"""How ``kvledger search`` runs its candidates: the run path of ``analyses/search/search_run.py`` (shared with
``kvledger.search``) under a progress bar on a terminal, plain progress lines on stderr where stderr is not one or
under --json (the document on stdout untouched)."""

from __future__ import annotations

import sys
from functools import partial
from typing import Any

from kvledger.analyses.search.search_run import SearchRun
from kvledger.analyses.search.search_run import check_gpus as _check_gpus
from kvledger.analyses.search.search_run import run_candidates as _run_candidates
from kvledger.cli.flag_groups import EngineFlags
from kvledger.cli.search_flags import SearchRunFlags
from kvledger.cli.search_status import PlainProgress, say_failure, say_start

__all__ = ["check_gpus", "run_candidates", "search_run_of"]


def _progress_bar(as_json: bool) -> Any:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("candidates"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[status]}"),
                    TimeElapsedColumn(), console=Console(stderr=True), transient=True,
                    disable=as_json or not sys.stderr.isatty())  # on a terminal, never under --json


def check_gpus(gpus: tuple[str, ...], e: EngineFlags) -> None:
    """The named GPUs against --gpu-profile and --wddm, before work (``analyses.search.search_run.check_gpus``)."""
    _check_gpus(gpus, e.gpu_profile, bool(e.wddm))


def search_run_of(r: SearchRunFlags) -> SearchRun:
    """The run settings of the run group's flags (--resume FILE: that ledger, continued)."""
    return SearchRun(workers=r.workers, backend=r.backend, ray_address=r.ray_address,
                     ledger=r.resume if r.resume is not None else r.ledger, resume=r.resume is not None,
                     exhaustive=r.exhaustive, seeds=r.seeds, offload=r.offload,
                     max_gpus_per_replica=r.max_gpus_per_replica,
                     host_memory_usd_per_gib_month=r.host_memory_usd_per_gib_month,
                     nvme_usd_per_gib_month=r.nvme_usd_per_gib_month)


def run_candidates(spec: Any, axes: Any, r: SearchRunFlags) -> tuple[Any, list | None]:
    """(the search's result, with --offload's tier variants ranked in; those variants or None) under a progress bar."""
    with _progress_bar(r.as_json) as bar:
        task = bar.add_task("search", total=None, status="planning")
        # where the bar does not draw (stderr not a terminal, or --json): plain lines on stderr, never on stdout
        plain = PlainProgress(enabled=r.as_json or not sys.stderr.isatty())

        def progress(entry: dict[str, Any], done: int, total: int, feasible: int, best: dict[str, Any] | None) -> None:
            say_failure(entry, bar.console)  # at once: a run a dying Ray node ends still names it
            best_text = f"best {best['id']}" if best else "no feasible one yet"
            bar.update(task, completed=done, total=total, status=f"{feasible} feasible; {best_text}")
            plain.update(done, total, f"{feasible} feasible; {best_text}")

        return _run_candidates(spec, axes, search_run_of(r), progress, partial(say_start, spec))
