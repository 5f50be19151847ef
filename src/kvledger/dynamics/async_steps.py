"""Under vLLM v1's ``async_scheduling`` (a batch queue of two), what a replica does with the step in flight: its
finishers keep their blocks and seats until the next schedule (``defer``, ``drain``), and a request preempted while it
is in flight loses the token that step samples (replica.py's module doc draws the timeline).

vLLM V0's async output processor (``EngineConfig.async_output_proc``, 0.6.0–0.10) lags the same way on a synchronous
schedule: step k's outputs are processed in a callback during step k+1 (0.9.0 ``engine/llm_engine.py : step`` →
``_advance_to_next_step`` appends the sampled token without checking the stop; ``worker/model_runner.py`` runs
``async_callback`` after launching the forward), so a request whose last token step k sampled is still running when
step k+1 is scheduled: it holds its ``max_num_seqs`` seat and blocks (no prompt takes them), and a decode step k+1
decodes it once more (``core/scheduler.py : _schedule_running``: "an extra decode run is done to process the final
tokens"), its token dropped; the callback frees it before step k+2 is scheduled (``free_finished_seq_groups``). Not
modelled: V0 drains the callback before preempting a victim, and skips the extra run past ``max_model_len``.
"""

from __future__ import annotations

from kvledger.dynamics.engine.request_state import SimRequest

__all__ = ["AsyncSteps"]


class AsyncSteps:
    """The step-in-flight bookkeeping of a ``Replica`` (mixed in; needs its ``kv``, ``sched``, ``finish``,
    ``_deferred``, ``_async`` and ``last_start_s``)."""

    def drain(self) -> bool:
        """Async: process the in-flight step's output (free its finishers); returns whether any were freed."""
        if not self._deferred:
            return False
        for r in self._deferred:
            self.kv.free(r, preempted=False)
        self._deferred = []
        self.sched.num_finishing = 0
        return True

    def discard_inflight_token(self, req: SimRequest, step: int) -> None:
        """Async: a request preempted while the step before ``step`` is in flight loses the token that step samples
        (vLLM drops the output of a request that is no longer running) and recomputes it later."""
        if step - 1 > req.run_start:
            req.runs.append((req.run_start, step - 1))
        req.run_start = -1
        req.num_generated -= 1
        req.num_tokens -= 1

    def defer(self, reqs: list[SimRequest]) -> None:
        """Async: these requests, finished in the step just run, free their blocks after the next schedule."""
        self._deferred = reqs
        self.sched.num_finishing = len(reqs)

    @property
    def has_deferred(self) -> bool:
        """Async: finishers of the step in flight still hold their blocks and seats."""
        return bool(self._deferred)

    def settle_finished(self, finished: list[tuple[SimRequest, int]], start_s: float) -> list:
        """Records of the requests that finished in the step that started at ``start_s``: their blocks are freed now,
        or under async scheduling after the next schedule (``defer``)."""
        if self._lag:  # V0's async output processor: freed after the next schedule, no in-flight step
            out = self.finish(finished, freed=True) if finished else []
            self.defer([r for r, _ in finished])
            return out
        if self._async:
            out = self.finish(finished, freed=True) if finished else []
            self.defer([r for r, _ in finished])
            self.last_start_s = start_s
            return out
        return self.finish(finished) if finished else []

    def held_decodes(self, held: list[SimRequest]) -> tuple[int, int]:
        """V0's async output processor: the extra decode run of the requests that finished in the step before (still
        running when this decode step was scheduled): (sequences, KV tokens read) to add to its shape."""
        return len(held), sum(r.num_computed_tokens + 1 for r in held)
