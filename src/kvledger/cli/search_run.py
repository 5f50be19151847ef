"""How ``kvledger search`` runs its candidates, for the command and for ``kvledger.search`` alike: the named GPUs
checked before any work (``check_gpus``), then every candidate planned, simulated and priced under a progress bar on a
terminal (none under --json or from the API), with --offload's tier variants and --seeds' per-seed check
(``run_candidates``)."""

from __future__ import annotations

import sys
from typing import Any

from kvledger.cli.flag_groups import EngineFlags
from kvledger.cli.search_flags import SearchRunFlags
from kvledger.cli.search_status import PlainProgress, say_failure

__all__ = ["check_gpus", "run_candidates"]


def _progress_bar(as_json: bool) -> Any:
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    return Progress(TextColumn("candidates"), BarColumn(), MofNCompleteColumn(), TextColumn("{task.fields[status]}"),
                    TimeElapsedColumn(), console=Console(stderr=True), transient=True,
                    disable=as_json or not sys.stderr.isatty())  # on a terminal, never under --json


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


def check_gpus(gpus: tuple[str, ...], e: EngineFlags) -> None:
    """The named GPUs against --gpu-profile (fitted on one of them) and --wddm (``_check_wddm_gpus``), before work."""
    if e.gpu_profile is not None and gpus:
        from kvledger.accounting.gpu_profile_search import check_profile_gpus
        from kvledger.catalog.gpu_file import resolve_gpu

        check_profile_gpus(e.gpu_profile, [resolve_gpu(g).name for g in gpus])
    _check_wddm_gpus(gpus, bool(e.wddm))


def run_candidates(spec: Any, axes: Any, r: SearchRunFlags) -> tuple[Any, list | None]:
    """(the search's result, with --offload's tier variants ranked in; those variants or None) under a progress bar."""
    from kvledger.analyses.search import run_search
    from kvledger.analyses.search.offload_axis import check_prices, check_sizes, offload_pass, parse_offload

    tiers = check_sizes(parse_offload(r.offload), axes.gpus, axes.tps)
    prices = {"host": r.host_memory_usd_per_gib_month, "nvme": r.nvme_usd_per_gib_month}
    with_tiers = bool(check_prices(tiers, prices))
    if r.seeds > 1 and with_tiers:
        from kvledger.errors import InputError

        raise InputError("--seeds re-checks the winner's own capacity search, which --offload's do not run alone")
    with _progress_bar(r.as_json) as bar:
        task = bar.add_task("search", total=None, status="planning")
        plain = PlainProgress(enabled=not r.as_json and not sys.stderr.isatty())  # --json: no progress at all

        def progress(entry: dict[str, Any], done: int, total: int, feasible: int, best: dict[str, Any] | None) -> None:
            say_failure(entry, bar.console)  # at once: a run a dying Ray node ends still names it
            best_text = f"best {best['id']}" if best else "no feasible one yet"
            bar.update(task, completed=done, total=total, status=f"{feasible} feasible; {best_text}")
            plain.update(done, total, f"{feasible} feasible; {best_text}")

        result = run_search(spec, axes, workers=r.workers, backend=r.backend, ray_address=r.ray_address,
                            ledger=r.resume if r.resume is not None else r.ledger, resume=r.resume is not None,
                            progress=progress, exhaustive=r.exhaustive)
    variants = None
    if with_tiers:  # tier variants ranked with the rest (analyses/search/tier_entries.py)
        from kvledger.analyses.search.rank import build_result

        variants = offload_pass(spec, result.entries, tiers, prices)
        from kvledger.analyses.search.axis_notes import axis_notes

        result = build_result(spec, result.entries + variants)
        result.notes += axis_notes(spec.model, axes)  # as run_search adds them
    if r.seeds > 1:  # the winner and the runner-up per seed (analyses/search/seed_check.py)
        from kvledger.analyses.search.seed_check import attach_seed_check

        attach_seed_check(result, r.seeds)
    return result, variants
