"""Sessions as a workload: multi-turn conversations and agent loops whose turns reuse the conversation so far, sent one
after another with a think (or tool) time between a turn's finish and the next turn.

A session is a system prompt shared by every session of the workload, then turns. Turn ``k`` sends

    prompt_k = system + Σ_{i<k} (input_i + output_i) + input_k        (the whole conversation so far)

and is sent ``think_k`` seconds after turn ``k−1`` finished (a closed loop per session: ``SessionLoop``). Prompt
content is described by segment ids (``RequestSpec.prefix_segments``): segment ``j`` of a session's token stream has
one id, the same in every turn of that session, and segments wholly inside the system prompt share ids across
sessions. So turn ``k`` can hit every whole segment of turn ``k−1``'s prompt, and (``reuse_output``, the default)
of its output: turn ``k−1`` lists the segments wholly inside its prompt + output as ``output_segments``, and the
caches keep its decoded full blocks (vLLM hashes every full block, decoded ones included; SGLang's
``cache_finished_req`` inserts the output), so turn ``k`` hits them when the chat template renders the assistant
message back as the same tokens. ``reuse_output=False`` recomputes them (a template that re-renders the message
differently, e.g. dropping reasoning). A session ends at its drawn number of turns or before a turn whose prompt +
output would pass ``max_context_tokens``.

``synthesize_sessions`` draws sessions from stated distributions with an explicit ``numpy.random.Generator``.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from kvledger.dynamics.engine.request import RequestSpec
from kvledger.errors import InputError

__all__ = ["Turn", "Session", "SessionShape", "SessionLoop", "synthesize_sessions", "turn_specs", "CHAT", "AGENT",
           "SESSION_SHAPES"]


@dataclass(frozen=True, slots=True)
class Turn:
    """One turn: new input tokens, output tokens, and the pause before it is sent (after the previous finish), s."""

    input_tokens: int
    output_tokens: int
    think_s: float = 0.0


@dataclass(frozen=True)
class Session:
    """One conversation or agent loop.

    Attributes:
        session_id: unique in the workload (also the requests' ``client_id``, for session-affinity routing).
        start_s: when its first turn is sent, s.
        turns: the turns in order (the first turn's ``think_s`` is ignored).
        system_tokens: leading tokens shared with every session of the workload (system prompt, tool schemas).
        index: the session's number, used in its segment ids.
    """

    session_id: str
    start_s: float
    turns: tuple[Turn, ...]
    system_tokens: int = 0
    index: int = 0


@dataclass(frozen=True)
class SessionShape:
    """Stated distributions a synthetic session workload is drawn from.

    Attributes:
        mean_turns: turns per session ~ 1 + Geometric (mean ``mean_turns``), capped at ``max_turns``.
        first_input_median_tokens / input_median_tokens / output_median_tokens: lognormal medians, tokens;
            ``length_sigma``: their log-space standard deviation.
        think_mean_s: pause between turns ~ Exponential(mean) — a user's think time, or a tool's run time.
        system_tokens: shared system prompt, tokens. max_context_tokens: a session stops before passing this.
    """

    mean_turns: float = 4.0
    max_turns: int = 64
    first_input_median_tokens: int = 1024
    input_median_tokens: int = 128
    output_median_tokens: int = 256
    length_sigma: float = 0.8
    think_mean_s: float = 30.0
    system_tokens: int = 512
    max_context_tokens: int = 32768


CHAT = SessionShape()
"""Chat: ~4 turns, short follow-ups, 30 s of user think time (stated assumptions, not a fit)."""
AGENT = SessionShape(mean_turns=20.0, max_turns=200, first_input_median_tokens=2048, input_median_tokens=512,
                     output_median_tokens=128, think_mean_s=2.0, system_tokens=4096, max_context_tokens=131072)
"""Agent loop: ~20 tool calls, large tool results, short outputs, 2 s tool time (stated assumptions, not a fit)."""
SESSION_SHAPES = {"chat": CHAT, "agent": AGENT}
"""The presets by the name ``--workload`` takes."""


def _check_shape(s: SessionShape) -> None:
    bad = [n for n, v in (("mean_turns", s.mean_turns - 1 + 1e-12), ("max_turns", s.max_turns),
                          ("first_input_median_tokens", s.first_input_median_tokens),
                          ("input_median_tokens", s.input_median_tokens),
                          ("output_median_tokens", s.output_median_tokens),
                          ("max_context_tokens", s.max_context_tokens)) if not v > 0]
    if s.mean_turns < 1:
        bad.append("mean_turns (≥ 1)")
    if not (s.length_sigma >= 0 and s.think_mean_s >= 0 and s.system_tokens >= 0):
        bad.append("length_sigma / think_mean_s / system_tokens (≥ 0)")
    if bad:
        raise InputError(f"session shape: {', '.join(bad)} must be positive numbers")


def synthesize_sessions(shape: SessionShape, num_sessions: int, rate_per_s: float, rng: np.random.Generator,
                        *, prefix: str = "s") -> list[Session]:
    """``num_sessions`` sessions starting as a Poisson process of ``rate_per_s`` (``inf``: all at t = 0).

    Raises:
        InputError: a count < 1, a rate ≤ 0, a bad shape, or ``rng`` not a numpy Generator.
    """
    if not isinstance(rng, np.random.Generator):
        raise InputError("synthesize_sessions needs a numpy Generator (np.random.default_rng(seed)), passed explicitly")
    if isinstance(num_sessions, bool) or not isinstance(num_sessions, int) or num_sessions < 1:
        raise InputError(f"num_sessions must be an integer ≥ 1, got {num_sessions!r}")
    if not rate_per_s > 0:
        raise InputError(f"session rate must be > 0 sessions/s (inf: all at once), got {rate_per_s!r}")
    _check_shape(shape)
    n = num_sessions
    starts = np.zeros(n) if np.isinf(rate_per_s) else np.cumsum(rng.exponential(1 / rate_per_s, n))
    p = 1.0 / shape.mean_turns
    nturns = np.minimum(rng.geometric(p, n), shape.max_turns)
    total = int(nturns.sum())
    sig = shape.length_sigma

    def draw(median: int) -> np.ndarray:
        return np.maximum(1, np.round(median * np.exp(sig * rng.standard_normal(total)))).astype(np.int64)

    first, follow, outs = draw(shape.first_input_median_tokens), draw(shape.input_median_tokens), draw(
        shape.output_median_tokens)
    thinks = rng.exponential(shape.think_mean_s, total) if shape.think_mean_s > 0 else np.zeros(total)
    out, k = [], 0
    for i in range(n):
        turns, ctx = [], shape.system_tokens
        for j in range(int(nturns[i])):
            inp = int(first[k] if j == 0 else follow[k])
            if ctx + inp + int(outs[k]) > shape.max_context_tokens:
                k += int(nturns[i]) - j
                break
            turns.append(Turn(inp, int(outs[k]), float(thinks[k]) if j else 0.0))
            ctx += inp + int(outs[k])
            k += 1
        if turns:
            out.append(Session(f"{prefix}{i}", float(starts[i]), tuple(turns), shape.system_tokens, i))
    return out


def _segment_id(session: Session, j: int, seg: int) -> int:
    """Id of segment ``j`` of the session's token stream (shared across sessions inside the system prompt)."""
    if (j + 1) * seg <= session.system_tokens:
        return hash((1, j))
    return hash((2, session.index, j))


def turn_specs(session: Session, segment_tokens: int = 64, reuse_output: bool = True) -> list[RequestSpec]:
    """The session's turns as requests (arrival = session start; a SessionLoop re-times them); with ``reuse_output``
    each lists the whole segments of its output as ``output_segments``."""
    out, ctx, S = [], session.system_tokens, segment_tokens
    total = session.system_tokens + sum(t.input_tokens + t.output_tokens for t in session.turns)
    ids = tuple(_segment_id(session, j, S) for j in range(total // S))  # the stream's ids, once for every turn
    for k, t in enumerate(session.turns):
        prompt = ctx + t.input_tokens
        nseg, nstream = prompt // S, (prompt + t.output_tokens) // S if reuse_output else 0
        segs, outs = ids[:nseg], ids[nseg:nstream]
        out.append(RequestSpec(f"{session.session_id}-t{k}", session.start_s, prompt, t.output_tokens, segs,
                               S, session.session_id, outs))
        ctx = prompt + t.output_tokens
    return out


@dataclass(frozen=True)
class SessionLoop:
    """Sessions served as closed loops: each session sends its next turn ``think_s`` after its previous one finished.

    Attributes:
        sessions: the sessions. segment_tokens: tokens per prefix segment id (≥ 1).
        reuse_output: a turn's decoded tokens are cached for the next turn (``turn_specs``).
        think_time_s: always 0 (the per-turn pauses are in the turns; the cluster's closed-loop pause stays unused).
    """

    sessions: tuple[Session, ...]
    segment_tokens: int = 64
    think_time_s: float = field(default=0.0, init=False)
    reuse_output: bool = True

    def __post_init__(self) -> None:
        if not self.sessions:
            raise InputError("a session workload needs at least one session")
        if isinstance(self.segment_tokens, bool) or not isinstance(self.segment_tokens, int) or self.segment_tokens < 1:
            raise InputError(f"segment_tokens must be an integer ≥ 1, got {self.segment_tokens!r}")
        ids = [s.session_id for s in self.sessions]
        if len(set(ids)) != len(ids):
            raise InputError("session ids must be unique")

    @property
    def num_turns(self) -> int:
        return sum(len(s.turns) for s in self.sessions)

    def driver(self) -> SessionDriver:
        return SessionDriver(self)


class SessionDriver:
    """The state of a SessionLoop during a run: each session's next turn."""

    def __init__(self, loop: SessionLoop) -> None:
        self.specs = [turn_specs(s, loop.segment_tokens, loop.reuse_output) for s in loop.sessions]
        self.turns = [s.turns for s in loop.sessions]
        self.next = [0] * len(self.specs)
        self.starts = [(s.start_s, i) for i, s in enumerate(loop.sessions)]

    def take(self, user: int, t: float) -> RequestSpec | None:
        """Session ``user``'s next turn, sent at ``t`` plus its think time (the first turn at ``t``); None when done."""
        k = self.next[user]
        if k >= len(self.specs[user]):
            return None
        self.next[user] = k + 1
        spec = self.specs[user][k]
        from dataclasses import replace

        return replace(spec, arrival_s=t + (self.turns[user][k].think_s if k else 0.0))
