"""The KV-cache ledger for one model on one GPU under one engine: ``build_plan`` → ``Plan``.

Ties the pieces together: KV bytes (kvcache.py), the engine's memory plan (plan_vllm.py,
plan_other.py), concurrency at each context, the roofline (roofline_report.py), the
"which terms make the difference" waterfall and, when something does not fit, advice with numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvledger.accounting.advice import Advice, advise, waterfall
from kvledger.accounting.kvcache import KVLedger, kv_ledger
from kvledger.accounting.kvlayout import KVLayout
from kvledger.accounting.memory import MemoryPlan
from kvledger.accounting.plan_other import sglang_plan, trtllm_plan
from kvledger.accounting.plan_vllm import vllm_plan
from kvledger.accounting.roofline import RooflineStepCost
from kvledger.accounting.roofline_report import RooflineReport, roofline_report
from kvledger.accounting.settings import PlanSettings
from kvledger.catalog.gpus import GpuSpec
from kvledger.catalog.modelspec import ModelSpec
from kvledger.units import cdiv

__all__ = ["ConcurrencyRow", "Plan", "build_plan", "concurrency_rows", "default_contexts", "plan_to_dict"]


@dataclass(frozen=True)
class ConcurrencyRow:
    """How many requests of one context length the pool holds at once.

    Attributes:
        context_tokens: tokens per request (prompt + output), tokens.
        blocks_per_request: blocks one request may need (vLLM R(L); SGLang: tokens), count.
        bytes_per_request: KV (+ state) bytes one request holds, per GPU, B.
        max_concurrency: the engine's figure, blocks ÷ blocks per request (what vLLM prints), ×.
        max_requests: whole requests that fit in the usable pool at once, count.
        within_max_model_len: False when the context exceeds max_model_len (the engine rejects such requests).
    """

    context_tokens: int
    blocks_per_request: int
    bytes_per_request: float
    max_concurrency: float
    max_requests: int
    within_max_model_len: bool


@dataclass(frozen=True)
class Plan:
    """The whole ledger. ``to_dict`` gives the JSON scripts rely on (see cli/plan_cmd.py)."""

    model: ModelSpec
    gpu: GpuSpec
    settings: PlanSettings
    kv: KVLedger
    memory: MemoryPlan
    layout: KVLayout | None
    inflight_tokens: int
    concurrency: tuple[ConcurrencyRow, ...]
    roofline: RooflineReport | None
    advice: Advice | None
    waterfall: tuple[dict[str, Any], ...] = field(default_factory=tuple)

    def blocks_for_tokens(self, num_tokens: int) -> int:
        """Blocks a running request holds after ``num_tokens`` computed tokens (for the simulator), blocks."""
        if self.layout is not None:
            return self.layout.blocks_for_tokens(num_tokens)
        return cdiv(num_tokens, self.memory.block_size)

    def step_cost(self, cpu_overhead_s: float | None = None) -> RooflineStepCost:
        """The roofline as a StepCostModel with this plan's efficiencies."""
        s = self.settings
        return RooflineStepCost(self.model, self.gpu, self.kv, s.tp, flops_fraction=s.achievable_flops_fraction,
                                bandwidth_fraction=s.achievable_bandwidth_fraction,
                                cpu_overhead_s=s.cpu_overhead_s if cpu_overhead_s is None else cpu_overhead_s)

    def row_at(self, context_tokens: int) -> ConcurrencyRow | None:
        return next((r for r in self.concurrency if r.context_tokens == context_tokens), None)


def default_contexts(max_model_len: int) -> list[int]:
    """2K, 8K, 32K, 128K (where ≤ max_model_len) and max_model_len itself, tokens."""
    return sorted({c for c in (2048, 8192, 32768, 131072) if c <= max_model_len} | {max_model_len})


def concurrency_rows(mem: MemoryPlan, layout: KVLayout | None, kv: KVLedger, inflight: int, contexts: list[int]) -> list[ConcurrencyRow]:
    """Concurrency at each context under the engine's own per-request demand rule."""
    rows = []
    for c in contexts:
        if mem.engine == "vllm":
            r = layout.blocks_per_request(c, inflight)
        elif mem.engine == "sglang":
            r = cdiv(c, mem.block_size)
        else:
            r = cdiv(c, mem.block_size)
        conc = mem.num_gpu_blocks / r if r else 0.0
        rows.append(ConcurrencyRow(c, r, kv.bytes_per_request(c), conc, mem.usable_blocks // r if r else 0, c <= mem.max_model_len))
    return rows


def build_plan(model: ModelSpec, gpu: GpuSpec, settings: PlanSettings | None = None, *, with_roofline: bool = True,
               with_advice: bool = True) -> Plan:
    """Compute the KV-cache ledger.

    Raises:
        InputError: impossible settings (TP not dividing heads, max_model_len beyond the model, ...).
    """
    s = settings or PlanSettings()
    kv = kv_ledger(model, s.kv_cache_dtype, s.tp, mamba_ssm_cache_dtype=s.mamba_ssm_cache_dtype)
    layout, inflight = None, 0
    if s.engine == "vllm":
        res = vllm_plan(model, gpu, s, kv)
        mem, layout, inflight = res.memory, res.layout, res.inflight_tokens
    elif s.engine == "sglang":
        mem = sglang_plan(model, gpu, s, kv)
    else:
        mem = trtllm_plan(model, gpu, s, kv)
    contexts = sorted(set(s.contexts)) if s.contexts else default_contexts(mem.max_model_len)
    rows = concurrency_rows(mem, layout, kv, inflight, contexts)
    roof = None
    if with_roofline:
        rc = RooflineStepCost(model, gpu, kv, s.tp, flops_fraction=s.achievable_flops_fraction,
                              bandwidth_fraction=s.achievable_bandwidth_fraction, cpu_overhead_s=s.cpu_overhead_s)
        maxc = {r.context_tokens: float(r.max_requests) for r in rows if r.max_requests > 0}
        roof = roofline_report(rc, contexts, maxc, min(mem.max_num_batched_tokens, 8192))
    plan = Plan(model, gpu, s, kv, mem, layout, inflight, tuple(rows), roof, None)
    adv = advise(plan, build_plan) if with_advice else None
    wf = tuple(waterfall(plan)) if with_advice and s.engine == "vllm" else ()
    return Plan(model, gpu, s, kv, mem, layout, inflight, tuple(rows), roof, adv, wf)



def plan_to_dict(p: Plan) -> dict[str, Any]:
    """The plan as JSON-ready data. Stable keys for scripts: model.kv_bytes_per_token, model.num_params,
    model.weight_bytes, gpu.memory_bytes, memory.available_kv_bytes, memory.num_gpu_blocks, memory.block_size,
    concurrency[].context_tokens / .max_concurrency, roofline.ridge_flops_per_byte."""
    from kvledger.catalog.models import stated_params

    m = p.model
    st = stated_params(m.catalog_id) if m.catalog_id else None
    model = {**m.to_dict(), "kv_bytes_per_token": p.kv.bytes_per_token_model, "weight_bytes": m.weight_bytes(),
             "stated_params": st.total if st else None, "stated_active_params": st.active if st else None}
    return {
        "model": model, "gpu": p.gpu.to_dict(), "settings": p.settings.model_dump(), "kv": p.kv.to_dict(),
        "memory": {**p.memory.to_dict(), "layout": p.layout.to_dict() if p.layout else None, "inflight_tokens": p.inflight_tokens},
        "concurrency": [r.__dict__ for r in p.concurrency],
        "roofline": p.roofline.to_dict() if p.roofline else None,
        "advice": p.advice.to_dict() if p.advice else None, "waterfall": list(p.waterfall),
    }
