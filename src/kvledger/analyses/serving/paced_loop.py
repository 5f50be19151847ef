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
    workload's ``offered_rate_req_per_s`` and ``concurrency``): the requests waited at the client for a free slot, as
    a benchmark client's do — a saturated run. None when they kept up (or with under two sends)."""
    sent = columns_from(run).arrival_s  # a closed loop's arrival is its send
    offered, users = info.get("offered_rate_req_per_s"), int(info.get("concurrency") or 0)
    span = float(sent.max() - sent.min()) if sent.size > 1 else 0.0
    if not offered or not math.isfinite(offered) or span <= 0 or (sent.size - 1) / span >= BEHIND * offered:
        return None
    rate = (sent.size - 1) / span
    return PacedBehind(offered, rate, users, N.paced_behind(offered, rate, users))
