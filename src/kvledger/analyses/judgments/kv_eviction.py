"""KV eviction under a paged layout: how many blocks a token-eviction policy empties, and how much memory that frees.

A paged engine (vLLM ``BlockPool``) frees memory only in whole blocks: a block returns to the free
queue when no token in it is kept. Evicting a share r of a sequence's n tokens keeps s = n − e
survivors (e = round(r·n)); what is freed depends on where they sit.

**Scattered, uniformly at random** (all C(n, s) survivor sets equally likely — the shape score-based
selection takes when scores carry no positional structure). A block of b positions is empty iff all
s survivors fall outside it::

    P(empty) = C(n − b, s) / C(n, s) = C(n − s, b) / C(n, b) = Π_{i<b} (n − s − i) / (n − i) ≤ (e/n)^b = r^b

(the two ratios are equal: both are (n−s)!(n−b)! / (n!(n−s−b)!)). By linearity of expectation the
expected number of empty blocks is the sum of P over the blocks (⌊n/B⌋ full ones and one partial of
n mod B). If instead each token is kept independently with probability 1 − r, P = r^B exactly — the
binomial approximation. With r = 0.9 and B = 16, r^B = 0.185: evicting 90% of the tokens frees
about 18% of the blocks. If each (layer, KV head) sharing a block picks its own survivors, the block
empties only when all H of them do: ≈ r^(B·H), effectively nothing.

**Worst case** (survivors spread one per block while they last): min(blocks, s) blocks stay occupied.
**Sink + recent window** (StreamingLLM): the first S and last W tokens are kept; the blocks between
⌈S/B⌉ and ⌊(n − W)/B⌋ empty whole. **Clustered** in runs of R tokens at random non-overlapping
positions: a run at a uniformly random offset touches 1 + (R − 1)/B blocks on average (Hermite's
identity Σ_{o<B} ⌊(o + R − 1)/B⌋ = R − 1), so at most m·(1 + (R−1)/B) blocks of m = ⌈s/R⌉ runs stay occupied.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from kvledger.errors import InputError
from kvledger.jsonable import to_jsonable
from kvledger.ranges import check_options

__all__ = ["LAYOUTS", "EvictionResult", "p_block_empty", "expected_empty_blocks_random", "sink_window_occupied",
           "place_runs", "evict"]

LAYOUTS = {
    "scattered": "scattered uniformly at random (explicit seed), as score-based selection leaves them when scores "
                 "carry no positional structure",
    "worst": "spread one per block while they last (the worst case for freeing memory)",
    "sink-window": "in attention sinks (the first S tokens) and a recent window (the last W tokens), as StreamingLLM "
                   "keeps them",
    "clustered": "clustered in runs of R consecutive tokens at random positions (explicit seed)",
}


def p_block_empty(n: int, s: int, b: int) -> float:
    """P(no survivor in a given block of ``b`` positions) = C(n−s, b)/C(n, b), for ``s`` random survivors among
    ``n``."""
    if b > n - s:
        return 0.0
    p = 1.0
    for i in range(b):
        p *= (n - s - i) / (n - i)
    return p


def expected_empty_blocks_random(n: int, s: int, block_size: int) -> float:
    """E[empty blocks] over ⌊n/B⌋ full blocks and one partial block, random survivors, blocks."""
    full, rest = divmod(n, block_size)
    return full * p_block_empty(n, s, block_size) + (p_block_empty(n, s, rest) if rest else 0.0)


def sink_window_occupied(n: int, block_size: int, sink_tokens: int, window_tokens: int) -> int:
    """Blocks holding a sink token [0, S) or a window token [n−W, n), blocks (closed form, overlap counted once)."""
    if sink_tokens + window_tokens >= n:
        return math.ceil(n / block_size)
    sink_blocks = math.ceil(sink_tokens / block_size)  # indices 0 .. sink_blocks−1
    if window_tokens == 0:
        return sink_blocks
    first, last = (n - window_tokens) // block_size, (n - 1) // block_size
    overlap = max(0, sink_blocks - first)
    return sink_blocks + (last - first + 1) - overlap


def place_runs(n: int, s: int, run_tokens: int, rng: np.random.Generator) -> np.ndarray:
    """Positions of ``s`` survivors in ⌈s/R⌉ non-overlapping runs of R (the last may be shorter), uniformly placed.

    Stars and bars: shrink each run to one token, so the sequence has n − s + m items; choose the m run
    positions v_0 < … < v_{m−1} uniformly among them and expand: start_i = v_i + Σ_{j<i} (len_j − 1).
    Runs may touch but never overlap.
    """
    m = math.ceil(s / run_tokens)
    lens = np.full(m, run_tokens, dtype=np.int64)
    lens[-1] = s - run_tokens * (m - 1)
    v = np.sort(rng.choice(n - s + m, size=m, replace=False))
    starts = v + np.concatenate(([0], np.cumsum(lens[:-1] - 1)))
    return np.concatenate([np.arange(a, a + ln) for a, ln in zip(starts, lens)])


@dataclass(frozen=True)
class EvictionResult:
    """What one eviction frees for one sequence (per GPU).

    Attributes:
        layout: key of LAYOUTS. context_tokens: n, tokens. block_size: B, tokens. num_blocks: ⌈n/B⌉, blocks.
        evicted_tokens / kept_tokens: e and s, tokens. evicted_fraction: e/n.
        empty_blocks: blocks with no survivor (for random layouts: this seeded draw), blocks.
        expected_empty_blocks: the closed-form expectation (random and clustered layouts), blocks; None otherwise.
        binomial_empty_blocks: blocks × r^B (independent-keep approximation), blocks; None except "scattered".
        per_head_expected_empty_blocks: if each of ``heads_per_block`` (layer, KV head) pairs chose its own random
            survivors, blocks; None except "scattered".
        bytes_per_block: page bytes of one block over all layers sharing it, B.
        held_bytes / freed_bytes: before eviction and what returns to the pool, B. freed_fraction: freed ÷ held.
        compacted_blocks: ⌈s/B⌉, blocks needed if survivors were copied together; compaction_copy_bytes: the copy, B.
        sink_tokens / window_tokens / run_tokens / seed: the layout's parameters (None when unused).
        formula: the arithmetic in words. notes: caveats.
    """

    layout: str
    context_tokens: int
    block_size: int
    num_blocks: int
    evicted_tokens: int
    kept_tokens: int
    evicted_fraction: float
    empty_blocks: int
    expected_empty_blocks: float | None
    binomial_empty_blocks: float | None
    per_head_expected_empty_blocks: float | None
    bytes_per_block: int
    held_bytes: int
    freed_bytes: int
    freed_fraction: float
    compacted_blocks: int
    compaction_copy_bytes: float
    sink_tokens: int | None
    window_tokens: int | None
    run_tokens: int | None
    seed: int | None
    formula: str
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


def _check(n: int, block_size: int, evict_fraction: float | None) -> None:
    for flag, v in (("--context", n), ("--block-size", block_size)):
        if isinstance(v, bool) or not isinstance(v, int):
            raise InputError(f"{flag} must be a whole number of tokens, got {v!r}")
    check_options("kv-eviction", {"context_tokens": n, "block_size": block_size, "evict": evict_fraction},
                  {"context_tokens": "--context"})  # [1, 2^26], [1, 4,096] tokens and [0, 1): kvledger.ranges


def _occupied(layout: str, n: int, s: int, B: int, sink: int, window: int, run: int,
              rng: np.random.Generator | None) -> tuple[int, float | None, str]:
    """(occupied blocks, expected empty blocks or None, formula text)."""
    nb = math.ceil(n / B)
    if layout == "scattered":
        pos = rng.choice(n, size=s, replace=False) if s else np.empty(0, dtype=np.int64)
        exp = expected_empty_blocks_random(n, s, B)
        return int(np.unique(pos // B).size), exp, (f"P(block empty) = C(n−s, B)/C(n, B) = C({n - s:,}, {B})/C({n:,}, "
                                                    f"{B}) = "
                                                     f"{p_block_empty(n, s, B):.4g} ≤ r^B = {((n - s) / n) ** B:.4g}; "
                                                     f"expected {exp:,.1f} of {nb:,} blocks empty")
    if layout == "worst":
        occ = min(nb, s)
        return occ, None, f"survivors one per block: min({nb:,} blocks, {s:,} survivors) = {occ:,} blocks stay occupied"
    if layout == "sink-window":
        occ = sink_window_occupied(n, B, sink, window)
        return occ, None, (f"sinks [0, {sink}) occupy {math.ceil(sink / B)} block(s); window [{n - window:,}, {n:,}) "
                           f"occupies "
                           f"{(n - 1) // B - (n - window) // B + 1 if window else 0:,}; {occ:,} of {nb:,} blocks stay "
                           f"occupied")
    pos = place_runs(n, s, run, rng) if s else np.empty(0, dtype=np.int64)
    m = math.ceil(s / run) if s else 0
    bound = max(0.0, nb - m * (1 + (run - 1) / B))
    return int(np.unique(pos // B).size), bound, (f"{m:,} runs of {run} tokens touch ≤ {m:,} × (1 + ({run} − 1)/{B}) = "
                                                  f"{m * (1 + (run - 1) / B):,.1f} blocks on average; ≥ {bound:,.1f} "
                                                  f"of {nb:,} empty")


def _check_layout(layout: str, window_tokens: int | None) -> None:
    """An unknown layout (the four listed), or a window with a layout that keeps none, refused."""
    from kvledger.errors import UnknownNameError

    if layout not in LAYOUTS:
        raise UnknownNameError("eviction layout", layout, LAYOUTS, hint=f"Known: {', '.join(LAYOUTS)}.")
    if window_tokens is not None and layout != "sink-window":
        raise InputError(f"--window is the recent window of --layout sink-window; layout {layout!r} keeps no window: "
                         "give --evict alone, or --layout sink-window")


def evict(context_tokens: int, block_size: int, bytes_per_block: int, layout: str, *,
          evict_fraction: float | None = None,
          sink_tokens: int = 4, window_tokens: int | None = None, run_tokens: int = 64, seed: int | None = 0,
          heads_per_block: int = 1) -> EvictionResult:
    """Evict a share of one sequence's tokens under ``layout`` and count what the paged pool gets back.

    For "sink-window", ``window_tokens`` (when given) fixes the kept set and the evicted share follows from it (an
    ``evict_fraction`` given too must agree to the token); otherwise the window is what the eviction share leaves
    after the sinks. Other layouts take no window.

    Raises:
        InputError: bad sizes or fraction, an unknown layout, a window + sinks longer than the context, a window that
            disagrees with the fraction or comes with another layout, a missing seed.
    """
    _check_layout(layout, window_tokens)
    n, B = context_tokens, block_size
    _check(n, B, evict_fraction)
    notes: list[str] = []
    if layout == "sink-window" and window_tokens is not None:
        if window_tokens < 0 or sink_tokens < 0 or sink_tokens + window_tokens > n:
            raise InputError(f"--sink-tokens {sink_tokens} + --window {window_tokens} must be ≥ 0 and ≤ the context "
                             f"{n:,}")
        s = sink_tokens + window_tokens
        if evict_fraction is not None and abs((n - s) - round(evict_fraction * n)) > 0:
            raise InputError(f"--evict {evict_fraction:g} and --window {window_tokens:,} disagree: with --sink-tokens "
                             f"{sink_tokens} the window keeps {s:,} of {n:,} tokens, so {1 - s / n:.1%} are evicted, "
                             f"not {evict_fraction:.1%}; give --evict or --window, not both")
    else:
        if evict_fraction is None:
            raise InputError(
                "give --evict (the share of tokens evicted)" + (" or --window" if layout == "sink-window" else "")
            )
        s = n - round(evict_fraction * n)
        if layout == "sink-window":
            sink_tokens = min(sink_tokens, s)
            window_tokens = s - sink_tokens
    if layout in ("scattered", "clustered") and seed is None:
        raise InputError(f"layout {layout!r} draws survivor positions at random: give --seed")
    if layout == "clustered":
        check_options("kv-eviction", {"run_tokens": run_tokens})
    rng = np.random.default_rng(seed) if seed is not None else None
    occ, exp, formula = _occupied(layout, n, s, B, sink_tokens, window_tokens or 0, run_tokens, rng)
    nb = math.ceil(n / B)
    empty = nb - occ
    r = (n - s) / n
    binom = nb * r ** B if layout == "scattered" else None
    per_head = None
    if layout == "scattered" and heads_per_block > 1:
        per_head = (n // B) * p_block_empty(n, s, B) ** heads_per_block
    per_token_bytes = bytes_per_block / B
    return EvictionResult(
        layout, n, B, nb, n - s, s, r, empty, exp, binom, per_head, bytes_per_block, nb * bytes_per_block,
        empty * bytes_per_block, empty / nb, math.ceil(s / B), s * per_token_bytes,
        sink_tokens if layout == "sink-window" else None, window_tokens if layout == "sink-window" else None,
        run_tokens if layout == "clustered" else None, seed if layout in ("scattered", "clustered") else None,
        formula, tuple(notes))
