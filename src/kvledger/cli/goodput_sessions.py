"""``goodput --simulate --workload chat|agent``: the multi-turn session workload of ``simulate`` and ``search``, with
their meaning and checks. One run (no ``--target``) draws ``--sessions`` sessions at ``--session-rate`` session
starts per second as ``simulate`` does (``sim_tiers.prepare_sessions``, the context cap of ``session_args``); the
``--target`` search probes turn rates as ``search --workload`` does (``session_spec.SessionSpec``), so
``--session-rate`` (one run's load) does not apply there."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvledger.cli.flag_groups import GroupUse
from kvledger.cli.session_flags import SessionFlags

__all__ = ["GOODPUT_SESSIONS", "goodput_request"]

GOODPUT_SESSIONS = GroupUse(SessionFlags, prefix="[--simulate] ")


@dataclass(frozen=True, slots=True)
class _OneRun:
    """One run of sessions as ``kvledger simulate --workload`` draws them (its ``SimPrepare``)."""

    workload: str
    sessions: int
    session_rate: float
    cap_source: str

    def prepare_setup(self, args: Any) -> Any:
        from kvledger.analyses.serving.session_ramp import loop_note
        from kvledger.analyses.serving.sim_tiers import prepare_sessions

        setup = prepare_sessions(args, self.workload, self.sessions, self.session_rate, self.cap_source)
        setup.notes += loop_note(setup.workload.sessions, self.session_rate, setup.replicas)
        return setup


def goodput_request(model: str, gpu: str | None, groups: tuple, target: float | None, axis: str,
                    num_requests_default: int | None = None) -> tuple[Any, Any]:
    """(SimRequestArgs, the workload spec: synthetic, sessions or None for a trace) from goodput's workload, engine
    and session groups (``sim_opts.sim_request`` without sessions).

    Raises:
        InputError: a session flag without --workload, workload flags sessions ignore (``check_session_flags``, as
            simulate), --session-rate with --target, an axis other than the rate with sessions, a count or rate out
            of range.
    """
    from kvledger.cli.sim_opts import sim_request
    from kvledger.cli.tier_opts import check_session_flags

    workload, engine, sessions = groups
    if not check_session_flags(sessions, workload):
        return sim_request(model, gpu, workload, engine, num_requests_default=num_requests_default)
    from kvledger.analyses.serving.sim_boundary import normalize_axis
    from kvledger.analyses.serving.sim_tiers import DEFAULT_SESSION_RATE, DEFAULT_SESSIONS, session_args
    from kvledger.errors import InputError
    from kvledger.ranges import check_options

    check_options("goodput", {"sessions": sessions.sessions, "session_rate": sessions.session_rate})
    args, _ = sim_request(model, gpu, workload, engine)
    args, cap_source = session_args(args)  # the session rule of every command: offload's default context cap
    kind = sessions.session_workload.strip().lower()
    n = DEFAULT_SESSIONS if sessions.sessions is None else sessions.sessions
    if target is None:
        rate = DEFAULT_SESSION_RATE if sessions.session_rate is None else sessions.session_rate
        from kvledger.analyses.serving.session_spec import SessionSpec

        SessionSpec(kind, n)  # the preset's name, as simulate and search check it
        return args, _OneRun(kind, n, rate, cap_source)
    if sessions.session_rate is not None:
        raise InputError("--session-rate sets one run's load; --target searches the load (turn rates, session starts "
                         "× turns per session): drop one of them")
    if normalize_axis(axis) != "request_rate":
        raise InputError(f"--workload {kind} is searched on the turn rate (--axis request_rate), not {axis}")
    from kvledger.analyses.serving.session_spec import SessionSpec

    return args, SessionSpec(kind, n, int(args.max_model_len), cap_source)
