"""A burst: a run whose every request arrived at one instant (``--rate inf``, also ``vllm bench serve``'s default
request rate). It has no offered rate, and the open-loop tests (the queue between the median and the last arrival:
``analyses.serving.queue_growth``) have nothing to read. What it does say is whether the burst exceeded what the
engine runs at once: whether its running batch (requests with their first token out, not finished) stopped growing
while requests still waited for a first token.

- Some did: after the running batch first reached its largest size, requests still got their first token — each only
  after finishes had made room (else the batch would have grown past that size). KV, max_num_seqs or the token budget
  held the engine at that size until the last of them was admitted — a saturated run. Its throughput (completed ÷
  first arrival → last finish, the drain included) is the engine's drain capacity, the saturation throughput the
  throughput band was measured on; its latency is set by the burst's size (how long the last request queued behind
  the rest), not by the step cost.
- None did: the running batch was at its largest only at the last request's first token, so the whole burst was in
  flight at once (save requests that finished in passing) — one batch of N requests draining. Its throughput is set
  by N, the burst's size, not by what the engine can sustain.

Why the running batch's peak, from how the scheduler admits (vLLM v1 ``Scheduler.schedule``, as
``dynamics.engine.scheduler`` runs it): waiting requests are admitted first come first served while a max_num_seqs
seat, KV blocks and token budget are left. Seats and blocks are freed only by a finish (or a preemption); the token
budget renews every step. So while only the token budget holds the burst back its admission goes on step after step
whether or not anything finishes, and the running batch grows; once a seat or the blocks run out, each admission
waits for a finish, and the batch stops growing. Reading it at the first finish instead misreads mixed output
lengths: a short output that finishes while the batch is still admitting leaves requests without a first token that
no limit held. A rule of this reading, not a fitted threshold: one request after the peak is enough. A token budget
alone can hold the batch flat too (outputs so short that requests finish as fast as prefills admit them): then the
engine ran as full as its token budget let it, and the run is saturated as well.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from kvledger.jsonable import to_jsonable
from kvledger.ledgers.columns import columns_from

__all__ = ["BurstRead", "all_at_once", "read_burst", "BURST_RULE"]

BURST_RULE = ("every request arrived at one instant; saturated when a request got its first token after the running "
              "batch (first token out, not finished) first reached its largest size, one batch when none did "
              "(kvledger.ledgers.burst_read)")

_RUNNING = "the running batch (first token out, not finished)"


@dataclass(frozen=True)
class BurstRead:
    """The read of a burst (module doc).

    Attributes:
        case: "saturated" (some request got its first token after the running batch's peak) or "one_batch" (none).
        num_requests: requests that finished (failed or rejected ones left out); waiting_after_peak: of them, those
            whose first token came after the running batch first reached its largest size; peak_running: that size,
            requests; peak_s: when it first reached it, s after the burst; rule: :data:`BURST_RULE`.
    """

    case: str
    num_requests: int
    waiting_after_peak: int
    peak_running: int
    peak_s: float
    rule: str = BURST_RULE

    @property
    def saturated(self) -> bool:
        return self.case == "saturated"

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)

    def facts(self) -> str:
        """``184 of 200 requests got their first token only after the running batch (…) had reached its largest, 16
        requests (0.20 s after the burst)``, or the batch at its largest only at the last first token."""
        n, w, peak = self.num_requests, self.waiting_after_peak, self.peak_running
        if w:
            return (f"{w:,} of {n:,} requests got their first token only after {_RUNNING} had reached its largest, "
                    f"{peak:,} requests ({self.peak_s:,.2f} s after the burst)")
        passing = f" of the {n:,}, {n - peak:,} having finished in passing" if peak < n else ""
        return (f"{_RUNNING} was largest at the last first token, {peak:,} request{'' if peak == 1 else 's'}{passing} "
                f"({self.peak_s:,.2f} s after the burst)")

    def note(self) -> str:
        """The saturated burst's note: why its throughput has a band and its latency none."""
        return (f"a burst (every request at t = 0) larger than the engine runs at once: {self.facts()}, held there by "
                "KV, max_num_seqs or the token budget — so its throughput (completed ÷ first arrival → last finish, "
                "the drain included) is the engine's drain capacity, the saturation throughput its band is for; no "
                "TTFT or TPOT error band: its latency is set by the burst's size, not by the step cost the bands "
                "measure (a finite --rate gives a latency with a band)")

    def no_band_reason(self) -> str:
        """Why a one-batch burst's throughput has no band."""
        whose = "1 request's" if self.num_requests == 1 else f"{self.num_requests:,} requests'"
        return (f"a burst (every request at t = 0) the engine ran at once: {self.facts()}, so its throughput is a "
                f"batch of {whose} drain, set by the burst's size, not the capacity the band is for")


def all_at_once(run: Any) -> bool:
    """Whether every request of ``run`` (its records) arrived at one instant, with at least one request."""
    arrival = columns_from(run).arrival_s
    return bool(arrival.size) and float(arrival.min()) == float(arrival.max())


def _running_peak(first_s: np.ndarray, finish_s: np.ndarray, weight: np.ndarray) -> tuple[float, float]:
    """(the running batch's largest size, requests; the first time it reached it, s) of requests with first tokens
    at ``first_s`` (finite) and finishes at ``finish_s``: at a first-token time t, those with a first token by t less
    those finished before t (a request whose first token is its last still counts at t)."""
    order = np.argsort(first_s, kind="stable")
    t, started = first_s[order], np.cumsum(weight[order])
    by_finish = np.argsort(finish_s, kind="stable")
    finished = np.concatenate(([0.0], np.cumsum(weight[by_finish])))
    running = started - finished[np.searchsorted(finish_s[by_finish], t, side="left")]
    last_at_t = np.searchsorted(t, t, side="right") - 1  # every first token at one time counted together
    running = running[last_at_t]
    k = int(np.argmax(running))
    return float(running[k]), float(t[k])


def read_burst(run: Any) -> BurstRead | None:
    """The read of ``run`` (its records), its requests taken as one burst at their first arrival (module doc); None
    when no request finished. Counts are of requests (a sampled file's weights applied); a finished request without
    a first-token time counts as one that waited."""
    cols = columns_from(run)
    done = cols.ok & np.isfinite(cols.finish_s)
    if not done.any():
        return None
    t0 = float(cols.arrival_s.min())
    first, finish, weight = cols.first_token_s[done], cols.finish_s[done], cols.weight[done]
    timed = np.isfinite(first)
    peak, peak_s = _running_peak(first[timed], finish[timed], weight[timed]) if timed.any() else (0.0, t0)
    waiting = ~timed | (np.where(timed, first, np.inf) > peak_s)
    n, w = round(float(weight.sum())), round(float(weight[waiting].sum()))
    return BurstRead("saturated" if w else "one_batch", n, w, round(peak), peak_s - t0)
