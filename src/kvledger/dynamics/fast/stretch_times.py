"""Step end times of a steady-decode stretch: its pieces between finishes priced in chunks that reach the next arrival.

Used by fast_path.py. Each step's duration is the step-cost model's price of a pure-decode step
(``decode_steps_list``, bit for bit ``step_time_s`` of that step); end times are sequential float
sums, as step-by-step execution adds them.
"""

from __future__ import annotations

import math
from bisect import bisect_left, insort
from itertools import accumulate

from kvledger.accounting.decode_prices import PLAIN_FLOAT_MAX_STEPS

__all__ = ["decode_times", "chunk_steps", "MAX_STRETCH_STEPS", "plain_decode_terms", "extend_decode_chunk"]

MAX_STRETCH_STEPS = 2048  # longest stretch priced in one go, steps
CHUNK_SPARE_STEPS = 3  # steps priced beyond those the last price says fit before the bound
CHUNK_MIN_STEPS = 8  # fewest steps priced in one call while a bound is ahead
CHUNK_UNPRICED_STEPS = 16  # steps priced in the first call when no step has been priced yet


def chunk_steps(m: int, bound_s: float, t_s: float, last_s: float, lag: int) -> int:
    """Steps to price in the next call (≤ ``m``): those likely to start before ``bound_s`` from the clock ``t_s`` at the
    last step's price ``last_s``, plus a few spare. Only the chunking depends on it: every step's price is the same
    however a run is split."""
    est = int((bound_s - t_s) / last_s) + CHUNK_SPARE_STEPS + lag if last_s > 0 else CHUNK_UNPRICED_STEPS
    if est < CHUNK_MIN_STEPS:
        est = CHUNK_MIN_STEPS
    return est if est < m else m


def decode_times(rep, rems: list[int], comp: list[int], go: bool, bound_s: float, lag: int = 0):
    """Step end times ``ends[0..k]`` (sequential float sums, as step-by-step execution adds them), step durations,
    ``k`` and the pieces.

    A piece runs to the next finish with its own batch size, priced by ``decode_steps_list`` in
    chunks sized to reach ``bound_s`` (same per-step prices however the run is split); ``k``
    stops at the first step that would be scheduled at or after ``bound_s`` (its start; with
    ``lag`` 1, async, the start of the step before it), at the first finish (with ``go``: the
    last) and at MAX_STRETCH_STEPS. Pieces: ``(first step, end step, batch size, KV tokens read
    in the first step)``; durations: each step's, as priced, a list.
    """
    alive = len(rems)
    kv_tok = sum(comp) + alive
    stops, si, leaving = [min(rems)], 0, None  # the later finishes are grouped only when a piece reaches the first
    pieces, a, price = [], 0, rep.prices.decode_list
    ends, durs = [rep.now_s], []
    finite = bound_s < math.inf
    last = rep.decode_step_hint_s  # a recent step's price: sizes the first chunk (any chunking gives the same prices)
    while True:
        stop = stops[si]
        b = stop if stop < MAX_STRETCH_STEPS else MAX_STRETCH_STEPS
        j, cut = a, False
        while j < b:
            m = b - j  # a chunk never crosses the piece's end: past it the batch differs
            if finite:  # steps likely to fit before the bound, from the last price (a few spare)
                if durs:
                    last = durs[-1]
                m = chunk_steps(m, bound_s, ends[j], last, lag)
            d = price(alive, kv_tok + alive * j, m)
            durs += d
            it = accumulate(d, initial=ends[j])
            next(it)
            ends.extend(it)
            j += m
            if j - 1 - lag >= 0 and ends[j - 1 - lag] >= bound_s:
                j = bisect_left(ends, bound_s, max(a - lag, 0), j - lag) + lag
                cut = True
                break
        b = j if j < b else b
        if b > a:
            rep.decode_step_hint_s = durs[b - 1]
            pieces.append((a, b, alive, kv_tok + alive * a))
        if cut or b == MAX_STRETCH_STEPS or not go:
            break
        if leaving is None:
            leaving = _finish_groups(rems, comp)
            stops = sorted(leaving)
        cnt, tok = leaving[stop]
        alive, kv_tok, a = alive - cnt, kv_tok - tok, b
        si += 1
        if si == len(stops):  # everyone finished
            b = a
            break
    return b, ends, durs, pieces


def _finish_groups(rems: list[int], comp: list[int]) -> dict[int, list[int]]:
    """The finishes grouped by step: {remaining tokens: [requests, Σ KV tokens they read in their first step]}."""
    leaving: dict[int, list[int]] = {}
    for m, c in zip(rems, comp):
        x = leaving.get(m)
        if x is None:
            leaving[m] = [1, c + 1]
        else:
            x[0] += 1
            x[1] += c + 1
    return leaving


def plain_decode_terms(forms: dict, prices, alive: int):
    """The price of a decode step of ``alive`` requests in its plain form (gemm, g, bw), memoised in ``forms``; None:
    the step cost has no plain form (ask ``prices.decode_list``)."""
    terms = forms.get(alive, 0)
    if terms == 0:
        plain = prices.decode_plain
        terms = forms[alive] = plain(alive) if plain is not None else None
    return terms


def extend_decode_chunk(ends: list[float], durs: list[float], prices, terms, alive: int, kv0: int, m: int,
                        start_s: float) -> float:
    """Price ``m`` decode steps of ``alive`` requests whose first step reads ``kv0`` KV tokens (``alive`` more each
    step), starting at ``start_s``: append their durations to ``durs`` and end times to ``ends``; returns the last
    duration, s. The plain form's floats when it holds for ``m`` steps, else ``prices.decode_list``."""
    if terms is not None and m <= PLAIN_FLOAT_MAX_STEPS:
        gemm, g, bw = terms
        d = [gemm + g * x / bw for x in range(kv0, kv0 + alive * m, alive)]
    else:
        d = prices.decode_list(alive, kv0, m)
    durs += d
    it = accumulate(d, initial=start_s)
    next(it)
    ends.extend(it)
    return d[-1]


def join_finish_group(groups: dict, keys: list[int], step: int, kv_offset: int) -> None:
    """Count one request in the group finishing at ``step``: ``groups[step]`` = [requests, Σ their KV-token offsets];
    ``keys`` keeps the groups' steps sorted (the vLLM and SGLang arrival stretches share this bookkeeping)."""
    g = groups.get(step)
    if g is None:
        groups[step] = [1, kv_offset]
        insort(keys, step)
    else:
        g[0] += 1
        g[1] += kv_offset
