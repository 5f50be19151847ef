"""How many sessions a run needs before its turns arrive at the rate its session starts promise: the ramp-up of a
session workload, the session count that reaches a steady state, and the sentence a run of too few prints.

A session started at ``s`` sends its turn ``k`` at ``s + o_k``, ``o_k`` the think times before it (``o_1`` = 0; each
turn's own latency only adds). With starts at ``r`` sessions/s and ``T`` turns per session, the turns arrive at time
``t`` (while sessions still start) at ``r × T × F(t)``, ``F`` the share of all turns whose offset is ≤ ``t``: the
rate climbs for ``t_ramp = F⁻¹(STEADY_SHARE)`` seconds to ``STEADY_SHARE`` of the steady ``R = r × T``, holds while
sessions start (until ``N ÷ r``), then falls as the last sessions end. A run of ``N`` sessions holds ≥ 90% of ``R``
for at least as long as it ramped when ``N ÷ r ≥ 2 × t_ramp``, i.e.

    N ≥ 2 × r × t_ramp = 2 × R × t_ramp ÷ T                     (``steady_sessions``)

Fewer sessions, and the run stops before it has carried its nominal rate for long: its latencies understate what a
sustained load of the same rate does (a queue that grows for longer, a KV pool that fills).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from dataclasses import dataclass
from typing import Any

__all__ = ["STEADY_SHARE", "REACH_SHARE", "turn_offsets_s", "ramp_s", "steady_sessions", "reach_req_per_s",
           "short_run_note", "loop_note", "Carried", "carried", "not_carried", "sessions_limit", "not_carried_note"]

STEADY_SHARE = 0.9
"""kvledger rule: a session run's turn rate counts as reached at 90% of ``session rate × turns per session``."""
REACH_SHARE = 0.75
"""kvledger rule: a probe whose turns peaked below 75% of its rate (``Carried.peak_share``: latencies lengthened its
sessions past what its count was derived for) did not carry that rate: it is no capacity."""


def turn_offsets_s(sessions: Any) -> list[float]:
    """Every turn's send time after its session's start, think times only (``workload.sessions.Session``), s."""
    out = []
    for s in sessions:
        t = 0.0
        for k, turn in enumerate(s.turns):
            t += turn.think_s if k else 0.0
            out.append(t)
    return out


def ramp_s(sessions: Any) -> float:
    """``t_ramp``: the ``STEADY_SHARE`` quantile (nearest rank, the ⌈0.9 × n⌉-th smallest) of the turns' offsets, s."""
    offs = sorted(turn_offsets_s(sessions))
    if not offs:
        return 0.0
    return offs[max(0, math.ceil(STEADY_SHARE * len(offs)) - 1)]


def steady_sessions(rate_req_per_s: float, turns_per_session: float, ramp: float) -> int:
    """Sessions a run at ``rate_req_per_s`` turns/s needs to reach a steady state: ⌈2 × R × t_ramp ÷ T⌉ (≥ 1)."""
    return max(1, math.ceil(2 * rate_req_per_s * ramp / turns_per_session - 1e-9))


def reach_req_per_s(num_sessions: int, turns_per_session: float, ramp: float) -> float:
    """The highest turn rate ``num_sessions`` sessions hold steady: ``N × T ÷ (2 × t_ramp)`` (inf without a ramp)."""
    return math.inf if ramp <= 0 else num_sessions * turns_per_session / (2 * ramp)


def short_run_note(num_sessions: int, session_rate: float, turns_per_session: float, ramp: float,
                   replicas: int = 1) -> str | None:
    """simulate's sentence when ``num_sessions`` sessions starting at ``session_rate``/s are too few to reach their
    steady turn rate (``steady_sessions``); None when they are enough."""
    rate = session_rate * turns_per_session
    need = steady_sessions(rate, turns_per_session, ramp)
    if num_sessions >= need:
        return None
    span = num_sessions / session_rate
    per = "" if replicas == 1 else (f" ({rate / replicas:.4g} per replica on {replicas:,} replicas, each serving "
                                    f"about {num_sessions / replicas:,.0f} sessions' turns)")
    return (f"sessions: too few to reach a steady state: {num_sessions:,} sessions starting at {session_rate:g}/s "
            f"start within {span:,.0f} s, less than twice the {ramp:,.0f} s within which {STEADY_SHARE:.0%} of a "
            f"session's turns are sent (think times alone, the draw's {STEADY_SHARE:.0%} quantile), so the turns "
            f"never hold the steady {rate:.4g}/s ({session_rate:g} × {turns_per_session:.4g} turns per session)"
            f"{per} for long and the run shows less load than a sustained --session-rate {session_rate:g}; "
            f"{need:,} sessions (2 × {rate:.4g}/s × {ramp:,.0f} s ÷ {turns_per_session:.4g}) reach one: raise "
            f"--sessions to {need:,} before reading its latencies as the steady load's")


def loop_note(sessions: Any, session_rate: float, replicas: int = 1) -> list[str]:
    """``short_run_note`` of the drawn ``sessions`` (their turns per session and ramp) as a list: [] when enough."""
    turns = sum(len(s.turns) for s in sessions) / len(sessions)
    note = short_run_note(len(sessions), session_rate, turns, ramp_s(sessions), replicas)
    return [] if note is None else [note]


@dataclass(frozen=True, slots=True)
class Carried:
    """What a simulated session run carried, read from its turns (ids ``s<i>-t<k>``, ``workload.sessions.turn_specs``).

    Attributes:
        num_sessions / num_turns: counts. ramp_s: ``t_ramp`` measured (the 90% quantile of the turns' arrivals after
            their session's first turn: think times and the turns' own latencies), s. starts_s: first session start
            → last session start, s. peak_share: ``F(starts_s)``, the share of the turns sent within ``starts_s`` of
            their session's start: the turn rate at the last start, as a share of the steady one (its peak).
    """

    num_sessions: int
    num_turns: int
    ramp_s: float
    starts_s: float
    peak_share: float

    def reach_req_per_s(self) -> float:
        """``reach_req_per_s`` of these sessions at their measured ramp."""
        return reach_req_per_s(self.num_sessions, self.num_turns / self.num_sessions, self.ramp_s)


def carried(run: Any) -> Carried | None:
    """The ``Carried`` figures of a simulated session run (``RunRecords``); None for a run that is not one."""
    recs = list(run.records) if run is not None and hasattr(run, "records") else []
    start: dict[str, float] = {}
    for r in recs:
        head, sep, k = r.request_id.rpartition("-t")
        if not sep or not k.isdigit():
            return None
        if k == "0":
            start[head] = r.arrival_s
    if not start:
        return None
    offs = sorted(r.arrival_s - start.get(r.request_id.rpartition("-t")[0], r.arrival_s) for r in recs)
    span = max(start.values()) - min(start.values())
    return Carried(len(start), len(recs), offs[max(0, math.ceil(STEADY_SHARE * len(offs)) - 1)], span,
                   bisect_right(offs, span) / len(offs))


def not_carried(run: Any) -> Carried | None:
    """``carried(run)`` where the session run's turns peaked below ``REACH_SHARE`` of its rate: a rate search counts
    such a probe as a miss whatever its attainment (a closed loop of N sessions never holds more than N turns, so its
    attainment stays high at a rate it never carried), as a probe too short to show its load; None otherwise."""
    c = carried(run)
    return c if c is not None and c.peak_share < REACH_SHARE else None


def sessions_limit(uncarried: dict[float, Carried | None], met: dict[float, bool],
                   num_sessions: int | None) -> dict[str, Any] | None:
    """Where a rate search's session probes ``uncarried`` (rate → ``not_carried``) met the attainment target (``met``:
    rate → attainment ≥ target) at rates their sessions never carried, so that the capacity found below them is at
    least that, limited by the sessions per probe: ``sessions`` (``--sessions``, None if not known), the rates
    ``not_carried_req_per_s``, and ``sessions_needed`` to carry the lowest of them (``steady_sessions`` on its
    measured T and ramp, latencies included) with its figures; None when there are none."""
    rates = sorted(r for r, c in uncarried.items() if c is not None and met.get(r))
    if not rates:
        return None
    c = uncarried[rates[0]]
    assert c is not None
    turns = c.num_turns / c.num_sessions
    return {"sessions": num_sessions, "not_carried_req_per_s": rates, "probe_sessions": c.num_sessions,
            "starts_s": c.starts_s, "peak_share": c.peak_share, "ramp_s": c.ramp_s, "turns_per_session": turns,
            "sessions_needed": steady_sessions(rates[0], turns, c.ramp_s)}


def not_carried_note(limit: dict[str, Any] | None) -> list[str]:
    """The note of a ``sessions_limit``: the probes that count as misses and the sessions that carry the lowest; []
    when none."""
    if limit is None:
        return []
    r, need = limit["not_carried_req_per_s"][0], limit["sessions_needed"]
    given = "" if limit["sessions"] is None else f" (--sessions {limit['sessions']:,})"
    return [f"sessions not carried: {', '.join(f'{v:.4g}' for v in limit['not_carried_req_per_s'])} req/s met the "
            f"attainment target, but their sessions never carried that rate (at {r:.4g} req/s "
            f"{limit['probe_sessions']:,} sessions started within {limit['starts_s']:,.0f} s, by when "
            f"{limit['peak_share']:.0%} of a session's turns are sent, latencies included; under {REACH_SHARE:.0%}): "
            f"they count as misses, so the capacity found below them is a lower bound, limited by the sessions per "
            f"probe{given}, not by the engine; {need:,} sessions (2 × {r:.4g} req/s × {limit['ramp_s']:,.0f} s ÷ "
            f"{limit['turns_per_session']:.4g} turns per session) carry {r:.4g} req/s: raise --sessions to {need:,} "
            "to measure above it"]
