"""Saturation of vLLM's data-parallel ranks judged rank by rank.

Each DP rank is its own engine core with its own scheduler, waiting queue and KV pool (vLLM 0.19.0 and 0.33.0
``v1/engine/core.py : DPEngineCoreProc``); the front end routes each request to one rank for good
(``core_client.py : DPLBAsyncMPClient``). A rank whose queue grows cannot hand its requests to an idle rank, so one
saturated rank makes its requests' TTFT measure its queue whatever the other ranks do. The group's backlog hides it: a
growth that is an overload on one rank's requests can be under the thresholds ``queue_growth`` scales by the whole
group's requests (5 % of the arrivals). So a DP run's open loop is read with ``queue_growth.open_loop_check`` on each
rank's own requests (those it was routed; a request refused before routing counts on none), and the run is saturated
when any rank is. The first saturated rank's growth stands for the run where the group's did not show one, its note
naming the rank. An SLO-capacity probe on DP ranks counts out as one whose group queue grew does
(``queue_growth.probe_queue_grew``) where a rank's own queue grew past what the trace's bursts can add to it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kvledger.analyses.serving import notes as N
from kvledger.records import RunRecords

__all__ = ["RULE", "rank_growths", "rank_overload", "rank_probe_grew", "saturation_figures"]

RULE = ("saturation judged per DP rank: each rank's own requests read by the queue-growth check "
        "(analyses/serving/queue_growth.py), a rank's queue cannot move to another rank (vLLM "
        "v1/engine/core_client.py DPLBAsyncMPClient routes each request to one rank), so the run is saturated when "
        "any rank is")


def rank_growths(run: RunRecords, ranks: list[int], dp: int, advice: str = N.OVERLOAD_ADVICE_SIMULATE) -> list[Any]:
    """Each rank's queue growth over its own requests (``queue_growth.open_loop_check``'s overload; None: it kept up,
    was too short to tell, or had fewer than 20 requests). ``ranks``: the rank of each record in ``run`` (-1: routed
    to none); ``dp``: the ranks."""
    from kvledger.analyses.serving.queue_growth import open_loop_check

    recs = run.records
    out = []
    for k in range(dp):
        own = [r for r, rank in zip(recs, ranks) if rank == k]
        out.append(open_loop_check(RunRecords(own, run.metadata), advice)[0] if own else None)
    return out


def rank_overload(growths: list[Any], dp: int) -> Any:
    """The first saturated rank's growth with its note naming the rank (module doc); None when no rank's queue grew."""
    for k, q in enumerate(growths):
        if q is not None:
            others = sum(1 for g in growths if g is None)  # kept up, too short to tell or under 20 requests
            return replace(q, note=f"DP rank {k} of {dp} (its own requests; {others} of the {dp} ranks showed no "
                                   f"queue growth): {q.note}")
    return None


def saturation_figures(growths: list[Any]) -> dict[str, Any]:
    """The per-rank verdict for the data-parallel figures: the saturated ranks (their index) and the rule."""
    return {"saturated_ranks": [k for k, q in enumerate(growths) if q is not None],
            "saturation_judged": "per rank", "saturation_rule": RULE}


def rank_probe_grew(run: RunRecords, ranks: list[int], dp: int) -> bool:
    """Whether an open-loop capacity probe on ``dp`` DP ranks did not sustain its load on some rank: that rank's own
    queue grew past its bursts (``QueueGrowth.within_bursts``, as ``queue_growth.probe_queue_grew`` reads a run)."""
    return any(q is not None and not q.within_bursts for q in rank_growths(run, ranks, dp))
