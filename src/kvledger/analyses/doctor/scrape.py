"""``kvledger doctor`` on a vLLM Prometheus ``/metrics`` scrape: the preemption count (the only one vLLM 0.10.x gives,
its logs printing none), the KV pool ``vllm:cache_config_info`` names against the ledger's plan, the usage and queue
at the scrape's moment, and the capacity advice ``capacity.py`` gives for preemptions in a log."""

from __future__ import annotations

from typing import Any

from kvledger.accounting.plan import Plan
from kvledger.analyses.doctor.capacity import RULE
from kvledger.analyses.doctor.context import KV_DTYPES, plan_with
from kvledger.analyses.doctor.launch_len import read_launch_len
from kvledger.catalog.gpus import custom_gpu
from kvledger.evidence.vllm_scrape import PREEMPTIONS, V0_PREFIX_RATE, VllmScrape
from kvledger.units import GiB

__all__ = ["diagnose_scrape", "PREEMPTION_MEANING"]

#: the release whose rules the ledger keeps for vLLM's V0 engine (as evidence.vllm_log.version.rules_version does)
V0_RULES = "0.7.3"

PREEMPTION_MEANING = (
    "each preemption is a running request whose KV blocks vLLM freed because the pool had no free block for its next "
    "step (V1 Scheduler.schedule → _preempt_request; V0's scheduler the same, by recompute or swap); the request goes "
    "back to the queue and its prompt and output so far are computed again when it is readmitted: lost GPU work and a "
    "stall in that request's tokens")


def _preemptions(s: VllmScrape) -> dict[str, Any]:
    n = s.preemptions
    if n is None:
        return {"count": None, "triggered": False, "message": f"the scrape has no {PREEMPTIONS[0]} series"}
    head = f"{n:,} preemption(s) since the server started ({PREEMPTIONS[0]}, a counter)"
    if not n:
        return {"count": 0, "triggered": False, "message": f"{head}: the KV pool has not run out of blocks"}
    return {"count": n, "triggered": True, "message": f"{head}: {PREEMPTION_MEANING}", "rule": RULE}


def _prefix_cache(s: VllmScrape) -> dict[str, Any]:
    """The prefix-cache counters in words: the GPU cache's hit share of the prompt tokens looked up, and the KV
    connector's (a CPU offload tier, LMCache) of the tokens past the GPU hit; since the server started."""
    out: dict[str, Any] = {"gpu": None, "connector": None, "message": None}
    parts = []
    for key, pair, name, what in (
            ("gpu", s.prefix_gpu, "vllm:prefix_cache_hits ÷ vllm:prefix_cache_queries", "prompt tokens looked up"),
            ("connector", s.prefix_connector, "vllm:external_prefix_cache_hits ÷ _queries",
             "tokens past the GPU hit looked up in the KV connector (offload tier, LMCache)")):
        if pair is None:
            continue
        q, h = pair
        rate = h / q if q else None
        out[key] = {"queries_tokens": q, "hits_tokens": h, "hit_rate": rate}
        parts.append(f"{'GPU' if key == 'gpu' else 'KV connector'} {h:,} of {q:,} {what}"
                     + (f" = {rate:.1%}" if rate is not None else " (none looked up yet)") + f" ({name})")
    if parts:
        out["message"] = "; ".join(parts) + ", counters since the server started"
    elif s.v0_prefix_hit_rate is not None:
        v = s.v0_prefix_hit_rate
        out["message"] = ("prefix caching off (vllm:gpu_prefix_cache_hit_rate −1, V0)" if v < 0 else
                          f"GPU block hit rate {v:.1%} (vllm:gpu_prefix_cache_hit_rate, V0: blocks, not tokens)")
    return out


def _settings(s: VllmScrape, engine_version: str | None, launch: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    launch, auto = read_launch_len(launch, engine_version)  # --max-model-len as that release reads it
    kw: dict[str, Any] = {"engine": "vllm", **{k: v for k, v in launch.items() if v is not None}}
    kw.update({"auto_max_model_len": True} if auto else {})
    notes = []
    if engine_version:
        kw["engine_version"] = engine_version
    elif s.v0_prefix_hit_rate is not None:  # a V0-engine gauge (vllm_scrape's doc): not the newest V1 rules
        kw["engine_version"] = V0_RULES
        notes.append(f"the scrape exports {V0_PREFIX_RATE}, a gauge of vLLM's V0 engine only (V1 counts "
                     f"vllm:prefix_cache_queries and _hits instead): the ledger's V0 rules ({V0_RULES}, versions "
                     "before 0.8) plan its pool; --engine-version to pick")
    for name in ("block_size",):
        if s.label_int(name):
            kw[name] = s.label_int(name)
    if s.label_float("gpu_memory_utilization"):
        kw["gpu_memory_utilization"] = s.label_float("gpu_memory_utilization")
    dtype = (s.cache_config.get("cache_dtype") or "auto").lower()
    kw["kv_cache_dtype"] = KV_DTYPES.get(dtype, "auto")
    if dtype not in KV_DTYPES:
        notes.append(f"cache_dtype {dtype!r} is not one the ledger models; the plan uses the model dtype")
    return kw, notes


def _pool(s: VllmScrape, model: Any, gpu: Any, kw: dict[str, Any]) -> dict[str, Any]:
    blocks, size = s.label_int("num_gpu_blocks"), s.label_int("block_size")
    row: dict[str, Any] = {"num_gpu_blocks": blocks, "block_size": size,
                           "token_slots": blocks * size if blocks and size else None,
                           "source": "vllm:cache_config_info labels num_gpu_blocks × block_size"}
    row["plan"] = None
    if model is None or not blocks:
        return row
    # a block's bytes depend on the model and the KV dtype, not on the GPU: a stand-in GPU's plan gives them
    shape = plan_with(model, gpu or custom_gpu("stand-in GPU", 80 * GiB, 1e12, 1e14), kw)
    if isinstance(shape, Plan):
        row["bytes_per_block"] = shape.memory.bytes_per_block
        row["kv_bytes"] = blocks * shape.memory.bytes_per_block
    if gpu is None:
        return row
    plan = plan_with(model, gpu, kw)
    if isinstance(plan, str):
        row["plan"], row["plan_error"] = None, plan
        return row
    assert isinstance(plan, Plan)
    m = plan.memory
    row["plan"] = {"num_gpu_blocks": m.num_gpu_blocks, "token_slots": m.num_gpu_blocks * m.block_size,
                   "settings": {k: v for k, v in kw.items() if k != "engine"},
                   "engine_version": m.engine_version}
    row["scrape_vs_plan_pct"] = round(100.0 * (blocks - m.num_gpu_blocks) / m.num_gpu_blocks, 1)
    return row


def _flag_lines(s: VllmScrape, kw: dict[str, Any]) -> list[dict[str, str]]:
    """The advice's remedies as the flag each sets on ``vllm serve`` (vLLM's names; doctor's capacity options'
    steps, ``capacity_options._variants``), for each whose value the scrape or the flags given to doctor fix:
    --gpu-memory-utilization +0.05 up to 0.95 (from cache_config_info's label or --gpu-memory-utilization),
    --tensor-parallel-size doubled (from --tensor-parallel-size: a scrape does not name the TP), --max-num-seqs at the
    requests of the scrape's size the pool holds (one engine: running ÷ KV usage, below --max-num-seqs where given),
    FP8 KV where the cache is not FP8 already. Each: {"flag", "why"}."""
    out = []
    if (util := kw.get("gpu_memory_utilization")) and util + 0.05 <= 0.95 + 1e-9:
        out.append({"flag": f"--gpu-memory-utilization {util + 0.05:.2f}",
                    "why": f"+5% of the GPU's memory for KV (from {util:g}; at most 0.95); risks OOM if anything "
                           "else shares the GPU"})
    if tp := kw.get("tp"):
        out.append({"flag": f"--tensor-parallel-size {2 * tp}",
                    "why": f"KV heads split over {2 * tp} GPUs per replica, the KV per GPU halved (plus all-reduce "
                           "time per step)"})
    usage = list(s.kv_usage_fraction.values())
    if len(usage) == 1 and usage[0] > 0 and s.running:
        n = int(s.running / usage[0])  # the pool's blocks ÷ a running request's, at the scrape's moment
        if n >= 1 and n < kw.get("max_num_seqs", n + 1):
            out.append({"flag": f"--max-num-seqs {n}",
                        "why": f"{s.running:,} running held {usage[0]:.1%} of the KV pool, so {s.running:,} ÷ "
                               f"{usage[0]:.3f} = {n:,} requests of their size fit; longer ones still preempt"})
    if not str(kw.get("kv_cache_dtype", "auto")).startswith("fp8"):
        out.append({"flag": "--kv-cache-dtype fp8", "why": "half the bytes per block, twice the blocks in the same "
                    "memory; check accuracy"})
    return out


def diagnose_scrape(s: VllmScrape, *, model: Any = None, gpu: Any = None, engine_version: str | None = None,
                    launch: dict[str, Any] | None = None) -> dict[str, Any]:
    """The scrape's reading as a dict (``--json``'s and the view's): preemptions, pool, usage, queue, advice, notes.
    ``model``/``gpu``: resolved specs (None: no plan to compare with)."""
    kw, notes = _settings(s, engine_version, launch or {})
    pre = _preemptions(s)
    if model is None or gpu is None:
        need = "pass --gpu" if model is not None else "pass --model and --gpu"
        notes.append(f"{need} to compare the pool with the ledger's plan (a scrape names neither the GPU nor, unless "
                     "bundled, the model)")
    usage = {k or "engine": round(100.0 * v, 1) for k, v in s.kv_usage_fraction.items()}
    advice = ("raise --gpu-memory-utilization, raise --tensor-parallel-size or lower --max-num-seqs (vLLM's tuning "
              "guide), or FP8 KV (--kv-cache-dtype fp8: half the bytes per block); kvledger doctor on the server's "
              "log re-plans each in numbers") if pre["triggered"] else None
    return {"kind": "vllm_metrics_scrape", "scrape": s.to_dict(), "preemptions": pre,
            "pool": _pool(s, model, gpu, kw), "kv_usage_pct": usage, "kv_usage_metric": s.kv_usage_name,
            "running": s.running, "waiting": s.waiting, "advice": advice,
            "advice_flags": _flag_lines(s, kw) if pre["triggered"] else [], "prefix_cache": _prefix_cache(s),
            "notes": notes + ["a scrape is one moment: usage and queue are now, the counters since the server "
                              "started; scrape twice and subtract for a rate"]}
