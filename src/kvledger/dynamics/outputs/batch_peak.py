"""The running batch's peak and the state at the first preemption, kept by each replica (``Replica`` mixes this in).

``note_batch`` runs once per general step, after the schedule: the running list then holds the requests the step
runs (those admitted included, those preempted gone). The fast paths only decode the same batch or admit into it:
``fast_path``'s mixed step calls ``note_batch`` too, and an arrival stretch settles its peak from its requests' first
and last steps (``stretch_peak``). The first preemption's state is the scheduler's snapshot (``Scheduler
.first_preemption``: running requests and the blocks they held when one of them could not get its blocks, before any
victim was freed), timed here at the step it happened in.
"""

from __future__ import annotations

from typing import Any

__all__ = ["BatchPeak", "stretch_peak"]


class BatchPeak:
    """The peak running batch (requests, and the step start it was reached at, s on the engine's clock) and the first
    preemption (``first_preemption_s``, the scheduler's snapshot); class defaults until a step sets them."""

    running_max = 0
    running_max_s = 0.0
    #: False where SGLang's arrival stretches ran: their batches are seen only at each stretch's end (a lower bound)
    running_max_exact = True
    first_preemption_s: float | None = None

    def note_batch(self, running: int, preempted: list, now_s: float) -> None:
        """After a step's schedule: ``running`` requests run in it, ``preempted`` were preempted by it, at ``now_s``."""
        if running > self.running_max:
            self.running_max, self.running_max_s = running, now_s
        if preempted and self.first_preemption_s is None:
            self.first_preemption_s = now_s

    def batch_facts(self) -> dict[str, Any]:
        """This replica's peak batch and first preemption (None when none), times on the engine's clock, s, and its
        resumes after preemption: re-admissions, the tokens they looked up, those HBM's prefix cache served, and the
        prefill tokens all its steps computed (``PrefillTime.tokens``)."""
        snap = getattr(self.sched, "first_preemption", None)
        first = None
        if snap is not None and self.first_preemption_s is not None:
            running, used, usable = snap
            first = {"t_s": self.first_preemption_s, "running": running, "kv_blocks_held": int(used),
                     "usable_blocks": usable}
        ps = self.kv.prefix_stats  # re-admissions after preemption: counted apart (kv_interface.count_admission)
        return {"running_max": self.running_max, "running_max_t_s": self.running_max_s,
                "running_max_exact": self.running_max_exact, "first_preemption": first,
                "resume": {"resumes": ps.preempted_requests, "resume_tokens": ps.preempted_queries,
                           "hbm_hit_tokens": ps.preempted_hits, "prefill_tokens": self.prefill_time.tokens}}


def stretch_peak(lives: list, times: Any) -> tuple[int, float]:
    """(most requests running in one step, that step's start, s) of an arrival stretch (open_stretch.py).

    ``lives``: per request (request, first decode step d0, computed tokens, blocks, tokens left m, admitted here); one
    admitted here ran from its mixed step d0 − 1, one running at the start from step 0, each to its last token's step
    d0 + m − 1. The count rises only where a request starts, so the peak is at one of those steps. ``times[k]``: step
    k's start, s."""
    starts = sorted([d0 - 1 if adm else d0 for _, d0, _, _, _, adm in lives])  # lists: faster than generators
    ends = sorted([d0 + m - 1 for _, d0, _, _, m, _ in lives])
    best, at, j, n = 0, 0, 0, len(starts)
    for i, s in enumerate(starts):
        if i + 1 < n and starts[i + 1] == s:
            continue
        while ends[j] < s:  # every request ends at or after its own start, so j stays below i + 1
            j += 1
        if i + 1 - j > best:
            best, at = i + 1 - j, s
    return best, float(times[at])
