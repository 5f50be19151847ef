"""What the metrics lines say about traffic: a prefix-cache hit rate far below what the traffic shares (routing),
and prefill interfering with decode or queueing behind it (max_num_batched_tokens).

Prefix caching (docs/engine-model.md §6.8): a replica can only hit prefixes it has seen. A prefix every request
shares (one system prompt) is cached on every replica after one miss each, so routing barely matters for it. A prefix
shared only within a session or document (multi-turn chat, agents, RAG over the same file) is on one replica:
under prefix-blind routing (round-robin, least-load, random) the next request of that session lands on the
replica holding it with probability 1/K, so the hit rate falls to about share ÷ K.

Batching (docs/engine-model.md §6.7): V1 schedules all decodes first and fills the rest of the
``max_num_batched_tokens`` budget with prefill chunks. Larger budgets give better TTFT and worse ITL, smaller ones
the opposite.
From a metrics line, running ÷ generation throughput is the mean time between a running request's tokens
(an upper bound on ITL, since running requests still prefilling emit none).
"""

from __future__ import annotations

import statistics
from typing import Any

from kvledger.analyses.doctor.capacity import KV_FULL_PCT
from kvledger.analyses.doctor.context import DoctorContext
from kvledger.analyses.doctor.types import Finding
from kvledger.evidence.vllm_log import StatsSample

__all__ = ["FAR_BELOW", "ITL_INFLATION", "PREFILL_SATURATED", "QUEUE_RUN", "diagnose_prefix_cache", "diagnose_batching",
           "implied_itl_s"]

FAR_BELOW = 0.5
"""Observed hit rate below this fraction of the expected share is "far below". Block granularity (only full blocks
are cached, and the last prompt token is always recomputed) and the first miss of each prefix keep a healthy cache
somewhat under the share; below half is beyond those effects for prompts of a few hundred tokens or more."""
ITL_INFLATION = 1.5
"""Implied ITL in intervals with prefill over intervals without, at or above which prefill is hurting decodes."""
PREFILL_SATURATED = 0.8
"""Prompt throughput at or above this fraction of the log's peak counts as prefill running flat out."""
QUEUE_RUN = 3
"""Consecutive metrics intervals with requests waiting (KV not full, prefill flat out) that make a persistent queue."""

PREFIX_RULE = (f"observed hit rate < {FAR_BELOW} × the share of prompt tokens the traffic repeats (--prefix-share) → "
               f"far below. "
               "Then: K > 1 replicas and a hit rate within ×0.5–×2 of share ÷ K → prefix-blind routing of "
               "session-local prefixes; "
               f"KV usage ≥ {KV_FULL_PCT:.0f}% → cached prefixes are evicted before reuse; K = 1 → prefixes not "
               f"byte-identical "
               "(timestamps or user ids early in the prompt break the block hash chain) or shorter than a block.")
BATCH_RULE = (f"implied ITL = running ÷ generation throughput per interval; median with prefill ÷ median without ≥ "
              f"{ITL_INFLATION} → "
              f"prefill chunks slow decodes (lower max_num_batched_tokens). ≥ {QUEUE_RUN} consecutive intervals with "
              f"requests "
              f"waiting, KV < {KV_FULL_PCT:.0f}% and prompt throughput ≥ {PREFILL_SATURATED:.0%} of its peak → TTFT is "
              f"queueing "
              "behind prefill (raise max_num_batched_tokens or add replicas). With speculative decoding or parallel "
              "sampling a request "
              "emits several tokens per step, so the implied ITL understates; the ratio still compares like with like. "
              "Source: vLLM docs, Optimization and Tuning → Chunked Prefill.")


def implied_itl_s(s: StatsSample) -> float | None:
    """Mean seconds between tokens of one running request in the interval: running ÷ generation tokens/s, s."""
    return s.running_reqs / s.generation_tokens_per_s if s.running_reqs > 0 and s.generation_tokens_per_s > 0 else None


def _hit_samples(stats: tuple[StatsSample, ...]) -> list[StatsSample]:
    xs = [s for s in stats if s.prefix_cache_hit_pct is not None and s.prompt_tokens_per_s > 0]
    return xs or [s for s in stats if s.prefix_cache_hit_pct is not None]


def _prefix_verdict(h: float, share: float, k: int, kv_full: bool) -> tuple[str, str]:
    blind = 100 * share / k
    if k > 1 and FAR_BELOW * blind <= h <= 2 * blind:
        v, text = "prefix_blind_routing", (f"it matches prefix-blind routing across {k} replicas (share ÷ K = "
                                           f"{blind:.1f}%): "
                                           "route by session or prefix (consistent hashing on a session id, or a "
                                           "prefix-aware "
                                           "router such as llm-d's prefix scorer or SGLang's cache-aware router)")
    elif kv_full:
        v, text = (
            "evicted_under_kv_pressure",
            "the KV cache is full, so cached prefixes are evicted before they are reused: fix capacity first",
        )
    elif k > 1:
        v, text = "below_routing_expectation", (f"it is below even prefix-blind routing's share ÷ K = {blind:.1f}%: "
                                                f"check that shared "
                                                "prefixes are byte-identical and at least one block long, and that "
                                                "prefix caching is on")
    else:
        v, text = "single_replica_low_hits", ("one replica, so routing is not the cause: check that shared prefixes "
                                              "are byte-identical (timestamps or ids early in the prompt) and at "
                                              "least one block (16 tokens) long")
    if kv_full and v == "prefix_blind_routing":
        text += (f"; the KV cache is also ≥ {KV_FULL_PCT:.0f}% full, which evicts prefixes between uses — "
                 "fix capacity first and re-measure")
    return v, text


def diagnose_prefix_cache(ctx: DoctorContext) -> Finding:
    """Hit rate against the traffic's shared fraction (``ctx.prefix_share``) over ``ctx.replicas`` replicas."""
    st, stats = ctx.log.startup, ctx.log.stats
    xs = _hit_samples(stats)
    ev = tuple({"line": s.line_no, "time": s.time_text, "what": "prefix cache hit rate",
                "value": f"{s.prefix_cache_hit_pct}%"} for s in xs)
    if st.enable_prefix_caching is False:
        trig = bool(ctx.prefix_share)
        return Finding("prefix_cache_routing", trig, "prefix_caching_off",
                       f"prefix caching is off (log line {st.lines['enable_prefix_caching']}): nothing can hit",
                       PREFIX_RULE, ev, diagnosed=ctx.prefix_share is not None)  # judged against a stated share
    if not xs:
        why = ("V0 without --enable-prefix-caching prints none" if stats else "the log has no metrics lines (stats "
                                                                              "logging off, "
               "or only the start-up was captured)")
        return Finding("prefix_cache_routing", False, "no_hit_rate", f"the log prints no prefix-cache hit rate ({why})",
                       PREFIX_RULE, diagnosed=False)
    last = xs[-1]
    h = last.prefix_cache_hit_pct
    where = "the latest interval with prefill" if last.prompt_tokens_per_s > 0 else (
        "the latest interval that prints it (no interval shows prefill)")
    seen = (f"prefix-cache hit rate {h:.1f}% in {where} (line {last.line_no}; vLLM reports it over recent requests, "
            f"so early lines include the cold start)")
    if ctx.prefix_share is None:
        return Finding("prefix_cache_routing", False, "no_expected_share",
                       seen + "; pass --prefix-share (the fraction of prompt tokens your traffic repeats) and "
                              "--replicas to judge it",
                       PREFIX_RULE, ev, diagnosed=False)
    expected = 100 * ctx.prefix_share
    if h >= FAR_BELOW * expected:
        return Finding("prefix_cache_routing", False, "consistent",
                       seen + f": consistent with a traffic share of {expected:.0f}% (not below {FAR_BELOW} × share)",
                           PREFIX_RULE, ev)
    kv = [s.gpu_kv_usage_pct for s in xs[-3:] if s.gpu_kv_usage_pct is not None]
    verdict, why = _prefix_verdict(h, ctx.prefix_share, ctx.replicas, bool(kv) and statistics.median(kv) >= KV_FULL_PCT)
    msg = seen + f", far below the {expected:.0f}% the traffic shares (< {FAR_BELOW} × share); " + why + "."
    return Finding("prefix_cache_routing", True, verdict, msg, PREFIX_RULE, ev)


def _queue_run(stats: tuple[StatsSample, ...]) -> list[StatsSample]:
    peak = max((s.prompt_tokens_per_s for s in stats), default=0.0)
    best: list[StatsSample] = []
    run: list[StatsSample] = []
    for s in stats:
        ok = (s.waiting_reqs > 0 and (s.gpu_kv_usage_pct or 0) < KV_FULL_PCT and peak > 0
              and s.prompt_tokens_per_s >= PREFILL_SATURATED * peak)
        run = run + [s] if ok else []
        if len(run) > len(best):
            best = run
    return best if len(best) >= QUEUE_RUN else []


def _mnbt(ctx: DoctorContext) -> tuple[int | None, str]:
    st = ctx.log.startup
    if st.max_num_batched_tokens:
        return st.max_num_batched_tokens, f"log line {st.lines['max_num_batched_tokens']}"
    plan = ctx.log_blocks_plan or ctx.log_memory_plan or ctx.model_plan
    return (plan.memory.max_num_batched_tokens,
            "vLLM default for this GPU and version (ledger rule)") if plan else (None, "unknown")


def _itl_split(stats: tuple[StatsSample, ...]) -> tuple[list[float], list[float]]:
    pre = [x for s in stats if s.prompt_tokens_per_s > 0 and (x := implied_itl_s(s)) is not None]
    dec = [x for s in stats if s.prompt_tokens_per_s == 0 and (x := implied_itl_s(s)) is not None]
    return pre, dec


def diagnose_batching(ctx: DoctorContext) -> Finding:
    """TTFT/ITL signals in the metrics lines and what max_num_batched_tokens would trade."""
    stats = ctx.log.stats
    pre, dec = _itl_split(stats)
    ratio = statistics.median(pre) / statistics.median(dec) if len(pre) >= 2 and len(dec) >= 2 else None
    run = _queue_run(stats)
    mnbt, msrc = _mnbt(ctx)
    ev: list[dict[str, Any]] = [{"line": s.line_no, "time": s.time_text, "what": "implied ITL",
                                 "value": f"{implied_itl_s(s) * 1e3:.1f} ms ({s.running_reqs} running, "
                                          f"{s.generation_tokens_per_s:,.1f} tok/s gen, "
                                          f"{s.prompt_tokens_per_s:,.1f} tok/s prompt, {s.waiting_reqs} waiting)"}
                                for s in stats if implied_itl_s(s) is not None]
    itl_hurt, ttft_bound = ratio is not None and ratio >= ITL_INFLATION, bool(run)
    parts = []
    if ratio is not None:
        parts.append(f"implied ITL {statistics.median(pre) * 1e3:.1f} ms in intervals with prefill vs "
                     f"{statistics.median(dec) * 1e3:.1f} ms "
                     f"without ({ratio:.2f}×)")
    if run:
        rate = statistics.median(s.prompt_tokens_per_s for s in run)
        parts.append(
            f"{len(run)} consecutive intervals (lines {run[0].line_no}–{run[-1].line_no}) with "
            f"{run[0].waiting_reqs}→{run[-1].waiting_reqs} "
            f"requests waiting while prefill ran flat out at ≈{rate:,.0f} tokens/s and KV stayed below "
            f"{KV_FULL_PCT:.0f}%"
            + (f": a full {mnbt:,}-token chunk takes ≈{mnbt / rate * 1e3:,.0f} ms at that rate" if mnbt else "")
        )
    budget = f"max_num_batched_tokens {mnbt:,} ({msrc})" if mnbt else "max_num_batched_tokens (not known)"
    if itl_hurt and ttft_bound:
        verdict, advice = "tradeoff", (f"TTFT and ITL pull {budget} in opposite directions: raise it for TTFT, lower "
                                       f"it for ITL, "
                                       "or add replicas to get both — pick by which SLO you miss")
    elif itl_hurt:
        verdict, advice = "itl_hurt_by_prefill", (f"prefill chunks stretch decode steps: lower {budget}" +
                                                  (f", e.g. to {max(mnbt // 2, 512):,}" if mnbt else "") + "; ITL "
                                                      "falls, TTFT rises")
    elif ttft_bound:
        verdict, advice = "ttft_prefill_bound", (f"TTFT is queueing behind prefill: raise {budget}" + (f", e.g. to "
            f"{2 * mnbt:,}" if mnbt else "") +
                                                 " while steps are not yet compute-bound (fewer, larger steps), or add "
                                                 "replicas; ITL rises")
    else:
        verdict, advice = (
            "no_batching_signal",
            "no sign that max_num_batched_tokens is the binding trade-off in these intervals",
        )
    msg = "; ".join(parts + [advice]) if parts else advice
    notes = [] if len(pre) >= 2 and len(dec) >= 2 else [f"ITL comparison needs ≥ 2 intervals with and ≥ 2 without "
                                                        f"prefill (have {len(pre)} and {len(dec)})"]
    if any(s.waiting_reqs > 0 and (s.gpu_kv_usage_pct or 0) >= KV_FULL_PCT for s in stats):
        notes.append(f"requests also wait while KV usage is ≥ {KV_FULL_PCT:.0f}%: that part of the queue is capacity "
                     f"(see the capacity finding)")
    if any(e.mode == "SWAP" for e in ctx.log.preemptions):
        notes.append("SWAP preemptions mean multi-sequence requests (n > 1 or beam search): each emits several tokens "
                     "per step, "
                     "so the implied ITL per request understates")
    # judged when a signal fired, the ITL comparison had its intervals, or there were enough intervals for a TTFT run
    diagnosed = itl_hurt or ttft_bound or (len(pre) >= 2 and len(dec) >= 2) or len(stats) >= QUEUE_RUN
    return Finding("batching_ttft_itl", itl_hurt or ttft_bound, verdict, msg, BATCH_RULE, tuple(ev), (), tuple(notes),
                   diagnosed=diagnosed)
