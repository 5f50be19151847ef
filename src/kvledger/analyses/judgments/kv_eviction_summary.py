"""The KV-eviction analysis for one model on one GPU: the chosen layout, every layout side by side, what it does to
concurrency, and which methods need attention scores.

Method tags follow docs/engine-model.md §6.6 (sources there): whether a method's choice depends on the query
(query-aware: it assumes the question is in the prompt when it evicts; KVzip and SCBench show such caches
degrade when reused for other questions) and whether it needs attention scores, which FlashAttention never
writes to HBM (Dao et al. 2022: softmax is computed tile by tile, online). Accuracy is not predicted.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import PlanSettings
from kvledger.analyses.judgments.kv_eviction import LAYOUTS, EvictionResult, evict
from kvledger.analyses.plans import require_kv_pool
from kvledger.catalog.gpus import GpuSpec
from kvledger.catalog.layers import kv_heads_per_gpu
from kvledger.catalog.modelspec import ModelSpec
from kvledger.errors import InputError
from kvledger.jsonable import to_jsonable
from kvledger.units import fmt_bytes

__all__ = ["METHODS", "EvictionReport", "analyse_kv_eviction"]

METHODS: tuple[dict[str, str], ...] = (
    {"method": "StreamingLLM", "keeps": "first few sink tokens + a recent window", "query": "agnostic",
     "needs_scores": "no (positions only)", "paged_layout": "sink-window: frees whole blocks",
     "source": "Xiao et al., ICLR 2024"},
    {"method": "H2O", "keeps": "heavy hitters by accumulated attention + recent tokens", "query": "aware",
     "needs_scores": "yes: column sums of the full score matrix (later papers call it FlashAttention-incompatible)",
     "paged_layout": "scattered, per head", "source": "Zhang et al., NeurIPS 2023; KVzip §1 lists it as query-aware"},
    {"method": "SnapKV", "keeps": "tokens the last prompt window attends to most, per head", "query": "aware (assumes "
        "the question is in that window)",
     "needs_scores": "yes, but only the observation window's rows (recomputed separately; prefill can stay "
                     "FlashAttention)",
     "paged_layout": "scattered, per head", "source": "Li et al., NeurIPS 2024"},
    {"method": "KVzip", "keeps": "KV pairs with the highest attention in a context-reconstruction pass",
     "query": "agnostic",
     "needs_scores": "yes, from an extra reconstruction forward pass (chunked)", "paged_layout": "scattered (pair- or "
         "head-level)",
     "source": "Kim et al., NeurIPS 2025 (arXiv 2505.23416)"},
    {"method": "SCBench", "keeps": "(a benchmark, not a method)", "query": "tests shared-context, multi-turn reuse",
     "needs_scores": "—", "paged_layout": "—",
     "source": "Li et al., ICLR 2025 (arXiv 2412.10319): sub-O(n)-memory methods, sink+window and SnapKV-style "
               "dropping included, lose accuracy in multi-turn use"},
)


@dataclass(frozen=True)
class EvictionReport:
    """The whole analysis; ``to_dict`` is the JSON of ``kvledger kv-eviction --json``.

    Attributes:
        result: the asked layout. by_layout: every layout at the same eviction share and seed.
        heads_per_block: (layer, KV head) pairs whose K/V share one block, count.
        concurrency_before / concurrency_after: whole requests of this context in the pool, if freed blocks return
            to it (None for hybrid layouts), count. methods: METHODS.
    """

    model: str
    gpu: str
    settings: dict[str, Any]
    result: EvictionResult
    by_layout: tuple[EvictionResult, ...]
    heads_per_block: int
    concurrency_before: int | None
    concurrency_after: int | None
    methods: tuple[dict[str, str], ...]
    verdict: tuple[str, ...]
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


def _heads_per_block(model: ModelSpec, tp: int, plan) -> int:
    kv_heads = kv_heads_per_gpu(model.num_kv_heads, tp) if model.num_kv_heads else 1
    layers = (
        plan.layout.groups[0].slots
        if plan.layout is not None
        else sum(1 for layer in model.layers if layer is not None)
    )
    return max(1, kv_heads * layers)


def _verdict(r: EvictionResult, all_: tuple[EvictionResult, ...], before: int | None, after: int | None) -> list[str]:
    out = [f"Evicting {r.evicted_fraction:.0%} of {r.context_tokens:,} tokens keeps {r.kept_tokens:,}. With survivors "
           f"{LAYOUTS[r.layout]}, {r.empty_blocks:,} of {r.num_blocks:,} blocks ({r.freed_fraction:.1%}) become empty: "
           f"{fmt_bytes(r.freed_bytes, both=False)} of {fmt_bytes(r.held_bytes, both=False)} per sequence goes back to "
           f"the pool "
           f"({r.block_size}-token blocks of {r.bytes_per_block:,} B). {r.formula}."]
    scat = next((x for x in all_ if x.layout == "scattered"), None)
    sw = next((x for x in all_ if x.layout == "sink-window"), None)
    if scat and sw:
        out.append(f"Same share evicted, different layouts: scattered survivors free {scat.freed_fraction:.1%} of the "
                   f"memory "
                   f"(worst case {next(x for x in all_ if x.layout == 'worst').freed_fraction:.1%}), sink + window "
                   f"{sw.freed_fraction:.1%}. A paged pool frees blocks, not tokens: survivors left in nearly every "
                   f"block "
                   f"free almost nothing of the {r.evicted_fraction:.0%} evicted.")
    if before is not None and after is not None and r.empty_blocks:
        out.append(f"If freed blocks return to the pool, whole requests of {r.context_tokens:,} tokens go from "
                   f"{before:,} to "
                   f"{after:,} — but only after each has been prefilled in full (admission still needs every block).")
    out.append(f"Getting the memory back from scattered survivors needs compaction: copying the {r.kept_tokens:,} "
               f"survivors "
               f"into {r.compacted_blocks:,} fresh blocks ({fmt_bytes(r.compaction_copy_bytes, both=False)} moved per "
               f"sequence); "
               "vLLM's block manager does not compact.")
    out.append("Score-based eviction (H2O, SnapKV, KVzip) needs attention scores, and FlashAttention never writes the "
               "score matrix to memory (online softmax over tiles, Dao et al. 2022): the scores must come from a "
               "separate "
               "pass or kernel. Sink + window needs positions only.")
    return out


def analyse_kv_eviction(model: ModelSpec, gpu: GpuSpec, settings: PlanSettings | None, *, layout: str,
                        evict_fraction: float | None, context_tokens: int | None = None, sink_tokens: int = 4,
                        window_tokens: int | None = None, run_tokens: int = 64, seed: int | None = 0) -> EvictionReport:
    """Eviction for ``model`` on ``gpu`` at one context: the chosen layout and all others at the same share.

    Raises:
        InputError: a context beyond max_model_len, or any bad eviction parameter (see ``evict``).
    """
    s = settings or PlanSettings()
    plan = build_plan(model, gpu, s, with_roofline=False, with_advice=False)
    require_kv_pool(plan)
    m = plan.memory
    n = context_tokens if context_tokens is not None else min(32768, m.max_model_len)
    if n > m.max_model_len:
        raise InputError(f"--context {n:,} exceeds max_model_len {m.max_model_len:,}")
    hpb = _heads_per_block(model, s.tp, plan)
    kw = dict(sink_tokens=sink_tokens, run_tokens=run_tokens, seed=seed, heads_per_block=hpb)
    res = evict(n, m.block_size, m.bytes_per_block, layout, evict_fraction=evict_fraction, window_tokens=window_tokens,
                **kw)
    share = res.evicted_fraction
    others = tuple(res if lay == layout else evict(n, m.block_size, m.bytes_per_block, lay, evict_fraction=share,
                                                   seed=0 if seed is None else seed,
                                                   **{k: v for k, v in kw.items() if k != "seed"})
                   for lay in LAYOUTS)
    uniform = plan.layout is None or len(plan.layout.groups) == 1
    before = after = None
    notes = ["Accuracy is not predicted: which tokens matter depends on the method and the queries (KVzip, SCBench).",
             f"One survivor set shared by all {hpb} (layer, KV head) pairs of a block is the most favourable case; "
             f"methods "
             "that choose per head (SnapKV, H2O, KVzip head-level) free a block only when every head's survivors leave "
             "it."]
    if uniform:
        usable = m.usable_blocks
        before = usable // res.num_blocks
        after = usable // max(1, res.num_blocks - res.empty_blocks)
    else:
        notes.append("Hybrid layout (several KV cache groups): concurrency before/after is not computed; "
                     "sliding-window "
                     "layers already hold only their window.")
    return EvictionReport(model.name, gpu.name, s.model_dump(), res, others, hpb, before, after, METHODS,
                          tuple(_verdict(res, others, before, after)), tuple(notes + list(res.notes)))
