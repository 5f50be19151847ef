"""A multi-turn session workload for the rate searches (``search --workload chat|agent``): the presets of
``dynamics/workload/sessions.py`` drawn with a seed, at a session start rate set from the request (turn) rate the
search probes.

The search's load axis is requests per second, so a session workload is probed at a turn rate ``R``: the sessions are
drawn once at 1 session/s to count their turns ``T`` over ``N`` sessions, then again with the same seed at ``R × N ÷ T``
sessions/s. The second draw consumes the generator exactly as the first (the start gaps are Exponential(1 ÷ rate)
= (1 ÷ rate) × a standard exponential from the same bits), so every probe serves the same sessions — the same turns,
lengths and think times — only their starts scaled; in a steady state the turns then arrive at ``R`` per second. Each
session is a closed loop (a turn is sent its think time after the previous one finished), so a probe that is short
beside a session's length never reaches that steady state: a probe whose rate ``--sessions`` sessions cannot reach
draws as many as reach it (``probe_sessions``, the count ``session_ramp.steady_sessions`` derives), and serves the
sessions of that larger draw.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from kvledger.errors import InputError

__all__ = ["SessionSpec", "steady_goodput", "CapacityNotMeasured", "STEADY_NOTE"]

STEADY_NOTE = "session workload: capacity at the steady state"
"""How ``steady_goodput``'s note starts (goodput's view looks for it to give the steady figure first)."""

_MAX_REDRAWS = 8
"""Draws ``SessionSpec.probe_sessions`` tries before it keeps the last count (each draw's T and t_ramp move little)."""


class CapacityNotMeasured(InputError):
    """A session probe too short to carry its rate: the rate is no capacity to size on (``steady_goodput``)."""


@dataclass(frozen=True, slots=True)
class SessionSpec:
    """Sessions of a preset shape as a search workload.

    Attributes:
        workload: the preset, ``chat`` or ``agent`` (``dynamics.workload.sessions.SESSION_SHAPES``).
        num_sessions: sessions per probe, count.
        context_cap_tokens / context_cap_source: the sessions' context cap (the run's max_model_len), tokens, and
            where it came from (``judgments/offload.py : session_context_cap``, the rule of every session command);
            None / "" when the caller sets max_model_len itself.
    """

    workload: str
    num_sessions: int = 200
    context_cap_tokens: int | None = None
    context_cap_source: str = ""

    def __post_init__(self) -> None:
        from kvledger.dynamics.workload.sessions import SESSION_SHAPES

        if self.workload not in SESSION_SHAPES:
            raise InputError(f"--workload must be one of {', '.join(SESSION_SHAPES)}, got {self.workload!r}")
        if isinstance(self.num_sessions, bool) or not isinstance(self.num_sessions, int) or not (
                1 <= self.num_sessions <= 1_000_000):
            raise InputError(f"--sessions must be a whole number in [1, 1,000,000], got {self.num_sessions!r}")

    @property
    def label(self) -> str:
        cap = "" if self.context_cap_tokens is None else f", context ≤ {self.context_cap_tokens:,} tokens"
        return f"{self.workload} sessions ({self.num_sessions:,} per probe{cap})"

    @property
    def cap_words(self) -> str:
        """The context cap in words (``, context cap N tokens (source)``), "" when none was set here."""
        if self.context_cap_tokens is None:
            return ""
        return f", context cap {self.context_cap_tokens:,} tokens ({self.context_cap_source})"

    @property
    def rate_note(self) -> str:
        return ("session workload: the axis value is the nominal turn rate (session starts × turns per session); "
                "the offered rate of each probe (its turns ÷ their arrival span) is listed next to it")

    def draw(self, seed: int, max_model_len: int) -> list[Any]:
        """The sessions of ``sim_tiers.prepare_sessions``'s draw at 1 session/s (the same turns at any rate), each
        stopping before it would pass ``max_model_len``."""
        import numpy as np

        from kvledger.dynamics.workload.sessions import SESSION_SHAPES, synthesize_sessions

        base = SESSION_SHAPES[self.workload]
        shape = replace(base, max_context_tokens=min(base.max_context_tokens, max_model_len))
        return synthesize_sessions(shape, self.num_sessions, 1.0, np.random.default_rng(seed))

    def turns_per_session(self, seed: int, max_model_len: int) -> float:
        """Mean turns per drawn session, every start counted (``draw``)."""
        return sum(len(s.turns) for s in self.draw(seed, max_model_len)) / self.num_sessions

    def probe_sessions(self, rate_req_per_s: float, seed: int, max_model_len: int) -> int:
        """Sessions a probe at ``rate_req_per_s`` turns/s draws: ``num_sessions``, or more where that many cannot
        reach the rate — ``session_ramp.steady_sessions`` (⌈2 × R × t_ramp ÷ T⌉) on the turns per session ``T`` and
        ramp ``t_ramp`` of the draw of that many sessions, so each probe carries its rate at a steady state for as long
        as it ramped up."""
        from kvledger.analyses.serving.session_ramp import ramp_s, steady_sessions

        n = self.num_sessions
        for _ in range(_MAX_REDRAWS):  # the count's own draw sets T and t_ramp: redrawn until it needs no more
            drawn = replace(self, num_sessions=n).draw(seed, max_model_len)
            need = steady_sessions(rate_req_per_s, sum(len(s.turns) for s in drawn) / n, ramp_s(drawn))
            if need <= n:
                break
            n = need
        return n

    def reach_words(self, seed: int, max_model_len: int) -> str:
        """How the session count of a probe follows from its rate, in words for the search's table legend."""
        from kvledger.analyses.serving.session_ramp import ramp_s, reach_req_per_s

        drawn = self.draw(seed, max_model_len)
        turns, ramp = sum(len(s.turns) for s in drawn) / self.num_sessions, ramp_s(drawn)
        return (f"{self.num_sessions:,} sessions reach {reach_req_per_s(self.num_sessions, turns, ramp):.3g} req/s "
                f"(2 × R × t_ramp ÷ T ≤ N: their draw's T {turns:.4g} turns per session, t_ramp {ramp:,.0f} s for 90% "
                "of a session's turns); a probe at a rate they cannot reach draws as many as reach it, each draw's "
                "own T and t_ramp (a steady state as long as the ramp-up)")

    def session_rate(self, rate_req_per_s: float | None, seed: int, max_model_len: int) -> float:
        """Session starts per second whose turns arrive at ``rate_req_per_s`` in a steady state.

        Raises:
            InputError: a rate that is not a positive finite number.
        """
        return _turn_rate(rate_req_per_s) / self.turns_per_session(seed, max_model_len)

    def prepare_setup(self, args: Any) -> Any:
        """The prepared simulation (``sim_tiers.prepare_sessions``) of these sessions at the turn rate ``args.rate``.

        Raises:
            InputError: --concurrency or --rate-scale given (the turn rate drives a session workload), or what
                ``prepare`` refuses.
        """
        from kvledger.analyses.serving.sim_setup import load_plan
        from kvledger.analyses.serving.sim_tiers import prepare_sessions

        if args.concurrency is not None or args.rate_scale is not None:
            raise InputError("a session workload is driven by its turn rate (--rate); --concurrency and --rate-scale "
                             "do not apply")
        mml = load_plan(args)[0].memory.max_model_len
        n = self.probe_sessions(_turn_rate(args.rate), args.seed, mml)
        spec = self if n == self.num_sessions else replace(self, num_sessions=n)
        session_rate = spec.session_rate(args.rate, args.seed, mml)
        setup = prepare_sessions(args, self.workload, n, session_rate, self.context_cap_source or None)
        label = self.label if n == self.num_sessions else spec.label.replace(
            " per probe", f" per probe at {args.rate:.4g} req/s: more than --sessions {self.num_sessions:,}, which "
                          "reach less")
        setup.workload_info.update({"trace": label, "offered_rate_req_per_s": args.rate,
                                    "session_rate_per_s": session_rate, "probe_sessions": n})
        return setup


def _turn_rate(rate_req_per_s: float | None) -> float:
    """``rate_req_per_s`` when it is a positive finite number.

    Raises:
        InputError: any other rate.
    """
    if rate_req_per_s is None or not (math.isfinite(rate_req_per_s) and rate_req_per_s > 0):
        raise InputError(f"a session workload needs a finite turn rate > 0 req/s, got {rate_req_per_s!r}")
    return rate_req_per_s


def steady_goodput(gp: Any, rate_req_per_s: float, run: Any = None) -> tuple[Any, str]:
    """(the goodput of a session probe at its steady state, the note saying so).

    A probe of N closed-loop sessions ramps up over a session's length and drains over another, so good turns ÷
    (first arrival → last finish) understates what the replica sustains at the turn rate ``R`` it was probed at. The
    steady state serves ``R`` turns/s of which the attainment are good: every goodput and throughput figure is scaled
    by ``f = R × attainment ÷ goodput`` (the turns' token mix kept), the duration divided by it. That holds only if
    the probe reached its steady state: ``run``'s turns (``session_ramp.carried``) show whether its sessions kept
    starting after the ramp-up (latencies included) was over.

    Raises:
        CapacityNotMeasured: the probe's sessions all started before its ramp-up was over (a closed loop of N sessions
            never holds more than N turns, so its attainment stays high at any rate): it names the rate they reach
            (``session_ramp.reach_req_per_s``) and the sessions that reach ``R`` (``steady_sessions``).
    """
    from kvledger.analyses.serving.session_ramp import REACH_SHARE, carried, steady_sessions

    c = carried(run)
    if c is not None and c.peak_share < REACH_SHARE:
        need = steady_sessions(rate_req_per_s, c.num_turns / c.num_sessions, c.ramp_s)
        raise CapacityNotMeasured(
            f"capacity not measured: the probe at {rate_req_per_s:.4g} req/s started its {c.num_sessions:,} sessions "
            f"within {c.starts_s:,.0f} s, by when {c.peak_share:.0%} of a session's turns are sent (latencies "
            f"included; 90% within {c.ramp_s:,.0f} s), so its turns never arrived faster than about "
            f"{c.peak_share * rate_req_per_s:.3g} req/s: {c.num_sessions:,} sessions reach at most "
            f"{c.reach_req_per_s():.3g} req/s, this rate was never carried; raise --sessions to {need:,}")
    if not gp.goodput_req_per_s:
        return gp, ""
    f = rate_req_per_s * gp.attainment / gp.goodput_req_per_s

    def x(v: float | None) -> float | None:
        return None if v is None else v * f

    out = replace(gp, duration_s=None if gp.duration_s is None else gp.duration_s / f,
                  goodput_req_per_s=x(gp.goodput_req_per_s), throughput_req_per_s=x(gp.throughput_req_per_s),
                  goodput_output_tok_per_s=x(gp.goodput_output_tok_per_s),
                  throughput_output_tok_per_s=x(gp.throughput_output_tok_per_s),
                  goodput_input_tok_per_s=x(gp.goodput_input_tok_per_s),
                  throughput_input_tok_per_s=x(gp.throughput_input_tok_per_s))
    return out, (f"{STEADY_NOTE}, {rate_req_per_s:.4g} turns/s × attainment "
                 f"{gp.attainment:.3f} = {out.goodput_req_per_s:.4g} good req/s (the whole probe, ramp-up and drain "
                 f"of its sessions included: {gp.goodput_req_per_s:.4g}); more --sessions per probe bring the two "
                 "closer")
