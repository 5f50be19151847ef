"""Whether a paced closed loop's clients kept their rate (``kvledger.dynamics.workload.closed_loop.ClosedLoop.paced``:
a request rate and a cap on requests in flight, as ``vllm bench serve --request-rate R --max-concurrency N`` sends).

With the cap reached, a request due waits at the client until one in flight finishes; the engine never holds more than
N, so its queue cannot grow with the arrivals (``queue_growth``'s open-loop check reads nothing) — the client's
backlog grows instead, and its sends fall behind the schedule. Read as inference-perf's stages are
(``calibration.stage_launch.BEHIND``): the clients sent, first to last send, under 95% of the rate offered.
"""

from __future__ import annotations

import math
from typing import Any

from kvledger.analyses.serving import notes as N
from kvledger.analyses.serving.overloads import PacedBehind
from kvledger.calibration.stage_launch import BEHIND
from kvledger.ledgers.columns import columns_from
from kvledger.records import RunRecords

__all__ = ["paced_behind"]


def paced_behind(run: RunRecords, info: dict[str, Any]) -> PacedBehind | None:
    """The overload of a paced closed loop whose clients sent under ``BEHIND`` × the rate offered (``info``: the
    workload's ``offered_rate_req_per_s`` and ``concurrency``, and ``max_running``, what the engine runs at once —
    ``max_num_seqs`` × replicas —, where known): the requests waited at the client for a free slot, as a benchmark
    client's do. Its cap held the load where it is within ``max_running`` (the engine had room for every request in
    flight); a larger cap let the engine queue first. None when they kept up (or with under two sends)."""
    sent = columns_from(run).arrival_s  # a closed loop's arrival is its send
    offered, users = info.get("offered_rate_req_per_s"), int(info.get("concurrency") or 0)
    span = float(sent.max() - sent.min()) if sent.size > 1 else 0.0
    if not offered or not math.isfinite(offered) or span <= 0 or (sent.size - 1) / span >= BEHIND * offered:
        return None
    rate, running = (sent.size - 1) / span, info.get("max_running")
    held = running is not None and users <= running
    return PacedBehind(offered, rate, users, N.paced_behind(offered, rate, users, running), held)
