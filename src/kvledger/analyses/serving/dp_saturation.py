"""Saturation of vLLM's data-parallel ranks judged rank by rank.

Each DP rank is its own engine core with its own scheduler, waiting queue and KV pool (vLLM 0.19.0 and 0.33.0
``v1/engine/core.py : DPEngineCoreProc``); the front end routes each request to one rank for good
(``core_client.py : DPLBAsyncMPClient``). A rank whose queue grows cannot hand its requests to an idle rank, so one
saturated rank makes its requests' TTFT measure its queue whatever the other ranks do. The group's backlog hides it: a
growth that is an overload on one rank's requests can be under the thresholds ``queue_growth`` scales by the whole
group's requests (5 % of the arrivals). So a DP run's open loop is read with ``queue_growth.open_loop_check`` on each
rank's own requests (those it was routed; a request refused before routing counts on none), and the run is saturated
when any rank is. The first saturated rank's growth stands for the run where the group's did not show one, its note
naming the rank, also where the group's read was too short to tell: a rank's growth past its burst allowance below
was read on a span long enough for that rank's own requests, so it is evidence of saturation the group's could not
give, and the run is not also called too short. An SLO-capacity probe on DP ranks counts out as one whose group queue
grew does (``queue_growth.probe_queue_grew``) where a rank's own queue grew past what the trace's bursts can add to it.

A rank is read from 1/N of the requests, so its backlog is N times smaller and its swings relatively √N times larger,
and N ranks tested give N chances for one of them to pass the thresholds by its bursts alone (DeepSeek-V3 on 8 H200
DP ranks, vLLM 0.19.0's balancing, 2,000 Poisson requests of 1,024/256 tokens at 24 req/s, half the 48 at which their
queues grew: seed 6's ranks 0 and 1 ended with 109 in the system against 99 expected, past the thresholds, while the
group kept up; in a lock-step run every rank slowed by one sent too much passes them too). So a rank's
growth counts only beyond the burst allowance of ``queue_growth`` — z × √(D × expected), D the dispersion of the
rank's own arrivals and expected its own kept-up backlog, a Poisson count's spread — with z tightened for the ranks
tested (``rank_z``): the single run's ``SUSTAINED_Z`` leaves a one-sided normal tail of 1 − Φ(3) = 0.00135, and
Bonferroni shares it among the N ranks, z = Φ⁻¹(1 − 0.00135 ÷ N) (3.21 for 2 ranks, 3.58 for 8, 3.76 for 16), so that
some rank's bursts call the run saturated no more often than one run's bursts count a probe out. A rank whose queue
grew within that allowance is not called saturated (its growth stays in ``rank_growths``).
"""

from __future__ import annotations

from dataclasses import replace
from statistics import NormalDist
from typing import Any

from kvledger.analyses.serving import notes as N
from kvledger.records import RunRecords

__all__ = ["RULE", "rank_growths", "rank_overload", "rank_probe_grew", "rank_saturated", "rank_z",
           "saturation_figures"]

RULE = ("saturation judged per DP rank: each rank's own requests read by the queue-growth check "
        "(analyses/serving/queue_growth.py), its growth counted only beyond z × √(D × its expected backlog), D its own "
        "arrivals' dispersion and z = Φ⁻¹(1 − 0.00135 ÷ N ranks) (the single run's 3 tightened by Bonferroni for the N "
        "ranks tested); a rank's queue cannot move to another rank (vLLM v1/engine/core_client.py DPLBAsyncMPClient "
        "routes each request to one rank), so the run is saturated when any rank is")


def rank_z(dp: int) -> float:
    """The burst allowance's z for each of ``dp`` ranks tested (module doc): Φ⁻¹(1 − (1 − Φ(SUSTAINED_Z)) ÷ dp)."""
    from kvledger.analyses.serving.queue_growth import SUSTAINED_Z

    if dp <= 1:
        return SUSTAINED_Z
    normal = NormalDist()
    return normal.inv_cdf(1.0 - (1.0 - normal.cdf(SUSTAINED_Z)) / dp)


def rank_saturated(q: Any) -> bool:
    """Whether a rank's queue growth (``rank_growths``) saturates it: it grew past its burst allowance."""
    return q is not None and not q.within_bursts


def rank_growths(run: RunRecords, ranks: list[int], dp: int, advice: str = N.OVERLOAD_ADVICE_SIMULATE) -> list[Any]:
    """Each rank's queue growth over its own requests (``queue_growth.open_loop_check``'s overload, its burst allowance
    at ``rank_z(dp)``; None: it kept up, was too short to tell, or had fewer than 20 requests). ``ranks``: the rank of
    each record in ``run`` (-1: routed to none); ``dp``: the ranks. Saturated: ``rank_saturated``."""
    from kvledger.analyses.serving.queue_growth import open_loop_check

    recs, z = run.records, rank_z(dp)
    out = []
    for k in range(dp):
        own = [r for r, rank in zip(recs, ranks) if rank == k]
        out.append(open_loop_check(RunRecords(own, run.metadata), advice, z)[0] if own else None)
    return out


def rank_overload(growths: list[Any], dp: int) -> Any:
    """The first saturated rank's growth (``rank_saturated``) with its note naming the rank and the rule (module doc);
    None when no rank's queue grew past its burst allowance."""
    for k, q in enumerate(growths):
        if rank_saturated(q):
            others = sum(1 for g in growths if not rank_saturated(g))  # kept up, within bursts, short or under 20
            return replace(q, note=f"DP rank {k} of {dp} (its own requests; {others} of the {dp} ranks showed no "
                                   f"queue growth past their bursts; a rank counts as saturated only beyond "
                                   f"{rank_z(dp):.2f} × √(D × its expected backlog), the single run's 3 tightened "
                                   f"for {dp} ranks tested, Bonferroni: Φ⁻¹(1 − 0.00135 ÷ {dp})): {q.note}")
    return None


def saturation_figures(growths: list[Any], *, too_short: bool = False, run_grew: bool = False) -> dict[str, Any]:
    """The per-rank verdict for the data-parallel figures: the saturated ranks (their index) and the rule. Where no
    rank's own queue grew, the run's own read qualifies it: ``too_short`` (the run was too short to tell whether it
    kept up, ``queue_growth.open_loop_check``: no rank's read can say more than the run's) adds
    ``"too_short_to_tell": true``; ``run_grew`` (all ranks' requests together showed the queue growing where no one
    rank's did past its own burst allowance) adds ``"run_queue_grew": true``."""
    sat = [k for k, q in enumerate(growths) if rank_saturated(q)]
    qualified = {} if sat else {"too_short_to_tell": True} if too_short else {"run_queue_grew": True} if run_grew \
        else {}
    return {"saturated_ranks": sat, "saturation_judged": "per rank", "saturation_rule": RULE, **qualified}


def rank_probe_grew(run: RunRecords, ranks: list[int], dp: int) -> bool:
    """Whether an open-loop capacity probe on ``dp`` DP ranks did not sustain its load on some rank: that rank's own
    queue grew past its bursts (``rank_saturated``: ``QueueGrowth.within_bursts`` at ``rank_z(dp)``, as
    ``queue_growth.probe_queue_grew`` reads a run at ``SUSTAINED_Z``)."""
    return any(rank_saturated(q) for q in rank_growths(run, ranks, dp))
