"""Runs a configuration search: plans every candidate, farms the capacity searches out (in process, a process pool or
Ray tasks), keeps the ledger file, resumes it.

Determinism: every capacity search is a pure function of (spec, candidate) — seeded workload,
no wall clock — and the ledger is written in candidate order at the end, so 1 or N workers, a
pool or Ray give the same file byte for byte. While the search runs, each finished entry is
appended to the ledger file as it arrives, so an interrupted search keeps what it finished;
``resume=True`` reads that file (its header must describe the same search), keeps the
finished entries and redoes only the rest (and those whose worker failed). A worker failure
(an exception inside a task, a crashed process) becomes that candidate's entry with status
``error`` and reason ``worker failed``; the others go on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from kvledger.analyses.search.evaluate import evaluate_candidate
from kvledger.analyses.search.ledger_file import (
    LEDGER_FORMAT,
    ledger_header,
    ledger_line,
    read_ledger,
    resumable_entries,
    write_whole,
)
from kvledger.analyses.search.prune import rounds, screen_by_bounds
from kvledger.analyses.search.rank import SearchResult, build_result, rank_key
from kvledger.analyses.search.ray_connect import check_ray_address, start_ray
from kvledger.analyses.search.screen import screen_candidate
from kvledger.analyses.search.spec import Axes, Candidate, SearchSpec, make_candidates
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
    if axes.expert_parallel == (True,):  # --enable-expert-parallel for a dense model: refused as plan refuses it
        from kvledger.accounting.expert_parallel import expert_parallel_notes
        from kvledger.accounting.settings import make_settings

        expert_parallel_notes(model, make_settings(tp=2, enable_expert_parallel=True))
    cands = make_candidates(axes, model.num_kv_heads, spec.gpu_provider, moe=model.is_moe, model=model)
    from kvledger.analyses.search.given_price import check_given_prices

    check_given_prices(spec, cands)  # a GPU file needs a price; a listed price needs a searched GPU
    return cands


Batches = Iterator[list[dict[str, Any]]]
IN_FLIGHT = 2
"""Batches a pool or Ray keeps in flight: the next one is asked for when the oldest has finished, so the workers never
wait at a batch's end; ``prune.rounds`` decides each batch without the results of the one before it, which may still
be running, so the decisions (and the ledger) do not depend on the backend or the number of workers."""
POOL_MIN_CANDIDATES = 8
"""Fewest candidates to simulate for which the default --workers starts a process pool (``default_workers``)."""


def _serial(spec: SearchSpec, batches: Batches, workers: int, address: str | None) -> Iterator[dict[str, Any]]:
    for batch in batches:
        for e in batch:
            yield evaluate_candidate(spec, e)


def _failed(entry: dict[str, Any], err: BaseException) -> dict[str, Any]:
    text = str(err).strip().splitlines()
    return {**entry, "status": "error", "reason": "worker failed",
            "detail": f"{type(err).__name__}: {text[-1] if text else ''}".strip()}


def _pool(spec: SearchSpec, batches: Batches, workers: int, address: str | None) -> Iterator[dict[str, Any]]:
    """A process pool of ``workers``, kept across the batches, with two batches in flight (``IN_FLIGHT``): the next
    batch is asked for once the oldest one has finished. A process that dies breaks the whole pool (every pending
    future fails with BrokenProcessPool), so the candidates it took down are run again, each in a pool of its own: only
    the one that kills its process again is recorded as failed."""
    import multiprocessing
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    ctx = multiprocessing.get_context("spawn")  # no fork of a process that runs a progress thread
    pool = None
    waves: list[dict[Any, dict[str, Any]]] = []  # the batches in flight, oldest first: future → entry

    def ask() -> None:
        nonlocal pool
        todo = next(batches, None)
        if todo is not None:
            pool = pool or ProcessPoolExecutor(max_workers=workers, mp_context=ctx)
            waves.append({pool.submit(evaluate_candidate, spec, e): e for e in todo})

    try:
        for _ in range(IN_FLIGHT):
            ask()
        while waves:
            futs = {f: e for w in waves for f, e in w.items()}
            done, _ = wait(futs, return_when=FIRST_COMPLETED)
            broken = []
            for f in sorted(done, key=lambda f: futs[f]["id"]):
                for w in waves:
                    w.pop(f, None)
                err = f.exception()  # a worker's exception or a dead process, kept for that candidate only
                if isinstance(err, BrokenProcessPool):
                    broken.append(futs[f])
                else:
                    yield _failed(futs[f], err) if err is not None else f.result()
            if broken and pool is not None:
                pool.shutdown()
                pool = None
            for e in broken:
                with ProcessPoolExecutor(max_workers=1, mp_context=ctx) as alone:
                    f = alone.submit(evaluate_candidate, spec, e)
                    err = f.exception()
                    yield _failed(e, err) if err is not None else f.result()
            while waves and not waves[0]:
                waves.pop(0)
                ask()
    finally:
        if pool is not None:
            pool.shutdown()


def _ray(spec: SearchSpec, batches: Batches, workers: int, address: str | None) -> Iterator[dict[str, Any]]:
    """Ray tasks, one per candidate. A local cluster listens on 127.0.0.1 only, without its dashboard, with token
    authentication (Ray's default for a new local cluster from 2.59, the floor in pyproject.toml); the workers' logs
    stay in Ray's log files, and Ray's
    own messages to the driver (e.g. "A worker died or was killed") go to stderr, never into stdout (``--json``). A
    task whose worker dies is recorded as failed with Ray's reason (no silent retry: a candidate that kills its
    worker would kill the retry too)."""
    import contextlib
    import os
    import sys

    if address is None and "ray" not in sys.modules:
        # Ray resolves a node address of 127.0.0.1 to the machine's network address unless this is off (its
        # ray_constants.ENABLE_RAY_CLUSTER, read when ray is imported, inherited by the raylet and workers)
        os.environ.setdefault("RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER", "0")
    import ray
    from ray.exceptions import RayError

    started = not ray.is_initialized()
    with contextlib.redirect_stdout(sys.stderr):  # Ray prints its error messages to sys.stdout from a thread
        if started:
            start_ray(ray, address, workers)  # no cluster at the address: an InputError naming it
        try:
            task = ray.remote(num_cpus=1, max_retries=0)(evaluate_candidate)
            spec_ref = ray.put(spec)
            waves: list[dict[Any, dict[str, Any]]] = []  # as in _pool: the batches in flight, oldest first

            def ask() -> None:
                todo = next(batches, None)
                if todo is not None:
                    waves.append({task.remote(spec_ref, e): e for e in todo})

            for _ in range(IN_FLIGHT):
                ask()
            while waves:
                done, _ = ray.wait([r for w in waves for r in w], num_returns=1)
                for ref in done:
                    entry = next(w.pop(ref) for w in waves if ref in w)
                    try:
                        yield ray.get(ref)
                    except RayError as err:  # the task raised, or its worker died: this candidate only
                        yield _failed(entry, err)
                while waves and not waves[0]:
                    waves.pop(0)
                    ask()
        finally:
            if started:
                ray.shutdown()


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
    return {"serial": _serial, "pool": _pool, "ray": _ray}[backend]


def _planned(spec: SearchSpec, cands: list, done: dict[str, Any], record: Any) -> list[dict[str, Any]]:
    """The planned entries of the candidates not ``done``, in candidate order; the others' entries (rejected, no
    price, ...) go to ``record`` as they are screened."""
    todo = []
    for c in cands:
        if c.id in done:
            continue
        e = screen_candidate(spec, c)
        if e["status"] == "planned":
            todo.append(e)
        else:
            record(e)
    return todo


def run_search(spec: SearchSpec, axes: Axes, *, workers: int | None = 1, backend: str = "auto",
               ray_address: str | None = None, ledger: Path | None = None, resume: bool = False,
               progress: Progress | None = None, exhaustive: bool = False) -> SearchResult:
    """Plan, bound, simulate, rank; returns the SearchResult. ``ledger`` is written as entries finish and rewritten in
    candidate order at the end; with ``resume`` its finished entries are kept (see the module docstring).
    ``exhaustive``: simulate every planned candidate, none decided by its bounds (``kvledger.analyses.search.prune``).
    ``workers`` None: ``default_workers`` of the candidates left to simulate (the CLI's default).

    Raises:
        InputError / UnknownNameError: bad inputs (spec, axes, API row, backend), or a ledger of another search.
    """
    run = _backend(backend, 1 if workers is None else workers, ray_address)  # bad flags fail before any planning
    check_ray_address(ray_address)  # a HOST:PORT nobody listens on, refused in seconds (Ray retries it for minutes)
    cands = plan_candidates(spec, axes)
    header = ledger_header(spec, cands)
    done = resumable_entries(ledger, header) if resume and ledger is not None else {}
    fh = None
    if ledger is not None:  # header and kept entries first (replaced whole), then each new entry appended as it ends
        write_whole(ledger, [header, *done.values()])
        fh = ledger.open("a", encoding="utf-8")
    n_feasible = sum(e["status"] == "feasible" for e in done.values())
    best = min((e for e in done.values() if e["status"] == "feasible"), key=rank_key, default=None)

    def record(e: dict[str, Any]) -> None:
        nonlocal n_feasible, best
        done[e["id"]] = e
        if fh is not None:
            fh.write(ledger_line(e))
            fh.flush()
        if e["status"] == "feasible":
            n_feasible += 1
            best = e if best is None or rank_key(e) < rank_key(best) else best
        if progress is not None:
            progress(e, len(done), len(cands), n_feasible, best)

    try:
        todo = screen_by_bounds(spec, _planned(spec, cands, done, record), cands, record, exhaustive)
        order = {c.id: n for n, c in enumerate(cands)}
        batches = iter([todo]) if exhaustive else rounds(spec, todo, order, lambda: [  # in candidate order, never in
            done[c.id] for c in cands if c.id in done and done[c.id]["status"] == "feasible"], record)  # finish order
        if workers is None:  # the default: a local pool (Ray's start-up is for a named --workers N or an address)
            workers = default_workers(len(todo)) if backend != "serial" else 1
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
    return result
