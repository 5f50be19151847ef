"""A document pool's expected prefix-cache hit share, by formula and by replaying its draw, beside the simulated one
per KV tier (``--document-pool``; the workload: ``dynamics/workload/document_pool.py``).

Each tier is taken as an LRU cache of whole documents holding C tokens per replica (HBM: the usable KV blocks ×
block size; a host, disk or remote tier: its capacity units × unit tokens); the system prompt, when given, sits in
it once and hits every request after the first. Two estimates of the share of prompt tokens hit:

- Che's approximation (Che, Tung and Wang, IEEE JSAC 2002), steady state, independent draws: document i (P(i) =
  p_i, L_i tokens) is in the cache with probability h_i = 1 − exp(−p_i·T), T solving Σ_i L_i·h_i = C − P; the
  expected hit tokens per request are P + Σ_i p_i·h_i·L_i (a document the run never drew counts at the drawn ones'
  mean length).
- The LRU replay of this run's own draw: the documents in the order requests reach the engine through an LRU of
  C − P tokens, evicting the least recently drawn; it counts the cold start (each document's first draw misses),
  which the steady-state formula leaves out.

The host tiers (vLLM's CPU offloading, LMCache and HiCache's write-through) store every computed block, so a
tier holds what the tiers above it hold: HBM + host serve what an LRU of the larger capacity serves, and the host
tier's share is the difference. Left out of both: the KV that running requests hold (HBM's cache is smaller while
they run), block rounding, and requests in flight together (a document drawn twice at once is computed once per
request). The simulated figures are the run's own; the formula says how far the pool sizes allow.
"""

from __future__ import annotations

import math
from collections import OrderedDict
from typing import Any

import numpy as np

__all__ = ["che_hit_tokens", "lru_replay_hit_tokens", "pool_expectations", "pool_note", "with_pool_figures",
           "setup_with_pool_figures", "pool_with_expected"]


def che_hit_tokens(p: np.ndarray, doc_tokens: np.ndarray, capacity_tokens: float) -> float:
    """Σ_i p_i·h_i·L_i, h_i = 1 − exp(−p_i·T), T solving Σ_i L_i·h_i = ``capacity_tokens`` (module doc), tokens per
    request; every document hits when all fit, none when nothing does."""
    if capacity_tokens <= 0:
        return 0.0
    if capacity_tokens >= doc_tokens.sum():
        return float((p * doc_tokens).sum())

    def held(t: float) -> float:
        return float((doc_tokens * -np.expm1(-p * t)).sum())

    lo, hi = 0.0, 1.0
    while held(hi) < capacity_tokens:
        lo, hi = hi, hi * 2.0
    for _ in range(200):  # bisection on the monotone Σ L_i·h_i(T)
        mid = 0.5 * (lo + hi)
        lo, hi = (mid, hi) if held(mid) < capacity_tokens else (lo, mid)
    return float((p * doc_tokens * -np.expm1(-p * hi)).sum())


def lru_replay_hit_tokens(docs: list[int | None], doc_tokens: dict[int, int], capacity_tokens: float) -> int:
    """Document tokens hit when ``docs`` (in order; None: no document) pass through an LRU of ``capacity_tokens``
    tokens: a document already held hits its L_d tokens and becomes the most recent; a miss is stored, the least
    recent evicted until the rest fits (a document larger than the cache is not stored), tokens."""
    cache: OrderedDict[int, int] = OrderedDict()
    held = hit = 0
    for d in docs:
        if d is None:
            continue
        if d in cache:
            cache.move_to_end(d)
            hit += doc_tokens[d]
            continue
        if doc_tokens[d] > capacity_tokens:
            continue
        cache[d] = doc_tokens[d]
        held += doc_tokens[d]
        while held > capacity_tokens:
            held -= cache.popitem(last=False)[1]
    return hit


def pool_expectations(info: dict[str, Any], specs: list[Any], tiers: list[tuple[str, int]],
                      prompt_tokens: int) -> list[dict[str, Any]]:
    """One row per tier (``tiers``: (name, capacity tokens per replica), HBM first): its capacity in tokens and in
    documents, and the share of ``prompt_tokens`` it serves by Che's formula and by the LRU replay (module doc;
    a lower tier's share is what it adds to the tiers above)."""
    from kvledger.dynamics.workload.document_pool import DocumentPool, pool_sequence, popularity

    pool = info["document_pool"]
    docs, sizes, prefix = pool_sequence(specs)
    mean = sum(sizes.values()) / len(sizes) if sizes else 0.0
    every = np.array([sizes.get(k, mean) for k in range(pool["documents"])], dtype=float)  # undrawn: the mean
    p = popularity(DocumentPool(pool["documents"], pool["document_tokens"], pool["zipf_s"]))
    sys_hits = prefix * (len(docs) - 1)  # the system prompt: every request after the first
    rows, che_above, replay_above, held = [], 0.0, 0.0, 0
    for name, cap in tiers:
        held = max(held, cap)  # a lower tier holds what the tiers above it hold (write-through)
        room = held - prefix
        che = (sys_hits * (room >= 0) + len(docs) * che_hit_tokens(p, every, room)) / prompt_tokens
        replay = (sys_hits * (room >= 0) + lru_replay_hit_tokens(docs, sizes, room)) / prompt_tokens
        own = max(cap - prefix, 0) / mean if mean else 0.0  # this tier's own capacity, in documents
        rows.append({"tier": name, "capacity_tokens": cap, "capacity_documents": own,
                     "che_hit_share": che - che_above, "lru_replay_hit_share": replay - replay_above})
        che_above, replay_above = che, replay
    return rows


def pool_note(rows: list[dict[str, Any]], simulated: dict[str, float], info: dict[str, Any]) -> str:
    """``simulate``'s line: per tier, the expected share (Che; replay) beside the simulated one; then the unbounded
    cache's (the requests that drew a document seen before). ``info``: the workload description, its document pool
    with ``unbounded_hit_share``."""
    pool = info["document_pool"]
    length = f"{int(pool['document_tokens']):,}" if pool["document_tokens"].isdigit() else pool["document_tokens"]
    parts = [f"{r['tier']} {r['capacity_tokens']:,} tokens ≈ {r['capacity_documents']:,.1f} documents: "
             f"{r['che_hit_share']:.1%} by Che's LRU formula, {r['lru_replay_hit_share']:.1%} by replaying this "
             f"draw, {simulated.get(r['tier'], math.nan):.1%} simulated" for r in rows]
    return (f"document pool ({pool['documents']:,} × {length} tokens, {pool['popularity']}): share of "
            "prompt tokens each KV tier serves, per replica, expected beside simulated — " + "; ".join(parts) +
            f". A cache that never evicts would serve {pool['unbounded_hit_share']:.1%} of prompt tokens (the "
            f"{pool['seen_before_share']:.1%} of requests whose document was drawn before). The formula takes "
            "each tier as an LRU of whole documents, a lower tier holding what those above hold, and leaves out "
            "the KV running requests hold and requests in flight together (kvledger.analyses.serving.doc_pool_hits)")


def pool_with_expected(setup: Any, hbm_hit_rate: float, tier_report: Any) -> tuple[dict[str, Any], dict]:
    """(``setup``'s document pool description with its ``expected`` rows, the simulated share per tier) for a run
    whose HBM hit rate was ``hbm_hit_rate`` and whose host tier report is ``tier_report`` (None: HBM only)."""
    info, cfg = setup.workload_info, setup.config
    tiers = [("hbm", cfg.num_usable_blocks * cfg.block_size)]
    simulated = {"hbm": hbm_hit_rate}
    if tier_report is not None:
        for row in tier_report.per_tier[1:]:  # host_dram, then nvme / remote where run
            units = tier_report.host_tier.capacity_units if row.tier == "host_dram" else row.capacity_units
            tiers.append((row.tier, units * row.unit_tokens))
        simulated = {row.tier: row.hit_rate for row in tier_report.per_tier}
    specs = list(getattr(setup.workload, "requests", setup.workload))
    prompt = sum(s.num_prompt_tokens for s in specs)
    rows = pool_expectations(info, specs, tiers, prompt)
    unbounded = pool_expectations(info, specs, [("unbounded", math.inf)], prompt)[0]["lru_replay_hit_share"]
    for row in rows:
        row["simulated_hit_share"] = simulated.get(row["tier"])
    return {**info["document_pool"], "expected": rows, "unbounded_hit_share": unbounded,
            "expected_source": "kvledger.analyses.serving.doc_pool_hits"}, simulated


def with_pool_figures(payload: Any, setup: Any, tier_report: Any) -> Any:
    """``payload`` (a ``SimDocument``) with its document pool's expected hit shares beside the simulated ones: the
    rows in ``workload["document_pool"]["expected"]`` and the line in its notes; unchanged without a pool.
    ``setup``: the ``SimSetup`` run; ``tier_report``: its ``SimTierReport`` (None: HBM only)."""
    import dataclasses

    if "document_pool" not in payload.workload:
        return payload
    pool, simulated = pool_with_expected(setup, payload.summary["prefix_cache_hit_rate"], tier_report)
    info = {**payload.workload, "document_pool": pool}
    return dataclasses.replace(payload, workload=info, notes=[*payload.notes, pool_note(pool["expected"], simulated,
                                                                                          info)])


def setup_with_pool_figures(setup: Any, tier_report: Any) -> Any:
    """``setup`` (a ``SimSetup`` run with the host tier of ``tier_report``) with its document pool's expected rows
    in its workload description (``goodput --simulate``'s ``simulation.workload``); unchanged without a pool."""
    import dataclasses

    if "document_pool" not in setup.workload_info:
        return setup
    pool, _ = pool_with_expected(setup, tier_report.per_tier[0].hit_rate, tier_report)
    return dataclasses.replace(setup, workload_info={**setup.workload_info, "document_pool": pool})
