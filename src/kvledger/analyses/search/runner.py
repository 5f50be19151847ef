"""Runs a configuration search: plans every candidate, farms the capacity searches out (in process, a process pool or
Ray tasks), keeps the ledger file, resumes it.

Determinism: every capacity search is a pure function of (spec, candidate) — seeded workload,
no wall clock — and the ledger is written in candidate order at the end, so 1 or N workers, a
pool or Ray give the same file byte for byte. While the search runs, each finished entry is
appended to the ledger file as it arrives, so an interrupted search keeps what it finished;
``resume=True`` reads that file (its header must describe the same search), keeps the
finished entries and redoes only the rest (and those whose worker failed), deciding every candidate as the fresh
run did (``prune.rounds``), so its result is the fresh run's. The backends are ``kvledger.analyses.search.backends``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from kvledger.analyses.search.backends import pool_backend, ray_backend, serial_backend
from kvledger.analyses.search.ledger_file import (
    LEDGER_FORMAT,
    ledger_header,
    ledger_line,
    read_ledger,
    resumable_entries,
    write_whole,
)
from kvledger.analyses.search.order import ranked
from kvledger.analyses.search.prune import rounds, screen_by_bounds
from kvledger.analyses.search.rank import SearchResult, build_result
from kvledger.analyses.search.ray_connect import check_ray_address
from kvledger.analyses.search.screen import screen_candidate
from kvledger.analyses.search.spec import Axes, Candidate, SearchSpec, make_candidates
from kvledger.analyses.search.unit_cap import DEFAULT_MAX_GPUS_PER_REPLICA, cap_candidates, cap_note
from kvledger.errors import InputError
from kvledger.ranges import check_options

__all__ = ["BACKENDS", "LEDGER_FORMAT", "run_search", "read_ledger", "plan_candidates", "ray_available",
           "default_workers", "POOL_MIN_CANDIDATES"]

BACKENDS = ("auto", "serial", "pool", "ray")
Progress = Callable[[dict[str, Any], int, int, int, "dict[str, Any] | None"], None]


def ray_available() -> bool:
    """True when the optional Ray extra is installed (``pip install 'kvledger[ray]'``)."""
    import importlib.util

    return importlib.util.find_spec("ray") is not None


def plan_candidates(spec: SearchSpec, axes: Axes) -> list[Candidate]:
    """The candidates of the search (axes × defaults); checks the spec and the API row first (cheap errors first)."""
    from kvledger.catalog.api_match import find_api_price
    from kvledger.catalog.models import load_model

    spec.check()
    if spec.api is not None:
        find_api_price(spec.api)
    model = load_model(spec.model)
    from kvledger.analyses.serving.retention_flag import check_model_groups

    check_model_groups(spec.prefix_cache_retention_interval, model, spec.engine_version)  # not every candidate
    if axes.expert_parallel == (True,):  # --enable-expert-parallel for a dense model: refused as plan refuses it
        from kvledger.accounting.expert_parallel import expert_parallel_notes
        from kvledger.accounting.settings import make_settings

        expert_parallel_notes(model, make_settings(tp=2, enable_expert_parallel=True))
    cands = make_candidates(axes, model.num_kv_heads, spec.gpu_provider, moe=model.is_moe, model=model)
    from kvledger.analyses.search.given_price import check_given_prices

    check_given_prices(spec, cands)  # a GPU file needs a price; a listed price needs a searched GPU
    return cands


POOL_MIN_CANDIDATES = 8
"""Fewest candidates to simulate for which the default --workers starts a process pool (``default_workers``)."""


def usable_cores() -> int:
    """The CPU cores this process may run on (its affinity mask where the OS has one), at least 1."""
    import os

    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


def default_workers(num_to_simulate: int) -> int:
    """Workers when the caller names none: one per usable core, at most one per candidate to simulate; 1 (in process)
    for fewer than ``POOL_MIN_CANDIDATES`` candidates, where a pool's start-up (each spawned process imports kvledger,
    about a second) would cost more than it saves. The ledger is byte-identical for any number (module docstring)."""
    if num_to_simulate < POOL_MIN_CANDIDATES:
        return 1
    return max(1, min(usable_cores(), num_to_simulate))


def _backend(backend: str, workers: int, address: str | None) -> Callable[..., Iterator[dict[str, Any]]]:
    if backend not in BACKENDS:
        raise InputError(f"unknown backend {backend!r}; use one of {', '.join(BACKENDS)}")
    check_options("search", {"workers": workers})  # [1, 4,096] workers: kvledger.ranges
    if backend == "auto":
        backend = (
            "ray" if address is not None or (workers > 1 and ray_available()) else ("pool" if workers > 1 else "serial")
        )
    if backend == "ray" and not ray_available():
        raise InputError("Ray is not installed: pip install 'kvledger[ray]' (or run without --ray-address: a local "
                         "process pool runs the same search)")
    if address is not None and backend != "ray":
        raise InputError("--ray-address needs the Ray backend")
    if backend == "serial" and workers > 1:  # it runs one capacity search at a time: the count is not silently dropped
        raise InputError(f"--workers {workers} with --backend serial: serial runs one capacity search at a time, in "
                         f"process; drop --workers, or use --backend pool (or auto) to run {workers} at once")
    return {"serial": serial_backend, "pool": pool_backend, "ray": ray_backend}[backend]


def _planned(spec: SearchSpec, cands: list, record: Any) -> list[dict[str, Any]]:
    """The planned entries of the candidates, in candidate order; the others' entries (rejected, no price, ...) go to
    ``record`` as they are screened."""
    todo = []
    for c in cands:
        e = screen_candidate(spec, c)
        if e["status"] == "planned":
            todo.append(e)
        else:
            record(e)
    return todo


def _batches(spec: SearchSpec, cands: list, done: dict[str, Any], record: Any, exhaustive: bool,
             start: Callable[[int, int], None] | None = None) -> tuple[Any, int]:
    """(the batches to simulate, how many candidates they hold). A resumed ledger's results (``done`` so far) are
    screened and batched again as the fresh run did them (``prune.rounds``), so every decision is the fresh run's, but
    they are neither recorded again nor simulated. ``start(planned, to_simulate)`` is told the counts once screened,
    before any simulation (candidates planned; those left to simulate, at most: a round may still settle some)."""
    kept = frozenset(done)

    def settle(e: dict[str, Any]) -> None:
        if e["id"] not in kept:
            record(e)

    todo = screen_by_bounds(spec, _planned(spec, cands, settle), cands, settle, exhaustive)
    n_todo = sum(e["id"] not in kept for e in todo)
    if start is not None:
        start(len(cands), n_todo)
    if exhaustive:
        return iter([[e for e in todo if e["id"] not in kept]]), n_todo

    def feasible_now() -> list[dict[str, Any]]:  # in candidate order, never in finish order
        return [done[c.id] for c in cands if c.id in done and done[c.id]["status"] == "feasible"]

    return rounds(spec, todo, {c.id: n for n, c in enumerate(cands)}, feasible_now, settle, kept), n_todo


def run_search(spec: SearchSpec, axes: Axes, *, workers: int | None = 1, backend: str = "auto",
               ray_address: str | None = None, ledger: Path | None = None, resume: bool = False,
               progress: Progress | None = None, exhaustive: bool = False,
               max_gpus_per_replica: int | None = DEFAULT_MAX_GPUS_PER_REPLICA, start: Any = None) -> SearchResult:
    """Plan, bound, simulate, rank; returns the SearchResult. ``ledger`` is written as entries finish and rewritten in
    candidate order at the end; with ``resume`` its finished entries are kept (see the module docstring).
    ``exhaustive``: simulate every planned candidate, none decided by its bounds (``kvledger.analyses.search.prune``).
    ``start(planned, to_simulate)``: told the candidate counts before any simulation (``_batches``).
    ``workers`` None: ``default_workers`` of the candidates left to simulate (the CLI's default).
    ``max_gpus_per_replica``: candidates of more GPUs per replica are pruned before planning (``unit_cap``; None: none).

    Raises:
        InputError / UnknownNameError: bad inputs (spec, axes, API row, backend), or a ledger of another search.
    """
    run = _backend(backend, 1 if workers is None else workers, ray_address)  # bad flags fail before any planning
    check_ray_address(ray_address)  # a HOST:PORT nobody listens on, refused in seconds (Ray retries it for minutes)
    cands, over = cap_candidates(plan_candidates(spec, axes), max_gpus_per_replica)
    header = ledger_header(spec, cands)
    done = resumable_entries(ledger, header) if resume and ledger is not None else {}
    fh = None
    if ledger is not None:  # header and kept entries first (replaced whole), then each new entry appended as it ends
        write_whole(ledger, [header, *done.values()])
        fh = ledger.open("a", encoding="utf-8")
    n_feasible = sum(e["status"] == "feasible" for e in done.values())
    kept = [e for e in done.values() if e["status"] == "feasible"]
    best = ranked(kept, {e["id"]: n for n, e in enumerate(kept)})[0] if kept else None

    def record(e: dict[str, Any]) -> None:
        nonlocal n_feasible, best
        done[e["id"]] = e
        if fh is not None:
            fh.write(ledger_line(e))
            fh.flush()
        if e["status"] == "feasible":
            n_feasible += 1
            best = e if best is None else ranked([best, e], {best["id"]: 0, e["id"]: 1})[0]  # the ranking's order
        if progress is not None:
            progress(e, len(done), len(cands), n_feasible, best)

    try:
        batches, n_todo = _batches(spec, cands, done, record, exhaustive, start)
        if workers is None:  # the default: a local pool (Ray's start-up is for a named --workers N or an address)
            workers = default_workers(n_todo) if backend != "serial" else 1
            auto = backend == "auto" and ray_address is None
            run = _backend(("pool" if workers > 1 else "serial") if auto else backend, workers, ray_address)
        for e in run(spec, batches, workers, ray_address):
            record(e)
    finally:
        if fh is not None:
            fh.close()
    entries = [done[c.id] for c in cands]
    if ledger is not None:
        write_whole(ledger, [header, *entries])
    from kvledger.analyses.search.axis_notes import axis_notes

    result = build_result(spec, entries)
    result.notes += axis_notes(spec.model, axes)  # --enable-expert-parallel at TP 1: vLLM ignores it
    result.notes += [n for n in (cap_note(over, max_gpus_per_replica),) if n is not None]
    return result
