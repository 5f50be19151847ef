"""The synthetic multi-turn session group (``simulate``, ``search``): one of the flag groups of ``flag_groups.py``,
declared apart to keep that module small."""

from __future__ import annotations

from dataclasses import dataclass

from kvledger.cli.flag_groups import flag

__all__ = ["SessionFlags", "SESSION_MAX_MODEL_LEN_HELP"]

SESSION_MAX_MODEL_LEN_HELP = ("Tokens (8192; 8K = 8,192, 8k = 8,000 as vLLM reads them); default: from the config, "
                              "but 32K with --workload (the config's where smaller).")
"""``--max-model-len``'s help where the command takes ``--workload``: a session run's default is
``judgments.offload.SESSION_MAX_MODEL_LEN_TOKENS`` (32,768), capped at the model's context (``session_context_cap``)."""


@dataclass(frozen=True, slots=True)
class SessionFlags:
    """A synthetic multi-turn session workload (``dynamics/workload/sessions.py``: stated distributions, not fits)."""

    session_workload: str | None = flag("--workload", help=(
        "Multi-turn sessions instead of a trace: chat (~4 turns, 30 s think time) or agent (~20 tool calls, 2 s "
        "tool time); the distributions are kvledger.dynamics.workload.sessions.SESSION_SHAPES."))
    sessions: int | None = flag("--sessions", help="Sessions to draw, count (default 200).")
    session_rate: float | None = flag("--session-rate", help="Session starts per second, Poisson (default 0.2).")
