"""How vLLM picks the block size (DeepSeek-V4's fixed one included) and the Mamba cache rule for a model."""

from __future__ import annotations

from kvledger.accounting import notes as N
from kvledger.accounting import vllm_rules as R
from kvledger.accounting.kvlayout import KVLayout
from kvledger.accounting.kvlayout_packed import DSV4_BLOCK_SIZE
from kvledger.accounting.settings import PlanSettings
from kvledger.accounting.vllm_mla_blackwell import blackwell_mla_block
from kvledger.accounting.vllm_mla_fp8 import hopper_mla_fp8_block
from kvledger.accounting.vllm_mla_given import given_mla_block, given_sparse_mla_block
from kvledger.accounting.vllm_sparse_mla import SPARSE_MLA_BLOCK_SIZE, sparse_mla_choice, sparse_mla_layer, wheel_read
from kvledger.catalog.layers import MLAAttention, StateLayer
from kvledger.catalog.modelspec import ModelSpec
from kvledger.errors import InputError

__all__ = ["vllm_block_size", "dsv4_block_size", "dsv4_reservation_note", "mamba_rule"]


def vllm_block_size(model: ModelSpec, s: PlanSettings, ver, arch: str, dsv4: bool,
                    capability: int | None = None) -> tuple[int, str]:
    """(block size, where it came from): the user's (for MLA, dense or sparse, on vLLM ≤0.17.1 the one the MLA
    backend forces where it does not take the user's: ``vllm_mla_given``), DeepSeek-V4's only one, or vLLM's default
    for the backend
    (``capability``: the GPU's exact compute capability, for the rules that test one: ``vllm_mla_blackwell``)."""
    if dsv4:
        block = dsv4_block_size(ver, s.block_size)
        if s.disable_hybrid_kv_cache_manager:
            raise InputError(N.DSV4_NO_UNIFIED)
        return block
    mla = any(isinstance(layer, MLAAttention) for layer in model.layers)
    dense = mla and not any(map(sparse_mla_layer, model.layers))  # sparse MLA unread for this version: rule as was
    nope = next((layer.qk_nope_head_dim for layer in model.layers if isinstance(layer, MLAAttention)), 0)
    if s.block_size:  # vLLM ≤0.17.1 replaces a size the MLA backend's kernels do not take (vllm_mla_given)
        if dense:
            return given_mla_block(ver, arch, capability, nope, s.block_size)
        return given_sparse_mla_block(ver, s.block_size) if mla else (s.block_size, "given")
    sparse = sparse_mla_choice(model, ver, arch, s.kv_cache_dtype, s.tp)
    if sparse is not None:
        return SPARSE_MLA_BLOCK_SIZE, (f"vLLM {wheel_read(ver)} sparse MLA: {sparse.backend} takes multiples of 64 "
                                       "and the indexer cache exactly 64 (platforms/interface.py "
                                       "_preferred_block_size_for_backends, v1/attention/backends/mla/indexer.py)")
    fp8 = hopper_mla_fp8_block(ver, arch, s.kv_cache_dtype) if dense else None
    blackwell = blackwell_mla_block(ver, capability, nope) if dense else None
    return fp8 or blackwell or R.default_block_size(ver, mla, arch)


def dsv4_block_size(ver, given: int | None) -> tuple[int, str]:
    """DeepSeek-V4's block size: served from vLLM 0.20, its sparse MLA backend takes blocks of 256 tokens only.

    Raises:
        InputError: a version before 0.20 or another ``--block-size``.
    """
    if ver < (0, 20, 0):
        raise InputError(f"vLLM {'.'.join(map(str, ver))} cannot serve DeepSeek-V4: DeepseekV4ForCausalLM is in vLLM's "
                         "model registry from 0.20 (0.19's has none); pass --engine-version 0.20 or later")
    if given and given != DSV4_BLOCK_SIZE:
        raise InputError(f"--block-size {given}: DeepSeek-V4's sparse MLA backend supports blocks of {DSV4_BLOCK_SIZE} "
                         "tokens only (vLLM 0.33 models/deepseek_v4/sparse_mla.py)")
    src = (f"DeepSeek-V4's sparse MLA backend supports only {DSV4_BLOCK_SIZE}-token blocks (vLLM 0.33 "
           "models/deepseek_v4/sparse_mla.py)")
    if ver < (0, 33, 0):
        src += f"; DeepSeek-V4's cache layout was read in 0.33 and is applied to {'.'.join(map(str, ver))}"
    return DSV4_BLOCK_SIZE, src


def dsv4_reservation_note(layout: KVLayout, L: int, F: int) -> str:
    """Why the engine's per-request reservation of a DeepSeek-V4 model is far above the bytes a request holds."""
    parts = ", ".join(f"{g.blocks_per_request(L, F):,} for "
                      f"{'compressed entries' if g.kind == 'mla' else f'a window of {g.window_tokens} tokens'} "
                      f"in {g.block_size}-token blocks" for g in layout.groups)
    return (f"DeepSeek-V4 reservation per request at {L:,} tokens ({F:,} in flight): {parts} — every block id a whole "
            f"{layout.bytes_per_block:,}-B slab, so the small-block windows (compressor states) set the engine's "
            "maximum concurrency, far below what the bytes a request holds (the KV ledger) would allow "
            "(kv_cache_utils.get_max_concurrency_for_kv_cache_config)")


def mamba_rule(model: ModelSpec, s: PlanSettings, ver, arch: str) -> R.MambaCacheRule | None:
    """The Mamba cache rule for a model with state layers (whole model, as vLLM decides it once), else None."""
    state = [layer for layer in model.layers if isinstance(layer, StateLayer)]
    if not state:
        return None
    has_attention = any(layer is not None and not isinstance(layer, StateLayer) for layer in model.layers)
    return R.mamba_cache_rule(ver, s.enable_prefix_caching, has_attention, {item.mixer for item in state}, arch,
                              architectures=model.architectures, mamba_chunk_tokens=model.mamba_chunk_tokens)
