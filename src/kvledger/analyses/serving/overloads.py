"""The records of an overloaded run (``queue_growth.run_overload``): an open loop's queue growth, a session run's
waiting share, an open loop too short to tell, and a paced closed loop's client falling behind its rate; each says
which in its JSON's ``kind`` (``queue_growth``, ``session_queue``, ``short_run``, ``paced_behind``), so a script
tells them apart without guessing from their keys. Apart from ``queue_growth`` so that a run that kept up does not
make these classes."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, ClassVar

__all__ = ["PacedBehind", "QueueGrowth", "SessionQueue", "ShortRun", "KEPT_PACE"]

KEPT_PACE = 0.8
"""Requests finished ÷ arrived per second over the second half of the arrivals, at least, for ``simulate`` to read a
growth within the trace's bursts as kept up (``QueueGrowth.kept_up``; a threshold of this reading, not fitted): a
fresh user's light-load run (Qwen2.5-7B on an A100 at 4 req/s, about half its SLO capacity) finished 94% of its second
half's arrival rate; 200 and 400 azure-conv requests on Llama-3.1-8B / H100 at 16 and 22.25 req/s, whose second halves
arrive past its 19.75 req/s capacity, 31% and 57%.

The pace is read only over a window that can show it. Over the second half of the arrivals, of length W, what finished
is what arrived less the backlog's growth (finished = arrived + backlog at the median − backlog at the last: every
request counted once), and a kept-up engine's backlog at the last arrival is the arrival rate there × the requests' time
in the system, S (Little's law). So a kept-up engine finishes at least 1 − S/W of what arrived, and is sure to pass
``KEPT_PACE`` only when W ≥ S ÷ (1 − ``KEPT_PACE``) = 5 S; over a shorter window a rising arrival rate alone keeps the
finishes under it (DeepSeek-V3 on 8 H200 DP ranks, 200 azure-conv requests at 5 req/s: W = 12.07 s against the first
half's median time in the system S = 3.62 s, 8.21 req/s arriving and 3.32 req/s finishing with at most 6 requests
waiting). There the pace is not read (``QueueGrowth.pace_read``) and the bursts, the TTFT knee and the run's length
decide. S is the first half's median time in the system (``queue_growth``'s ``settled`` reads the same figure): taken
before the second half's arrivals can lengthen it, so an overload does not stretch it."""


@dataclass(frozen=True, slots=True)
class QueueGrowth:
    """An overload: the backlog at the median and the last arrival (times from the first arrival, s) and the rates at
    which requests arrived and finished in between (requests/s), with the note that says so. ``queue`` "waiting":
    the queue read was the waiting one (arrived, no first token; ``backlog_*`` count it and ``finished_per_s`` is the
    rate of first tokens), in a run too short to read the backlog; None (left out of the JSON): the backlog.
    ``backlog_expected``: the median arrival's backlog scaled by the arrival rate's change between the halves — what
    it would be at the last arrival had the engine kept pace from the median on (``queue_growth``'s module doc; a
    backlog of an overloaded run, not what a kept-up engine holds). ``burst_allowance``: how far past
    it the trace's own bursts can move the backlog (``SUSTAINED_Z`` × √(D × expected), D the arrivals' index of
    dispersion); a growth within it is not counted against a capacity probe (``queue_growth.probe_queue_grew``).
    ``seq_cap``: where the running batch sat at max_num_seqs with KV to spare, the evidence (``seq_cap.SeqCap``;
    ``simulate`` only); None (left out of the JSON) otherwise."""

    kind: ClassVar[str] = "queue_growth"  # the record's kind in the JSON (module doc)
    __json__ = ("kind", "t_mid_s", "t_last_s", "backlog_mid", "backlog_last", "arrived_per_s", "finished_per_s", "note",
                "queue", "backlog_expected", "burst_allowance", "seq_cap")
    __json_optional__ = ("queue", "seq_cap")

    t_mid_s: float
    t_last_s: float
    backlog_mid: int
    backlog_last: int
    arrived_per_s: float
    finished_per_s: float
    note: str
    queue: str | None = None
    backlog_expected: float | None = None
    burst_allowance: float | None = None
    seq_cap: Any = None
    stay_s: float | None = None  # the first half's median time in the queue read, s (KEPT_PACE's doc); not in the JSON

    @property
    def pace_read(self) -> bool:
        """The second half of the arrivals spans at least ``stay_s`` ÷ (1 − ``KEPT_PACE``), so a kept-up engine finishes
        at least ``KEPT_PACE`` of what arrived over it (``KEPT_PACE``'s doc); True without a stay, or where the first
        half's median request never left the queue (no kept-up engine)."""
        s = self.stay_s
        return s is None or not math.isfinite(s) or self.t_last_s - self.t_mid_s >= s / (1.0 - KEPT_PACE)

    @property
    def within_bursts(self) -> bool:
        """The backlog's excess over the expected one is within what the trace's own bursts can add."""
        from kvledger.analyses.serving.notes import within_bursts

        return within_bursts(self.backlog_last, self.backlog_expected, self.burst_allowance)

    @property
    def kept_up(self) -> bool:
        """A growth ``simulate`` reads as kept up: within the trace's bursts, and the engine finishing at least
        ``KEPT_PACE`` of the rate requests arrived at over the second half of the arrivals, where that window can show
        it (``pace_read``)."""
        return self.within_bursts and (not self.pace_read or self.finished_per_s >= KEPT_PACE * self.arrived_per_s)

    def burst_note(self) -> str:
        """What ``simulate`` says of a queue that grew only within the trace's own bursts (not an overload)."""
        what = "waiting for their first token" if self.queue == "waiting" else "in the system"
        expected = self.backlog_expected or 0.0
        return (f"kept up within the trace's bursts: requests {what} rose from {self.backlog_mid:,} at the median "
                f"arrival to {self.backlog_last:,} at the last, {self.backlog_last - expected:,.0f} "
                f"past the {expected:,.0f} expected from the arrival rate's change, within the "
                f"{self.burst_allowance or 0:,.0f} the trace's own bursts can add, and {self.finished_per_s:,.2f} "
                f"req/s finished while {self.arrived_per_s:,.2f} req/s arrived in between "
                f"(kvledger.analyses.serving.queue_growth){self._pace_words()}: not read as an overload, as a capacity "
                "search does not count it; a longer run (--num-requests) tells")

    def _pace_words(self) -> str:
        """Why the finish rate was not held against the arrivals, where the window was too short to show it."""
        if self.pace_read:
            return ""
        span, need = self.t_last_s - self.t_mid_s, (self.stay_s or 0.0) / (1.0 - KEPT_PACE)
        return (f" — a finish rate not held against the arrivals: those {span:,.2f} s are under {need:,.2f} s, "
                f"{1 / (1 - KEPT_PACE):g} × the {self.stay_s or 0.0:,.2f} s the first half's median request spent in "
                f"the system, and over a shorter span a kept-up engine finishes under {KEPT_PACE:.0%} of a rising "
                "arrival rate (the requests arrived last are still in the system, by Little's law: "
                "kvledger.analyses.serving.overloads.KEPT_PACE)")


@dataclass(frozen=True, slots=True)
class SessionQueue:
    """A session run's overload: Σ TTFT ÷ Σ E2E of its turns (``ttft_share``, at least ``threshold``), their TTFT mean
    (s), and the note that says so."""

    kind: ClassVar[str] = "session_queue"  # the record's kind in the JSON (module doc)
    __json__ = ("kind", "ttft_share", "ttft_mean_s", "threshold", "note")

    ttft_share: float
    ttft_mean_s: float
    threshold: float
    note: str


@dataclass(frozen=True, slots=True)
class ShortRun:
    """An open loop too short to tell whether it kept up (``queue_growth.open_loop_check``): the arrivals' span to the
    median and to the last one, and the time to the first finish (s, from the first arrival), its requests, the
    requests suggested (``suggested_num_requests``), and the note that says so."""

    kind: ClassVar[str] = "short_run"  # the record's kind in the JSON (module doc)
    __json__ = ("kind", "t_mid_s", "t_last_s", "first_finish_s", "num_requests", "suggested_num_requests", "note")

    t_mid_s: float
    t_last_s: float
    first_finish_s: float
    num_requests: int
    suggested_num_requests: int
    note: str


@dataclass(frozen=True, slots=True)
class PacedBehind:
    """A paced closed loop (``ClosedLoop.paced``) whose clients fell behind their rate: the rate offered and the rate
    at which they could send (first to last send, req/s), their cap on requests in flight, whether that cap held the
    load (``cap_held``: within what the engine runs at once, ``max_num_seqs`` × replicas, so the engine had room for
    all of them), and the note that says so."""

    kind: ClassVar[str] = "paced_behind"  # the record's kind in the JSON (module doc)
    __json__ = ("kind", "offered_per_s", "sent_per_s", "num_users", "note", "cap_held")

    offered_per_s: float
    sent_per_s: float
    num_users: int
    note: str
    cap_held: bool = False
