"""The run path of ``kvledger search`` and ``kvledger.search`` alike: the named GPUs checked before any work
(``check_gpus``), every candidate planned, simulated and priced with --offload's tier variants ranked in and --seeds'
per-seed check (``run_candidates``), and the status the answer ends with (``answer_status``). The command draws its
progress bar around it (``cli/search_run.py``); the API runs it as it is."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvledger.analyses.search.unit_cap import CAP_FLAG, DEFAULT_MAX_GPUS_PER_REPLICA

__all__ = ["SearchRun", "check_gpus", "run_candidates", "answer_status"]


@dataclass(frozen=True, slots=True)
class SearchRun:
    """How the candidates run and what is added to them: ``workers``/``backend``/``ray_address`` where the capacity
    searches run (``runner.run_search``), the ``ledger`` written (``resume``: True to continue it), ``exhaustive``,
    ``seeds`` (the winner and runner-up re-checked per seed), ``offload`` (--offload's text: the tier variants) and the
    tiers' prices, USD/GiB-month (None: tier_prices.csv's dated row)."""

    workers: int | None = None
    backend: str = "auto"
    ray_address: str | None = None
    ledger: Path | None = None
    resume: bool = False
    exhaustive: bool = False
    seeds: int = 1
    offload: str | None = None
    host_memory_usd_per_gib_month: float | None = None
    nvme_usd_per_gib_month: float | None = None
    max_gpus_per_replica: int | None = DEFAULT_MAX_GPUS_PER_REPLICA  # unit_cap: candidates over it are pruned


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


def check_gpus(gpus: tuple[str, ...], gpu_profile: str | None, wddm: bool) -> None:
    """The named GPUs against --gpu-profile (fitted on one of them) and --wddm (``_check_wddm_gpus``), before work."""
    if gpu_profile is not None and gpus:
        from kvledger.accounting.gpu_profile_search import check_profile_gpus
        from kvledger.catalog.gpu_file import resolve_gpu

        check_profile_gpus(gpu_profile, [resolve_gpu(g).name for g in gpus])
    _check_wddm_gpus(gpus, wddm)


Progress = Callable[[dict[str, Any], int, int, int, "dict[str, Any] | None"], None]


def run_candidates(spec: Any, axes: Any, r: SearchRun, progress: Progress | None = None,
                   start: Callable[[int, int], None] | None = None) -> tuple[Any, list | None]:
    """(the search's result, with --offload's tier variants ranked in; those variants or None); ``progress`` is told
    each finished candidate, ``start`` the candidates planned and to simulate before any simulation
    (``runner.run_search``'s callbacks).

    Raises:
        InputError: a tier size or price refused (``offload_axis``), or ``seeds`` with tiers, before any candidate.
    """
    from kvledger.analyses.search import run_search
    from kvledger.analyses.search.offload_axis import check_prices, check_sizes, offload_pass, parse_offload

    tiers = check_sizes(parse_offload(r.offload), axes.gpus, axes.tps)
    prices = {"host": r.host_memory_usd_per_gib_month, "nvme": r.nvme_usd_per_gib_month}
    with_tiers = bool(check_prices(tiers, prices))
    if r.seeds > 1 and with_tiers:
        from kvledger.errors import InputError

        raise InputError("--seeds re-checks the winner's own capacity search, which --offload's do not run alone")
    result = run_search(spec, axes, workers=r.workers, backend=r.backend, ray_address=r.ray_address, ledger=r.ledger,
                        resume=r.resume, progress=progress, exhaustive=r.exhaustive,
                        max_gpus_per_replica=r.max_gpus_per_replica, start=start)
    variants = None
    if with_tiers:  # tier variants ranked with the rest (tier_entries.py)
        from kvledger.analyses.search.axis_notes import axis_notes
        from kvledger.analyses.search.rank import build_result

        variants = offload_pass(spec, result.entries, tiers, prices)
        capped = [n for n in result.notes if n.startswith(CAP_FLAG)]
        result = build_result(spec, result.entries + variants)
        result.notes += axis_notes(spec.model, axes) + capped  # as run_search adds them
    if r.seeds > 1:  # the winner and the runner-up per seed (seed_check.py)
        from kvledger.analyses.search.seed_check import attach_seed_check

        attach_seed_check(result, r.seeds)
    return result, variants


def answer_status(result: Any) -> int:
    """The status the search ends with after its output: 1 when a candidate could not be evaluated (a worker failed:
    scripts must not take a ranking with holes for a complete one), 2 when every candidate was refused as a setting
    the engine would refuse (a --tp that divides no candidate's heads, a --max-model-len above the model's: the input
    is bad, not the hardware; a fresh-user trial got exit 0 for --tp 3 on a 64-head model), 3 when every candidate was
    rejected for memory or refused by the engine release on its GPU (its headline says why: a script must not take
    "nothing can start" for a ranking, frontier.none_can_start), 1 when none meets the SLO (no winner: as `goodput
    --target` and `cost` end when no answer meets the target; a trial's script took exit 0 with ``winner: null`` for a
    deployable answer), else 0."""
    from kvledger.analyses.search.frontier import none_can_start

    entries = result.entries
    if any(e["status"] == "error" for e in entries):
        return 1
    if entries and all(e.get("reason") == "invalid setting" for e in entries):
        return 2
    if none_can_start(entries):
        return 3
    return 0 if result.ranking else 1
