"""The KV-cache ledger for one model on one GPU under one engine: ``build_plan`` → ``Plan``.

Ties together KV bytes (kvcache.py), the engine's memory plan (plan_vllm.py, plan_other.py), concurrency at each
context, the roofline (roofline_report.py), the term waterfall and, when something does not fit, advice with numbers.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from kvledger.accounting.dp_attention import attention_tp, check_data_parallel, data_parallel_notes, dp_size
from kvledger.accounting.dp_node import DataParallelFacts, data_parallel_facts, dp_remedy
from kvledger.accounting.expert_parallel import expert_parallel_notes
from kvledger.accounting.kvcache import KVLedger, kv_ledger
from kvledger.accounting.kvlayout import KVLayout
from kvledger.accounting.memory import MemoryPlan
from kvledger.accounting.node_size import NodeAssumption, assume_nodes
from kvledger.accounting.plan_checks import check_plan_args, check_settings
from kvledger.accounting.plan_roofline import roofline_model, roofline_terms
from kvledger.accounting.plan_vllm import served_model, vllm_plan
from kvledger.accounting.resolved_defaults import resolved_from
from kvledger.accounting.roofline import RooflineStepCost
from kvledger.accounting.roofline_breakdown import RooflineReport, roofline_report
from kvledger.accounting.settings import PlanSettings
from kvledger.accounting.sglang_steps import GraphPaddedStepCost, sglang_capture_sizes
from kvledger.accounting.vllm_archs import with_architecture_check
from kvledger.accounting.vllm_gpu_support import gpu_notes
from kvledger.accounting.vllm_rules import LATEST, parse_version
from kvledger.accounting.window_capacity import decode_blocks
from kvledger.catalog.gpus import GpuSpec
from kvledger.catalog.modelspec import ModelSpec
from kvledger.errors import InputError
from kvledger.jsonable import json_fields, to_jsonable, whole_bytes
from kvledger.units import cdiv

if TYPE_CHECKING:
    from kvledger.accounting.advice import Advice
    from kvledger.accounting.plan_json import KVFacts, MemoryFacts, ModelFacts

__all__ = ["ConcurrencyRow", "Plan", "build_plan", "concurrency_rows", "default_contexts"]


@json_fields(extra=("max_running",))
@dataclass(frozen=True)
class ConcurrencyRow:
    """How many requests of one context length the pool holds at once.

    Attributes:
        context_tokens: tokens per request (prompt + output), tokens.
        blocks_per_request: blocks one request may need (vLLM R(L); SGLang: tokens), count.
        bytes_per_request: KV (+ state) bytes one request holds at this context, per GPU, B.
        pool_bytes_per_request: what the engine budgets for one request: blocks_per_request × bytes per block, B
            (above bytes_per_request for sliding windows, which reserve blocks for in-flight tokens, and for padding).
        max_concurrency: the engine's figure, blocks ÷ blocks per request (what vLLM prints), ×; for a model with no
            KV of its own (``MemoryPlan.kv_free``) the engine prints none and this is max_num_seqs.
        max_requests: whole requests that fit in the usable pool at once, count (KV only; see running_cap); max_num_seqs
            for a model with no KV of its own; 0 beyond max_model_len (the engine rejects such a request).
        pool_requests: beyond max_model_len only, the whole requests the pool would hold were they admitted, count;
            None (null in the JSON: the key is always there) within it, where ``max_requests`` is that figure.
        running_cap: max_num_seqs, the most requests the engine runs at once whatever the KV allows, count.
        within_max_model_len: False when the context exceeds max_model_len (the engine rejects such requests).
        max_concurrency_range: low and high of max_concurrency from the plan's block range (``MemoryPlan.ranges``),
            the same rule at each end (blocks ÷ blocks per request), ×; None when the two ends are the same.
        decode_blocks_per_request: with sliding-window (or chunked-local) layers under vLLM, the blocks one request
            holds at most while decoding: full-attention blocks plus each windowed group's window + a block
            (``window_capacity.py``), blocks; None (left out of the JSON) otherwise.
        decode_concurrency, decode_requests: blocks ÷ decode_blocks_per_request (×) and usable blocks ÷ it (whole
            requests while decoding, KV only), or None.
    """

    __json_optional__ = ("decode_blocks_per_request", "decode_concurrency", "decode_requests")

    context_tokens: int
    blocks_per_request: int
    bytes_per_request: float
    pool_bytes_per_request: float
    max_concurrency: float
    max_requests: int
    running_cap: int
    within_max_model_len: bool
    max_concurrency_range: tuple[float, float] | None = None
    decode_blocks_per_request: int | None = None
    decode_concurrency: float | None = None
    decode_requests: int | None = None
    pool_requests: int | None = None

    @property
    def max_running(self) -> int:
        """Requests of this length running at once: the KV limit capped by max_num_seqs, count."""
        return min(self.max_requests, self.running_cap)


@dataclass(frozen=True)
class Plan:
    """The whole ledger. ``to_dict``: the JSON scripts rely on (cli/plan_cmd.py); stable keys: model.kv_bytes_per_token,
    model.num_params, model.weight_bytes, gpu.memory_bytes, memory.available_kv_bytes, memory.num_gpu_blocks,
    memory.block_size, concurrency[].context_tokens / .max_concurrency, roofline.ridge_flops_per_byte."""

    __json__ = (("model", "model_facts"), "gpu", ("settings", "settings_json"), ("given", "given_settings"),
                "resolved_from", ("kv", "kv_facts"), ("memory", "memory_facts"),
                "concurrency", "at_max_model_len", "roofline", "advice", "waterfall", "data_parallel", "dp_remedy")
    __json_optional__ = ("data_parallel", "dp_remedy")  # left out at DP 1 / where DP attention does not apply

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
    at_max_model_len: ConcurrencyRow | None = None
    nodes: NodeAssumption | None = None  # the nodes assumed where --nnodes leaves too many GPUs on one (node_size.py)
    data_parallel: DataParallelFacts | None = None  # the DP ranks' figures (dp_node.py); None at DP 1
    dp_remedy: str | None = None  # MLA at TP > 1: what DP attention would hold, computed (dp_node.py)
    dp_brief: str | None = None  # the same in one note for the short plan (not in the JSON)
    stage_kv: KVLedger | None = None  # vLLM with PP: the KV ledger of the binding stage's layers alone, per GPU
    given: PlanSettings | None = None  # the settings as the caller gave them (None: ``settings`` are those)

    def blocks_for_tokens(self, num_tokens: int) -> int:
        """Blocks a running request holds after ``num_tokens`` computed tokens (for the simulator), blocks."""
        if self.layout is not None:
            return self.layout.blocks_for_tokens(num_tokens)
        return cdiv(num_tokens, self.memory.block_size)

    def step_cost(self, cpu_overhead_s: float | None = None, overlap_cpu: bool = False, gemm_curve=None,
                  **profile_terms: Any) -> RooflineStepCost:
        """The plain roofline: the settings' flat FLOP/s and bandwidth fractions and link share, no measured GEMM
        curve or layer-kernel floors unless passed (``gemm_curve``, ``profile_terms``), so faster than ``kvledger
        simulate`` prices with a GPU's profile: ``kvledger.simulate`` gives its latencies. ``overlap_cpu``: async."""
        s = self.settings
        sg = sglang_capture_sizes(self.gpu, s.tp, s.pp, s.engine_version, s.max_num_seqs,
                                  self.memory.max_num_seqs or None) if s.engine == "sglang" else None
        rc = RooflineStepCost(roofline_model(self.model, s), self.gpu, self.kv, s.tp,
                              cpu_overhead_s=s.cpu_overhead_s if cpu_overhead_s is None else cpu_overhead_s,
                              overlap_cpu=overlap_cpu or s.engine == "sglang", gemm_curve=gemm_curve,
                              **roofline_terms(self.model, self.gpu, s), **profile_terms)
        return rc if sg is None else GraphPaddedStepCost(rc, *sg)

    @property
    def planned_contexts(self) -> tuple[int, ...]:
        """The contexts whose rows the plan holds: those asked for (or the defaults) and max_model_len, tokens."""
        at = (self.at_max_model_len.context_tokens,) if self.at_max_model_len is not None else ()
        return tuple(sorted({r.context_tokens for r in self.concurrency} | set(at)))

    def row_at(self, context_tokens: int) -> ConcurrencyRow:
        """The concurrency row at a context: the planned row (``planned_contexts``), else computed now by the same
        rule (``concurrency_rows``); a context beyond max_model_len has ``max_requests`` 0 (the engine rejects it).

        Raises: InputError: ``context_tokens`` is not a positive int."""
        if isinstance(context_tokens, bool) or not isinstance(context_tokens, int) or context_tokens < 1:
            raise InputError(f"row_at(context_tokens): a positive int of tokens (8192), got {context_tokens!r}; the "
                             f"plan holds rows at {', '.join(f'{c:,}' for c in self.planned_contexts)}")
        at = self.at_max_model_len
        row = next((r for r in self.concurrency if r.context_tokens == context_tokens), None)
        row = row or (at if at is not None and at.context_tokens == context_tokens else None)
        return row or concurrency_rows(self.memory, self.layout, self.stage_kv or self.kv, self.inflight_tokens,
                                       [context_tokens])[0]

    @property
    def fits(self) -> bool:
        """True when one max_model_len request fits the usable blocks (vLLM < 0.29 also starts where it needs all)."""
        return self.memory.fits and self.at_max_model_len is not None and self.at_max_model_len.max_requests >= 1

    resolved_from = resolved_from  # the JSON's sections: resolved_from here, the others plan_json's (imported late)
    def model_facts(self) -> ModelFacts:
        from kvledger.accounting import plan_json
        return plan_json.ModelFacts.of(self.model, self.kv, self.settings.quantization)

    def kv_facts(self) -> KVFacts:
        from kvledger.accounting import plan_json
        bind = next((st for st in self.memory.stages if st["binds"]), None)
        return plan_json.KVFacts(self.kv, *((self.stage_kv, plan_json.stage_scope(bind)) if bind else (None, None)))

    def settings_json(self) -> dict[str, Any]:
        """The JSON's ``settings``: as run, each default resolved, as ``resolved_from`` names it (plan_json.py)."""
        from kvledger.accounting import plan_json
        return plan_json.settings_json(self)

    def given_settings(self) -> PlanSettings:
        """The JSON's ``given``: the settings as given, None where the engine's default applies."""
        return self.given or self.settings

    def memory_facts(self) -> MemoryFacts:
        from kvledger.accounting import plan_json
        return plan_json.MemoryFacts(self.memory, self.layout, self.inflight_tokens)

    def to_dict(self) -> dict[str, Any]:
        return whole_bytes(to_jsonable(self))


def default_contexts(max_model_len: int) -> list[int]:
    """2K, 8K, 32K, 128K (where ≤ max_model_len) and max_model_len itself, tokens."""
    return sorted({c for c in (2048, 8192, 32768, 131072) if c <= max_model_len} | {max_model_len})


def concurrency_rows(mem: MemoryPlan, layout: KVLayout | None, kv: KVLedger, inflight: int,
                     contexts: list[int]) -> list[ConcurrencyRow]:
    """Concurrency at each context under the engine's own per-request demand rule."""
    rows = []
    for c in contexts:
        r = layout.blocks_per_request(c, inflight) if mem.engine == "vllm" else cdiv(c, mem.block_size)
        # no KV of its own: nothing limits the requests held but max_num_seqs (the engine prints no figure)
        if mem.kv_free:
            within = c <= mem.max_model_len
            rows.append(ConcurrencyRow(c, 0, 0.0, 0.0, float(mem.max_num_seqs), mem.max_num_seqs if within else 0,
                                       mem.max_num_seqs, within, pool_requests=None if within else mem.max_num_seqs))
            continue
        conc = mem.num_gpu_blocks / r if r else 0.0
        b_lo, b_hi = mem.ranges.get("num_gpu_blocks", (mem.num_gpu_blocks, mem.num_gpu_blocks))
        rng = (b_lo / r, b_hi / r) if r and b_lo != b_hi else None
        d = decode_blocks(layout, c, inflight) if mem.engine == "vllm" else None
        dec = (d, mem.num_gpu_blocks / d, mem.usable_blocks // d) if d and d < r else (None, None, None)
        whole, within = mem.usable_blocks // r if r else 0, c <= mem.max_model_len
        if dec[2] is not None and not within:
            dec = (*dec[:2], 0)
        rows.append(ConcurrencyRow(c, r, kv.bytes_per_request(c), r * mem.bytes_per_block, conc, whole if within else 0,
                                   mem.max_num_seqs, within, rng, *dec, pool_requests=None if within else whole))
    return rows


def _vllm_served(model: ModelSpec, gpu: GpuSpec, s: PlanSettings) -> tuple[ModelSpec, PlanSettings, tuple, str]:
    """vLLM's view of the served model and settings: "auto" KV resolved from the checkpoint, the FP8 KV check, the MLA
    and sparse-MLA cache shapes and the SSM-state dtype; with the SSM note and why the KV dtype is what it is."""
    from kvledger.accounting.vllm_kv_auto import resolve_auto_kv
    from kvledger.accounting.vllm_kv_dtype_support import check_fp8_kv
    from kvledger.accounting.vllm_sampler import pre_mla_cache_model
    from kvledger.accounting.vllm_sparse_mla import sparse_mla_cache_model, sparse_mla_choice
    from kvledger.accounting.vllm_ssm_dtype import with_ssm_dtype

    ver = parse_version(s.engine_version or LATEST)
    kv_dtype, kv_why = resolve_auto_kv(model, s.kv_cache_dtype, ver)  # a ModelOpt checkpoint's FP8 KV under auto
    s = s if kv_dtype == s.kv_cache_dtype else s.model_copy(update={"kv_cache_dtype": kv_dtype})
    check_fp8_kv(model, gpu, s.kv_cache_dtype, ver, s.quantization)  # the weights' refusal first, as vLLM
    model = pre_mla_cache_model(model, ver)
    model = sparse_mla_cache_model(model, sparse_mla_choice(model, ver, gpu.arch, s.kv_cache_dtype, s.tp))
    s, ssm_note = with_ssm_dtype(model, s, ver)
    return model, s, ssm_note, kv_why


def build_plan(model: ModelSpec, gpu: GpuSpec, settings: PlanSettings | None = None, *, with_roofline: bool = True,
               with_advice: bool = True) -> Plan:
    """Compute the KV-cache ledger.

    Raises:
        InputError: arguments of the wrong type; impossible settings (TP not dividing heads, max_model_len beyond the
            model, ...).
    """
    check_plan_args(model, gpu, settings)  # InputError: an id or name where a spec belongs
    s, nodes = assume_nodes(gpu, given := settings or PlanSettings())  # TP × PP past one node: the nodes they need
    check_settings(gpu, s)
    ep_notes = expert_parallel_notes(model, s)  # InputError: the flag off vLLM or without experts
    check_data_parallel(model, s)
    model = with_architecture_check(model, s)  # InputError: no decoder KV to plan; a WARNING: not listed
    checkpoint, model, ssm_note, kv_why = model, served_model(model, s.dtype), (), ""
    if s.engine == "vllm":
        model, s, ssm_note, kv_why = _vllm_served(model, gpu, s)
    kv = kv_ledger(model, s.kv_cache_dtype, attention_tp(s), mamba_ssm_cache_dtype=s.mamba_ssm_cache_dtype)
    layout, inflight = None, 0
    if s.engine == "vllm":
        res = vllm_plan(model, gpu, s, kv, checkpoint=checkpoint)
        mem, layout, inflight = res.memory, res.layout, res.inflight_tokens
        # vLLM config/scheduler.py SchedulerConfig.verify_max_model_len
        if mem.max_num_batched_tokens < mem.max_num_seqs:
            raise InputError(f"max_num_batched_tokens ({mem.max_num_batched_tokens:,}) must be at least max_num_seqs "
                             f"({mem.max_num_seqs:,}), or vLLM refuses to start; raise --max-num-batched-tokens or "
                             "lower --max-num-seqs")
        row_kv = (stage_kv := res.stage_kv) or kv  # with PP, a request's bytes on one GPU of the binding stage
    else:  # plan_other (SGLang's and TRT-LLM's plans, with their load buffers and pools) is imported only for them
        from kvledger.accounting.plan_other import sglang_plan, trtllm_plan

        mem, row_kv, stage_kv = (sglang_plan if s.engine == "sglang" else trtllm_plan)(model, gpu, s, kv), kv, None
    mem = replace(mem, notes=(*gpu_notes(s.engine, gpu, s.engine_version), *([nodes.text] if nodes else ()),
                              *ssm_note, *([kv_why] * bool(kv_why)), *ep_notes,
                              *data_parallel_notes(model, s, mem.engine_version), *mem.notes))
    contexts = sorted(set(s.contexts)) if s.contexts else default_contexts(mem.max_model_len)
    rows = concurrency_rows(mem, layout, row_kv, inflight, contexts)
    at_len = concurrency_rows(mem, layout, row_kv, inflight, [mem.max_model_len])[0]
    roof = None
    if with_roofline and mem.fits and dp_size(s) == 1:  # not for weights that do not fit, nor DP (dp_attention.py)
        rc = RooflineStepCost(roofline_model(model, s), gpu, kv, s.tp, cpu_overhead_s=s.cpu_overhead_s,
                              **roofline_terms(model, gpu, s))
        maxc = {r.context_tokens: float(r.max_running) if r.max_requests > 0 else 0.0 for r in rows}  # 0: none fits
        roof = roofline_report(rc, contexts, maxc, min(mem.max_num_batched_tokens, 8192), s.engine, s)
    dpf = data_parallel_facts(s, mem, rows + [at_len] * all(r.context_tokens != at_len.context_tokens for r in rows))
    plan = Plan(model, gpu, s, kv, mem, layout, inflight, tuple(rows), roof, None, (), at_len, nodes, dpf,
                stage_kv=stage_kv, given=given)
    if not with_advice:  # a simulation's plan (sim_setup): the advice module is not even imported
        return plan
    from kvledger.accounting.advice import advise, waterfall
    from kvledger.accounting.advice_mnbt import dp_budget_note  # a DP + EP plan's lower token budget: a note only
    plan = replace(plan, memory=replace(mem, notes=(*mem.notes, *dp_budget_note(plan, build_plan))))
    wf = tuple(waterfall(plan)) if s.engine == "vllm" and mem.fits else ()
    remedy, brief = dp_remedy(plan, build_plan) or (None, None)
    return replace(plan, advice=advise(plan, build_plan), waterfall=wf, dp_remedy=remedy, dp_brief=brief)

