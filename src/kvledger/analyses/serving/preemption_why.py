"""Why a simulated run preempted, and what to change: the facts behind ``preemptions (recompute): N``.

A preemption is a KV-allocation failure (as doctor's capacity finding says of a vLLM log): a running request needed a
block for its next tokens and none was free, so the scheduler freed a running request's blocks — vLLM (V1 and V0)
the most recently admitted one, whose prompt and tokens so far are recomputed when it is readmitted; SGLang retracts
the decode request with the fewest outputs. The simulator keeps, per replica, the largest running batch and the state
when the first preemption happened (``dynamics.outputs.batch_peak``); the options are doctor's, re-planned by the
ledger on the simulated pool and sized by this workload's mean request (prompt mean + output mean), which a running
request reaches by its last token (``doctor.plan_capacity``), and counted as ``plan`` counts a request under vLLM's
hybrid KV cache manager (``pool_holds``: sliding layers at their window, Mamba state groups at their pages).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kvledger.analyses.serving.pool_holds import pool_holds, shared_count, shared_prefix_held
from kvledger.analyses.serving.preemption_resume import resume_facts
from kvledger.ledgers.columns import columns_from

__all__ = ["preemption_facts"]

_RULE = {"sglang": "SGLang retracts the decode request with the fewest output tokens (then the longest prompt) and "
                   "recomputes it later",
         "vllm_v0": "vLLM V0 preempts the most recently admitted running request (recompute)"}
_V1 = "vLLM V1 preempts the most recently admitted running request (recompute: its KV is dropped and rebuilt later)"


def preemption_facts(setup: Any, result: Any) -> dict[str, Any] | None:
    """The run's preemptions explained (module doc), None when it had none or the simulator kept no batch facts.
    Times are s since the first arrival. ``setup``: its ``SimSetup``; ``result``: its ``SimResult``."""
    reps = getattr(result, "batch", None) or []
    if not result.summary.num_preemptions or not reps:
        return None
    cfg, wl = setup.config, setup.workload_info
    t0 = float(np.nanmin(columns_from(result.records).arrival_s))
    i_max = max(range(len(reps)), key=lambda i: reps[i]["running_max"])
    peak = {"requests": reps[i_max]["running_max"], "t_s": reps[i_max]["running_max_t_s"] - t0,
            "replica": i_max, "exact": all(b["running_max_exact"] for b in reps)}
    firsts = [(b["first_preemption"]["t_s"], i) for i, b in enumerate(reps) if b["first_preemption"]]
    first = None
    if firsts:
        t, i = min(firsts)
        first = {**reps[i]["first_preemption"], "t_s": t - t0, "replica": i}
    mean = float(wl.get("prompt_tokens_mean", 0.0)) + float(wl.get("output_tokens_mean", 0.0))
    pool = {"num_gpu_blocks": cfg.num_gpu_blocks, "usable_blocks": cfg.num_usable_blocks,
            "block_size": cfg.block_size, "token_slots": cfg.num_usable_blocks * cfg.block_size}
    holds = pool_holds(setup, mean)
    options = _options(setup, mean)
    out = {"num_preemptions": result.summary.num_preemptions,
           "rule": _RULE.get(cfg.batching, _V1), "pool": pool, "replicas": len(reps),
           "running_max": peak, "first": first, "max_num_seqs": cfg.max_num_seqs,
           "mean_request_tokens": mean, "mean_requests_pool_holds": holds and holds.requests, "options": options,
           "ttft_mean_s": result.summary.ttft_s.mean}
    if holds is not None and holds.blocks_per_request is not None:  # hybrid: blocks per request, not token slots
        out.update(mean_request_blocks=holds.blocks_per_request, mean_requests_rule=holds.rule)
    if holds is not None and holds.shared_tokens:  # a shared prefix's full blocks, held once
        out.update(shared_prefix_tokens_held_once=holds.shared_tokens)
    out["why"], out["what_to_change"] = _why(out, holds), _change(out)
    if (resumed := resume_facts(cfg, reps)) is not None:  # what the preemptions cost on resume (no host tier)
        out["resume"] = resumed
    return out


def _options(setup: Any, mean: float) -> list[dict[str, Any]]:
    """doctor's capacity options on the simulated plan, sized by the mean request; none without a plan (or SGLang's:
    its options are vLLM flags)."""
    plan = getattr(setup, "plan", None)
    if plan is None or mean <= 0 or setup.config.batching == "sglang":
        return []
    from kvledger.accounting.window_capacity import requests_held
    from kvledger.analyses.doctor.plan_capacity import plan_capacity_options

    shared, share = shared_prefix_held(setup)

    def held(p: Any) -> int:  # each re-planned pool counted as pool_holds counts the simulated one
        n, d = requests_held(p, mean)
        return n if d or not shared else shared_count(p.memory.usable_blocks * p.memory.block_size, mean, shared, share)

    return plan_capacity_options(plan, mean, held=held)


def _why(f: dict[str, Any], holds: Any) -> str:
    p, peak, first = f["pool"], f["running_max"], f["first"]
    per = " per replica" if f["replicas"] > 1 else ""
    text = (f"the KV pool ({p['usable_blocks']:,} usable blocks × {p['block_size']} tokens = {p['token_slots']:,} "
            f"token slots{per}) was full when running requests needed new blocks for their next tokens: {f['rule']}")
    if first is not None:
        where = f" on replica {first['replica']}" if f["replicas"] > 1 else ""
        text += (f" — first at t = {first['t_s']:,.2f} s after the first arrival{where}, with {first['running']:,} "
                 f"requests running holding {first['kv_blocks_held']:,} of the {first['usable_blocks']:,} usable "
                 "blocks")
    most = "at least " if not peak["exact"] else ""
    text += (f". The running batch peaked at {most}{peak['requests']:,} requests (t = {peak['t_s']:,.2f} s; "
             f"max_num_seqs {f['max_num_seqs']:,})")
    if holds is not None:
        once = "" if holds.blocks_per_request is None else " at once while decoding"
        text += (f", while the pool holds {holds.requests:,} requests of this workload's mean length{once} "
                 f"({holds.why()}): requests admitted on their prompts outgrow it as they decode")
    return text


def _change(f: dict[str, Any]) -> str:
    """The options in one sentence: what adds KV capacity first (fewer preemptions, no cap to queue behind), the most on
    the same GPUs named, then the batch cap with its cost in latency: it adds no capacity, so the requests past it
    wait in the queue and TTFT grows (this run's TTFT mean stated; no run with the cap is made here)."""
    rows = f["options"]
    if not rows:
        return ("give the KV cache more memory (--kv-cache-dtype fp8 where supported: about twice the pool; more GPU "
                "memory, more tensor parallelism, a bigger GPU), or cap the batch at the requests the pool holds "
                f"(--max-num-seqs), which {_QUEUES}")
    base, cap, more = rows[0], None, []
    for o in rows[1:]:
        if o["action"].startswith("--max-num-seqs"):
            cap = _cap_text(f, o)
        elif o["num_gpu_blocks"] > base["num_gpu_blocks"] or o["gpus_per_replica"] != base["gpus_per_replica"]:
            more.append(o)
    parts = []
    if more:
        listed = ", ".join(_more_text(o, base) for o in more)
        same = [o for o in more if o["gpus_per_replica"] == base["gpus_per_replica"]]
        best = (f"; the most on the same GPUs: {max(same, key=lambda o: o['num_gpu_blocks'])['action']}"
                if len(same) > 1 else "")
        parts.append(f"add KV capacity (more requests fit at once: fewer preemptions, and no cap to queue behind) "
                     f"over the {base['num_gpu_blocks']:,} blocks simulated: {listed}{best} (the ledger's re-planned "
                     "pools, per replica; the same options as doctor's capacity finding)")
    if cap is not None:
        parts.append(cap)
    notes = rows[0].get("notes") or []
    return "; or ".join(parts + ["a GPU with more memory"]) + ("; " + "; ".join(notes) if notes else "")


def _more_text(o: dict[str, Any], base: dict[str, Any]) -> str:
    """One capacity option: its re-planned pool, its ratio to the simulated one, the mean requests it holds."""
    gpus, ratio = o["gpus_per_replica"], o["num_gpu_blocks"] / base["num_gpu_blocks"]
    on = f" on {gpus} GPUs" if gpus != base["gpus_per_replica"] else ""
    return (f"{o['action']} → {o['num_gpu_blocks']:,} blocks{on} (×{ratio:.2f}), "
            f"{o['requests_of_observed_size']:,} requests of the mean length")


_QUEUES = ("adds no capacity but trades preemptions for queueing: the requests past the cap wait for a slot instead "
           "of being recomputed, so TTFT grows while the load lasts")


def _cap_text(f: dict[str, Any], o: dict[str, Any]) -> str:
    """The batch-cap option in words: the cap, its re-planned pool, and what it costs in latency."""
    n, first = o["requests_of_observed_size"], f["first"]
    held = (f"; the first preemption came with {first['running']:,} running, no more than this cap, so requests "
            "longer than the mean still preempt" if first and first["running"] <= n else "")
    d, pct = o["num_gpu_blocks_change"], o["num_gpu_blocks_change_pct"]
    counted = "mean_request_blocks" in f or "shared_prefix_tokens_held_once" in f
    how = "as counted above" if counted else "the slots ÷ the mean request"
    ttft = f.get("ttft_mean_s")
    now = (f" (this run, with the preemptions: TTFT mean {ttft:,.2f} s; rerun with the cap to see its own)"
           if ttft else "")
    return (f"cap the batch: {o['action']} ({how}: the requests of the mean length the pool holds; re-planned at this "
            f"cap the pool is {o['num_gpu_blocks']:,} blocks, {d:+,} ({pct:+.1f}%), as vLLM sizes the sampler's "
            f"warm-up and its CUDA graphs by max_num_seqs{held}) — a cap {_QUEUES}{now}")
