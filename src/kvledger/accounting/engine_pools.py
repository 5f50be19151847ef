"""How SGLang and TensorRT-LLM split one GPU's KV budget between full-attention, sliding-window and state pools.

SGLang 0.5.23, read from its wheel:
  * Mamba / linear-attention state first (``mem_cache/kv_cache_configurator.py::_handle_max_mamba_cache``): a
    budget of rest × r / (1 + r), r = ``mamba_full_memory_ratio`` (0.9), holds K = (budget − s) // s request
    slots of s bytes each, and K + 1 slots (one padding slot) are taken from the rest;
  * sliding-window layers (``model_executor/pool_configurator.py::HybridSWAPoolConfigurator``): one token of
    the full pool costs full_cell + ratio × swa_cell with ratio = ``swa_full_tokens_ratio`` (0.8); full tokens
    = rest // that, aligned down to the page; SWA tokens = int(full × 0.8) aligned down.
TensorRT-LLM, read from ``cpp/tensorrt_llm/batch_manager/kvCacheManager.cpp`` (``calculateMaxNumBlocks``,
``BlockManager::calculateWindowSizeToShare``): one pool per attention window w with b_w bytes per token;
pool w gets the share b_w·w / Σ b_v·v of the memory, max_tokens_w = floor(memory × share / b_w), and
blocks_w = ceilDiv(max_tokens_w, tokens_per_block): the C++ path rounds up. Which path sizes a one-window
model depends on the runtime: the TensorRT-engine executor (trtllm-build engines, the 0.x releases; read in the
``KVCacheManager::calculateMaxNumBlocks`` that prints "Number of blocks in KV cache primary pool") always uses
C++, so it rounds up; the PyTorch backend (1.0 on) sizes one window in Python,
``_torch/pyexecutor/resource_manager.py::KVCacheManager.calculate_max_num_blocks``, which floors
(``int(max_tokens // tokens_per_block)`` on NVIDIA/TensorRT-LLM main, commit 001541b; an earlier copy of that
file used ``math.ceil``), and several windows (VSWA) in C++.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace

from kvledger.accounting.kvcache import KVLedger
from kvledger.catalog.layers import MLAAttention, SlidingWindowAttention
from kvledger.catalog.modelspec import ModelSpec

__all__ = ["SWA_FULL_TOKENS_RATIO", "MAMBA_FULL_MEMORY_RATIO", "SglangPools", "sglang_pools", "recorded_sglang_pool",
           "RECORDED_MATCH", "RECORDED_USED", "TrtWindowPool",
           "trtllm_window_pools",
           "TRTLLM_RUNTIMES"]

SWA_FULL_TOKENS_RATIO = 0.8
"""SGLang ``--swa-full-tokens-ratio`` default (``arg_groups/fields/schedule.py``, fallback 0.8)."""

MAMBA_FULL_MEMORY_RATIO = 0.9
"""SGLang ``--mamba-full-memory-ratio`` default (``arg_groups/fields/schedule.py``, fallback 0.9)."""


@dataclass(frozen=True)
class SglangPools:
    """SGLang's pools on one GPU: full-attention tokens, SWA tokens, state slots, and the bytes they use.

    Attributes: full_tokens / swa_tokens: token slots, tokens. full_cell_bytes / swa_cell_bytes: B per token
    over the layers of each pool. cell_bytes: B one full-pool token costs (with its SWA share).
    state_slots: Mamba request slots (K; K + 1 allocated), count. state_bytes: B taken by them.
    """

    full_tokens: int
    swa_tokens: int
    full_cell_bytes: float
    swa_cell_bytes: float
    cell_bytes: float
    state_slots: int
    state_bytes: float
    notes: list[str] = field(default_factory=list)


def sglang_pools(kv: KVLedger, available_bytes: float, page: int = 1,
                 swa_ratio: float = SWA_FULL_TOKENS_RATIO, mamba_ratio: float = MAMBA_FULL_MEMORY_RATIO) -> SglangPools:
    """Split ``available_bytes`` as SGLang does for this model's layers (per GPU)."""
    full = sum(g.bytes_per_token for g in kv.groups if g.kind not in ("sliding_window", "state"))
    swa = sum(g.bytes_per_token for g in kv.groups if g.kind == "sliding_window")
    per_req = kv.state_bytes_per_seq
    rest, notes, slots, state_bytes = float(available_bytes), [], 0, 0.0
    if per_req > 0:
        budget = rest * mamba_ratio / (1 + mamba_ratio)
        slots = max(0, int((budget - per_req) // per_req))
        state_bytes = (slots + 1) * per_req
        rest -= state_bytes
        notes.append(f"Mamba state: {slots:,} request slots (+1 padding) of {per_req:,.0f} B = "
                     f"{mamba_ratio}/(1+{mamba_ratio}) of the "
                     "budget (SGLang mamba_full_memory_ratio); the KV pool gets the rest")
    if full and swa:
        cell = full + swa_ratio * swa
        full_tokens = max(0, int(rest // cell)) // page * page
        swa_tokens = int(full_tokens * swa_ratio) // page * page
        notes.append(f"sliding-window layers have their own pool: {swa_tokens:,} tokens = {swa_ratio} × the full "
                     f"pool's "
                     f"{full_tokens:,} (SGLang swa_full_tokens_ratio); one full token costs {full:,.0f} + {swa_ratio} "
                     f"× {swa:,.0f} B")
        return SglangPools(full_tokens, swa_tokens, full, swa, cell, slots, state_bytes, notes)
    cell = full or swa
    tokens = max(0, math.floor(rest / cell)) // page * page if cell else 0
    return SglangPools(tokens, 0, cell, 0.0, cell, slots, state_bytes, notes)


#: the starts of ``recorded_sglang_pool``'s notes: the recorded pool is the plan's; it is not, and replaces it
RECORDED_MATCH, RECORDED_USED = "recorded pool matches: ", "recorded pool used: "


def recorded_sglang_pool(pools: SglangPools, tokens: int | None, page: int = 1) -> SglangPools:
    """``pools`` with the full-attention pool the server recorded (``tokens``: ``server_info.max_total_num_tokens``,
    the usable slots SGLang sized at start-up, as the vLLM replay takes a recorded ``num_gpu_blocks``) in place of the
    plan's, and a note comparing the two; ``pools`` as they are for None. A model with a sliding-window or state pool
    keeps the plan's pools (SGLang sizes them together, so one recorded figure does not fix the others), said so."""
    if tokens is None:
        return pools
    planned = pools.full_tokens
    if pools.swa_tokens or pools.state_bytes:
        return replace(pools, notes=[*pools.notes, f"the server's recorded pool ({tokens:,} token slots, server_info "
                                     f"max_total_num_tokens) is not applied: this model's pools (sliding-window or "
                                     f"state) are sized together; the plan's {planned:,} slots are replayed"])
    if tokens == planned:
        note = f"{RECORDED_MATCH}the pool the server recorded (server_info max_total_num_tokens {tokens:,}) matches it"
    else:
        used = tokens // page * page
        tok = "tokens" if page > 1 else "token"
        note = (f"{RECORDED_USED}{used:,} token slots in {used // page:,} pages of {page} {tok}: the pool the server "
                f"recorded (server_info max_total_num_tokens {tokens:,}), replayed as it, not the {planned:,} SGLang's "
                f"memory plan gives ({planned / tokens - 1:+.1%} against the recorded)")
    return replace(pools, full_tokens=tokens // page * page, notes=[*pools.notes, note])


@dataclass(frozen=True)
class TrtWindowPool:
    """One TensorRT-LLM pool: its attention window (tokens), bytes per token over its layers, share, tokens, blocks."""

    window: int
    bytes_per_token: float
    share: float
    max_tokens: int
    blocks: int


def _layer_bytes(layer, tp: int, elem_bytes: float) -> float:
    if isinstance(layer, MLAAttention):
        return (layer.kv_lora_rank + layer.qk_rope_head_dim) * elem_bytes
    return 2 * ((layer.head_dim * layer.num_kv_heads) // tp) * elem_bytes


TRTLLM_RUNTIMES = ("pytorch", "tensorrt")
"""TensorRT-LLM's runtimes: the PyTorch backend (LLM API default from 1.0) and the TensorRT-engine C++ executor."""


def trtllm_window_pools(model: ModelSpec, tp: int, elem_bytes: float, max_seq_len: int, memory_bytes: float,
                        tokens_per_block: int, runtime: str = "pytorch",
                        round_up: bool | None = None) -> list[TrtWindowPool]:
    """TensorRT-LLM's per-window pools for ``memory_bytes`` of KV memory on one GPU, smallest window first.

    Full (and MLA, chunked) layers have window max_seq_len; sliding layers their window. Blocks per pool round
    up (C++ ``calculateMaxNumBlocks``) except for one window on the PyTorch backend, whose Python path floors on main
    (see the module docstring); ``round_up`` overrides that one-window choice (plan_other.trtllm_blocks_round_up: the
    0.x PyTorch backend rounds up). ``runtime``: "pytorch" or "tensorrt".
    """
    if runtime not in TRTLLM_RUNTIMES:
        raise ValueError(f"runtime {runtime!r}: expected one of {TRTLLM_RUNTIMES}")
    per_window: dict[int, float] = {}
    for layer in model.layers:
        if layer is None or layer.kind == "state":
            continue
        w = layer.window_tokens if isinstance(layer, SlidingWindowAttention) else max_seq_len
        per_window[w] = per_window.get(w, 0.0) + _layer_bytes(layer, tp, elem_bytes)
    if not per_window:
        return [TrtWindowPool(max_seq_len, 0.0, 1.0, 0, 0)]
    if len(per_window) == 1:
        (w, b), = per_window.items()
        t = max(0, math.floor(memory_bytes / b)) if b else 0
        up = runtime != "pytorch" if round_up is None else round_up
        return [TrtWindowPool(w, b, 1.0, t, -(-t // tokens_per_block) if up else t // tokens_per_block)]
    total = sum(b * w for w, b in per_window.items())
    pools = []
    for w in sorted(per_window):
        b = per_window[w]
        share = b * w / total
        t = max(0, math.floor(memory_bytes * share / b))
        pools.append(TrtWindowPool(w, b, share, t, math.ceil(t / tokens_per_block)))
    return pools
