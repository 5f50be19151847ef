"""An interrupt (Ctrl-C's KeyboardInterrupt) in a search on a process pool cancels the queued candidates and ends the
workers at once. The pool's own shutdown waited for every queued candidate: one SIGINT left the search running for
their whole time, its workers alive.

The interrupt is thrown into the backend where the search waits on it (at the entry it yields), deterministically:
one candidate returns at once, the three others take 20 s each on 2 workers."""

from __future__ import annotations

import multiprocessing
import time

import pytest

from kvledger.analyses.search import backends

SLOW_S = 20.0


class _SlowButOne:
    """Picklable stand-in for evaluate_candidate: "fast" returns at once, every other candidate after SLOW_S."""

    def __call__(self, spec, entry):
        if entry["id"] != "fast":
            time.sleep(SLOW_S)
        return {**entry, "status": "feasible"}


def _own_context(monkeypatch) -> list:
    """The backend's spawn contexts, as it makes them: its workers are theirs alone (a diff of active_children would
    also count a process another test's pool spawns meanwhile in this xdist worker, which this pool cannot end)."""
    made = []

    def tracked():
        ctx = real()
        made.append(ctx)
        return ctx

    real = backends.tracked_spawn
    monkeypatch.setattr(backends, "tracked_spawn", tracked)
    return made


def _ended_by(mine: set, deadline: float) -> bool:
    """Whether every worker in ``mine`` has ended by ``deadline`` (monotonic s): the pool's own management thread may
    reap a terminated worker at the same moment as end_workers' join, and the process then reads as alive for an
    instant after it has gone (a clean-clone run under load saw it)."""
    while any(p.is_alive() for p in mine) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not any(p.is_alive() for p in mine)


def test_an_interrupt_cancels_the_queue_and_ends_the_workers_at_once(monkeypatch):
    monkeypatch.setattr(backends, "evaluate_candidate", _SlowButOne())
    contexts = _own_context(monkeypatch)
    gen = backends.pool_backend(None, iter([[{"id": "fast"}, {"id": "s1"}, {"id": "s2"}, {"id": "s3"}]]), 2, None)
    assert next(gen)["id"] == "fast"  # the other worker is inside s1 (or about to be): 2 running, the rest queued
    mine = {p for c in contexts for p in c.made if p.pid is not None}
    assert 1 <= len(mine) <= 2  # the pool's workers (spawned on demand, at most 2)
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        gen.throw(KeyboardInterrupt)
    # without the fix the shutdown waited for s1, s2 and s3: 2 × 20 s on 2 workers; now one join of ≤ 1 s per worker
    assert time.monotonic() - t0 < 5.0
    assert _ended_by(mine, t0 + 5.0)  # within 5 s of the interrupt, where the queue's shutdown took 40 s
    assert not mine & set(multiprocessing.active_children())


def test_a_consumer_that_stops_reading_ends_the_workers_too(monkeypatch):
    # a search whose ledger write fails stops reading the backend: closing it (GeneratorExit) must not wait either
    monkeypatch.setattr(backends, "evaluate_candidate", _SlowButOne())
    contexts = _own_context(monkeypatch)
    gen = backends.pool_backend(None, iter([[{"id": "fast"}, {"id": "s1"}, {"id": "s2"}]]), 2, None)
    next(gen)
    mine = {p for c in contexts for p in c.made if p.pid is not None}
    t0 = time.monotonic()
    gen.close()
    assert time.monotonic() - t0 < 5.0
    assert mine and _ended_by(mine, t0 + 5.0)
