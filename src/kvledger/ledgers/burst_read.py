"""A burst: a run whose every request arrived at one instant (``--rate inf``, also ``vllm bench serve``'s default
request rate). It has no offered rate, and the open-loop tests (the queue between the median and the last arrival:
``analyses.serving.queue_growth``) have nothing to read. What it does say is whether the burst exceeded what the
engine runs at once: how many requests were still waiting for their first token when the first request finished.

- Some were: KV, max_num_seqs or the token budget held them back, so the engine ran as full as those limits let it
  until the last of them was admitted — a saturated run. Its throughput (completed ÷ first arrival → last finish, the
  drain included) is the engine's drain capacity, the saturation throughput the throughput band was measured on; its
  latency is set by the burst's size (how long the last request queued behind the rest), not by the step cost.
- None was: every request was running (its first token out) before the first one finished, so the run is one batch
  of N requests draining. Its throughput is set by N, the burst's size, not by what the engine can sustain.

Why the first finish: until a request finishes none frees its KV blocks or its max_num_seqs slot, so the running
batch can only grow; a request still without a first token then was held back by one of those limits or by the
token budget (its prefill chunked behind the others'), not by a later arrival (there is none). A rule of this reading,
not a fitted threshold: one request waiting is enough.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from kvledger.jsonable import to_jsonable
from kvledger.ledgers.columns import columns_from

__all__ = ["BurstRead", "all_at_once", "read_burst", "BURST_RULE"]

BURST_RULE = ("every request arrived at one instant; saturated when a request was still waiting for its first token "
              "at the first finish, one batch when none was (kvledger.ledgers.burst_read)")


@dataclass(frozen=True)
class BurstRead:
    """The read of a burst (module doc).

    Attributes:
        case: "saturated" (some request still waited for a first token at the first finish) or "one_batch" (none).
        num_requests: requests that finished (failed or rejected ones left out); waiting_at_first_finish: of them,
            those without a first token when the first one finished; first_finish_s: the first finish after the
            burst's arrival, s; rule: :data:`BURST_RULE`.
    """

    case: str
    num_requests: int
    waiting_at_first_finish: int
    first_finish_s: float
    rule: str = BURST_RULE

    @property
    def saturated(self) -> bool:
        return self.case == "saturated"

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)

    def facts(self) -> str:
        """``199 of 200 requests still waited for a first token when the first finished (9.45 s after the burst)``."""
        n, w = self.num_requests, self.waiting_at_first_finish
        if w:
            return (f"{w:,} of {n:,} requests still waited for a first token when the first finished "
                    f"({self.first_finish_s:,.2f} s after the burst)")
        return (f"all {n:,} requests had their first token before the first finished "
                f"({self.first_finish_s:,.2f} s after the burst)")

    def note(self) -> str:
        """The saturated burst's note: why its throughput has a band and its latency none."""
        return (f"a burst (every request at t = 0) larger than the engine runs at once: {self.facts()}, held back by "
                "KV, max_num_seqs or the token budget — so its throughput (completed ÷ first arrival → last finish, "
                "the drain included) is the engine's drain capacity, the saturation throughput its band is for; no "
                "TTFT or TPOT error band: its latency is set by the burst's size, not by the step cost the bands "
                "measure (a finite --rate gives a latency with a band)")

    def no_band_reason(self) -> str:
        """Why a one-batch burst's throughput has no band."""
        return (f"a burst (every request at t = 0) the engine ran at once: {self.facts()}, so its throughput is a "
                f"batch of {self.num_requests:,} requests' drain, set by the burst's size, not the capacity the band "
                "is for")


def all_at_once(run: Any) -> bool:
    """Whether every request of ``run`` (its records) arrived at one instant, with at least one request."""
    arrival = columns_from(run).arrival_s
    return bool(arrival.size) and float(arrival.min()) == float(arrival.max())


def read_burst(run: Any) -> BurstRead | None:
    """The read of ``run`` (its records), its requests taken as one burst at their first arrival (module doc); None
    when no request finished. Counts are of requests (a sampled file's weights applied)."""
    cols = columns_from(run)
    done = cols.ok & np.isfinite(cols.finish_s)
    if not done.any():
        return None
    t0 = float(cols.arrival_s.min())
    first_finish = float(cols.finish_s[done].min())
    first = np.where(np.isfinite(cols.first_token_s), cols.first_token_s, np.inf)
    waiting = done & (first > first_finish)
    n, w = round(float(cols.weight[done].sum())), round(float(cols.weight[waiting].sum()))
    return BurstRead("saturated" if w else "one_batch", n, w, first_finish - t0)
