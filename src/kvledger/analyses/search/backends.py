"""Where a search's capacity searches run: in process, in a process pool, or as Ray tasks; each backend takes the
batches of ``prune.rounds`` and yields each candidate's entry as it finishes (``runner.run_search`` records them).

A worker failure (an exception inside a task, a crashed process) becomes that candidate's entry with status ``error``
and reason ``worker failed``; the others go on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

from kvledger.analyses.search.evaluate import evaluate_candidate
from kvledger.analyses.search.ray_connect import local_ray_env, start_ray
from kvledger.analyses.search.spec import SearchSpec

__all__ = ["IN_FLIGHT", "Batches", "serial_backend", "pool_backend", "ray_backend", "failed_entry", "next_wave",
           "unfinished", "tracked_spawn", "end_workers"]

Batches = Iterator[list[dict[str, Any]]]
IN_FLIGHT = 2
"""Batches a pool or Ray keeps in flight: the next one is asked for when the oldest has finished, so the workers never
wait at a batch's end; ``prune.rounds`` decides each batch without the results of the one before it, which may still
be running, so the decisions (and the ledger) do not depend on the backend or the number of workers."""


def serial_backend(spec: SearchSpec, batches: Batches, workers: int, address: str | None) -> Iterator[dict[str, Any]]:
    for batch in batches:
        for e in batch:
            yield evaluate_candidate(spec, e)


def failed_entry(entry: dict[str, Any], err: BaseException) -> dict[str, Any]:
    """The candidate's entry as failed (status ``error``, reason "worker failed"), its detail the error's type and the
    last line of its message: a task's own exception ends Ray's traceback (``RayTaskError(KeyError): 'plan'``)."""
    text = str(err).strip().splitlines()
    return {**entry, "status": "error", "reason": "worker failed",
            "detail": f"{type(err).__name__}: {text[-1] if text else ''}".strip()}


def next_wave(waves: list[dict[Any, Any]], ask: Callable[[], None]) -> bool:
    """Drop the finished (or empty: ``prune.rounds``) batches at the front of ``waves``, asking for one more each;
    whether any task is left to wait for."""
    while waves and not waves[0]:
        waves.pop(0)
        ask()
    return bool(waves)


def unfinished(waves: list[dict[Any, dict[str, Any]]], batches: Batches) -> list[dict[str, Any]]:
    """The entries of the tasks still in flight, then those of every batch not yet asked for, in order: what a backend
    whose cluster failed could not evaluate."""
    return [e for w in waves for e in w.values()] + [e for b in batches for e in b]


def pool_backend(spec: SearchSpec, batches: Batches, workers: int, address: str | None) -> Iterator[dict[str, Any]]:
    """A process pool of ``workers``, kept across the batches, with two batches in flight (``IN_FLIGHT``): the next
    batch is asked for once the oldest one has finished. A process that dies breaks the whole pool (every pending
    future fails with BrokenProcessPool), so the candidates it took down are run again, each in a pool of its own: only
    the one that kills its process again is recorded as failed. An interrupt (Ctrl-C), or a consumer that stops
    reading, cancels what is queued and ends the workers at once (``end_workers``): the pool's own shutdown waited for
    every queued candidate, so one SIGINT left the search running and its workers alive."""
    from concurrent.futures import FIRST_COMPLETED, ProcessPoolExecutor, wait
    from concurrent.futures.process import BrokenProcessPool

    ctx = tracked_spawn()  # spawn: no fork of a process that runs a progress thread; its processes kept for the end
    pools: list[Any] = []  # the pools open: the shared one first while it lasts, then one for each rerun
    waves: list[dict[Any, dict[str, Any]]] = []  # the batches in flight, oldest first: future → entry

    def ask() -> None:
        todo = next(batches, None)
        if todo is not None:
            if not pools:
                pools.append(ProcessPoolExecutor(max_workers=workers, mp_context=ctx))
            waves.append({pools[0].submit(evaluate_candidate, spec, e): e for e in todo})

    try:
        for _ in range(IN_FLIGHT):
            ask()
        while next_wave(waves, ask):
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
                    yield failed_entry(futs[f], err) if err is not None else f.result()
            if broken and pools:
                pools.pop().shutdown()
            for e in broken:
                pools.append(ProcessPoolExecutor(max_workers=1, mp_context=ctx))
                f = pools[0].submit(evaluate_candidate, spec, e)
                err = f.exception()
                pools.pop().shutdown()
                yield failed_entry(e, err) if err is not None else f.result()
    except BaseException:  # KeyboardInterrupt, GeneratorExit: nothing more is wanted from the workers
        end_workers(pools, ctx.made)
        raise
    finally:
        for pool in pools:
            pool.shutdown()


def tracked_spawn() -> Any:
    """A spawn context that keeps every process it makes (``made``): a process pool's workers, which
    ``concurrent.futures`` keeps to itself."""
    from multiprocessing.context import SpawnContext, SpawnProcess

    class TrackedSpawn(SpawnContext):
        def __init__(self) -> None:
            super().__init__()
            self.made: list[SpawnProcess] = []

        def Process(self, *args: Any, **kwargs: Any) -> SpawnProcess:  # noqa: N802  (the context's factory name)
            p = SpawnProcess(*args, **kwargs)
            self.made.append(p)
            return p

    return TrackedSpawn()


def end_workers(pools: list[Any], made: list[Any]) -> None:
    """Cancel every queued candidate of ``pools`` and end their worker processes (``made``) now, without waiting for the
    ones running: SIGTERM, then SIGKILL to one that is still there after a second."""
    while pools:
        pools.pop().shutdown(wait=False, cancel_futures=True)
    started = [p for p in made if p.pid is not None]
    for p in started:
        if p.is_alive():
            p.terminate()
    for p in started:
        p.join(timeout=1.0)
        if p.is_alive():
            p.kill()
            p.join()


def ray_backend(spec: SearchSpec, batches: Batches, workers: int, address: str | None) -> Iterator[dict[str, Any]]:
    """Ray tasks, one per candidate. A local cluster listens on 127.0.0.1 only, without its dashboard, with token
    authentication (Ray's default for a new local cluster from 2.59, the floor in pyproject.toml); the workers' logs
    stay in Ray's log files, and Ray's
    own messages to the driver (e.g. "A worker died or was killed") go to stderr, never into stdout (``--json``). A
    task whose worker or node dies is recorded as failed with Ray's reason (no silent retry: a candidate that kills its
    worker would kill the retry too); where the cluster itself fails under a wait or a submit, so does every candidate
    left (``unfinished``), with that error."""
    import contextlib
    import os
    import sys

    if address is None and "ray" not in sys.modules:
        local_ray_env(os.environ)  # read when ray is imported, inherited by the raylet and workers
    import ray
    from ray.exceptions import RayError

    started = not ray.is_initialized()
    with contextlib.redirect_stdout(sys.stderr):  # Ray prints its error messages to sys.stdout from a thread
        if started:
            start_ray(ray, address, workers)  # no cluster at the address: an InputError naming it
        try:
            task = ray.remote(num_cpus=1, max_retries=0)(evaluate_candidate)
            spec_ref = ray.put(spec)
            waves: list[dict[Any, dict[str, Any]]] = []  # as in pool_backend: the batches in flight, oldest first

            def ask() -> None:
                todo = next(batches, None)
                if todo is not None:
                    waves.append({task.remote(spec_ref, e): e for e in todo})

            try:
                for _ in range(IN_FLIGHT):
                    ask()
                while next_wave(waves, ask):
                    done, _ = ray.wait([r for w in waves for r in w], num_returns=1)
                    for ref in done:
                        entry = next(w.pop(ref) for w in waves if ref in w)
                        try:
                            yield ray.get(ref)
                        except RayError as err:  # the task raised, or its worker or node died: this candidate only
                            yield failed_entry(entry, err)
            except (RayError, OSError) as err:  # the cluster itself failed (a wait or a submit): every candidate left
                yield from (failed_entry(e, err) for e in unfinished(waves, batches))
        finally:
            if started:
                ray.shutdown()
