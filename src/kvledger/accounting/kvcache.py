"""KV bytes per token, per layer group and in total, for a KV dtype and a TP degree; per request at a context.

The formula for softmax attention is ``2 (K,V) × layers × KV heads × head_dim × bytes``
("How to Scale Your Model", ch. "All About Transformer Inference"; vLLM
``FullAttentionSpec.page_size_bytes`` / block_size). KV heads per GPU are
``max(1, H_kv // tp)`` (vLLM ``ModelConfig.get_num_kv_heads``); MLA keeps its latent whole
on every rank; linear/Mamba layers keep a fixed state per sequence instead.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvledger.accounting.kv_dtype_choices import KV_DTYPE_BYTES, KV_DTYPE_NAMES, check_kv_dtype_case
from kvledger.catalog.compressed_mla import CompressedMLAAttention, has_compressed_mla
from kvledger.catalog.layers import FullAttention, LayerSpec, MLAAttention, StateLayer, kv_heads_per_gpu
from kvledger.catalog.modelspec import ModelSpec
from kvledger.errors import InputError
from kvledger.jsonable import to_jsonable
from kvledger.units import KiB

__all__ = ["kv_elem_bytes", "check_tp", "KVGroup", "KVLedger", "kv_ledger"]


def kv_elem_bytes(kv_cache_dtype: str, model: ModelSpec) -> int:
    """Bytes per KV element: "auto" means the model dtype (vLLM ``CacheConfig.cache_dtype``); the names and their bytes
    are ``kv_dtype_choices``' (with each engine's choices, the one source of which names are taken).

    Raises:
        InputError: an unknown dtype name.
    """
    d = check_kv_dtype_case(kv_cache_dtype)
    if d == "auto":
        return model.dtype_bytes
    if d not in KV_DTYPE_BYTES:
        raise InputError(f"--kv-cache-dtype {kv_cache_dtype!r} is not supported; use {KV_DTYPE_NAMES}")
    return KV_DTYPE_BYTES[d]


def check_tp(model: ModelSpec, tp: int) -> None:
    """Reject TP degrees the engines reject: heads must split evenly (vLLM ``ModelConfig.verify_with_parallel_config``).

    Raises:
        InputError: tp < 1, attention heads not divisible by tp, or KV heads neither divisible by nor dividing tp.
    """
    if tp < 1:
        raise InputError(f"--tp must be ≥ 1, got {tp}")
    if model.num_attention_heads % tp:
        raise InputError(f"--tp {tp}: {model.name} has {model.num_attention_heads} attention heads, not divisible by "
                         f"{tp}")
    nkv = model.num_kv_heads
    if nkv and not any(isinstance(layer, MLAAttention) for layer in model.layers):
        if (nkv >= tp and nkv % tp) or (nkv < tp and tp % nkv):
            raise InputError(f"--tp {tp}: {nkv} KV heads can be neither split evenly nor replicated evenly over {tp} "
                             f"GPUs")


@dataclass(frozen=True)
class KVGroup:
    """Layers sharing one KV spec.

    Attributes:
        spec: the layers' spec. num_layers: how many layers, count.
        bytes_per_token_per_layer: per GPU, B/token (0 for state layers).
        bytes_per_token: all layers of the group, per GPU, B/token.
        state_bytes_per_seq: all layers of the group, per GPU, B/sequence (state layers only).
        formula: the arithmetic with the numbers filled in.
    """

    __json__ = ("kind", "num_layers", "bytes_per_token_per_layer", "bytes_per_token", "state_bytes_per_seq",
                "window_tokens", "formula")
    spec: LayerSpec
    num_layers: int
    bytes_per_token_per_layer: float
    bytes_per_token: float
    state_bytes_per_seq: float
    formula: str

    @property
    def kind(self) -> str:
        return self.spec.kind

    @property
    def window_tokens(self) -> int | None:
        """The sliding window (or local-attention chunk) of the spec, tokens; None for full-context layers."""
        return getattr(self.spec, "window_tokens", None) or getattr(self.spec, "chunk_tokens", None)

    def bytes_at(self, context_tokens: int) -> float:
        """Per-GPU bytes this group holds for one request at ``context_tokens`` (sliding windows capped), B."""
        return self.bytes_per_token * self.spec.tokens_held(context_tokens) + self.state_bytes_per_seq


@dataclass(frozen=True)
class KVLedger:
    """The KV-bytes ledger for one model, KV dtype and TP degree (all figures per GPU unless named _model).

    Attributes:
        groups: one per distinct layer spec.
        kv_cache_dtype / elem_bytes: the KV dtype and its element size, B.
        tp: tensor-parallel degree.
        bytes_per_token: every KV layer, each token in its window, per GPU, B/token (an int, as the two below, for
            every whole figure: GQA and MLA alike).
        bytes_per_token_model: the same for the whole model at TP=1, B/token (the headline figure).
        growing_bytes_per_token: layers whose KV grows without bound (full and MLA), per GPU, B/token.
        state_bytes_per_seq: fixed recurrent state per sequence, per GPU, B.
        notes: warnings (attention heads ≠ KV heads, MLA, replication under TP).
    """

    __json__ = ("kv_cache_dtype", "elem_bytes", "tp", ("bytes_per_token_per_gpu", "bytes_per_token"),
                "bytes_per_token_model", ("growing_bytes_per_token_per_gpu", "growing_bytes_per_token"),
                ("state_bytes_per_seq_per_gpu", "state_bytes_per_seq"), "notes", "groups")
    groups: tuple[KVGroup, ...]
    kv_cache_dtype: str
    elem_bytes: float
    tp: int
    bytes_per_token: int | float
    bytes_per_token_model: int | float
    growing_bytes_per_token: int | float
    state_bytes_per_seq: float
    notes: tuple[str, ...] = field(default_factory=tuple)

    def bytes_per_request(self, context_tokens: int) -> float:
        """Per-GPU KV (+ state) bytes of one request at ``context_tokens``, B."""
        return sum(g.bytes_at(context_tokens) for g in self.groups)

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


def _group(spec: LayerSpec, n: int, s: float, tp: int, state_s: tuple[float, float]) -> KVGroup:
    if isinstance(spec, StateLayer):
        sb = spec.state_bytes(state_s[0], state_s[1], tp)
        f = (
            f"{n} layers × ({spec.conv_elements:,} conv × {state_s[0]:g} B + {spec.ssm_elements:,} SSM × "
            f"{state_s[1]:g} B)"
            + (f" / TP {tp}" if tp > 1 else "")
            + f" = {n * sb:,.0f} B per sequence"
        )
        return KVGroup(spec, n, 0.0, 0.0, n * sb, f)
    per_layer = spec.kv_bytes_per_token(s, tp)
    total = n * per_layer
    if isinstance(spec, CompressedMLAAttention):
        fixed = n * spec.state_bytes_per_seq()
        f = (f"{n} layers × ({spec.formula(s, tp)}) = {total:,.2f} B/token beyond the window + {fixed:,.0f} B per "
             "sequence (window entries and compressor state)")
        return KVGroup(spec, n, per_layer, total, fixed, f)
    if isinstance(spec, MLAAttention):
        idx = f" + {spec.indexer_bytes_per_token} B indexer keys" if spec.indexer_bytes_per_token else ""
        latent = (f"{spec.packed_entry_bytes} B fp8_ds_mla entry" if spec.packed_entry_bytes else
                  f"({spec.kv_lora_rank} + {spec.qk_rope_head_dim}) × {s:g} B")
        f = f"{n} layers × ({latent}{idx}) = {total:,.0f} B/token"
        if spec.window_tokens:
            f += f", at most {spec.window_tokens:,} tokens held (sliding window)"
    else:
        h = kv_heads_per_gpu(spec.num_kv_heads, tp)
        idx = f" + {spec.indexer_bytes_per_token:g} B indexer keys" if spec.indexer_bytes_per_token else ""
        if spec.head_dim == spec.v_head_dim and not idx:
            f = f"2 (K,V) × {n} layers × {h} KV heads × {spec.head_dim} head_dim × {s:g} B = {total:,.0f} B/token"
        else:
            f = (f"{n} layers × ({h} KV heads × ({spec.head_dim} + {spec.v_head_dim}) × {s:g} B{idx}) "
                 f"= {total:,.0f} B/token")
        if getattr(spec, "window_tokens", 0):
            f += f", at most {spec.window_tokens:,} tokens held (sliding window)"
        if getattr(spec, "chunk_tokens", 0):
            f += f", at most {spec.chunk_tokens:,} tokens held (chunked local attention)"
    return KVGroup(spec, n, per_layer, total, 0.0, f)


def _whole(n_bytes: float) -> int | float:
    """A byte figure as an int when it is whole (every dtype's per-token bytes but a sub-byte format's scales)."""
    return int(n_bytes) if float(n_bytes).is_integer() else n_bytes


def kv_ledger(model: ModelSpec, kv_cache_dtype: str = "auto", tp: int = 1, *,
              mamba_ssm_cache_dtype: str = "auto") -> KVLedger:
    """Build the KV-bytes ledger.

    Args:
        model: the parsed model.
        kv_cache_dtype: "auto" (model dtype), bf16, fp16 or an fp8 variant.
        tp: tensor-parallel degree.
        mamba_ssm_cache_dtype: "auto" (model dtype), "float32", "float16" or "bfloat16" for the recurrent state (vLLM
            flag of that name).

    Raises:
        InputError: unknown dtype or an impossible TP degree.
    """
    check_tp(model, tp)
    s = kv_elem_bytes(kv_cache_dtype, model)
    if s != 1 and kv_cache_dtype.lower() != "auto" and has_compressed_mla(model.layers):
        raise InputError(f"--kv-cache-dtype {kv_cache_dtype}: vLLM 0.33 keeps DeepSeek-V4's cache in the fp8_ds_mla "
                         f"format "
                         "on FlashMLA (fp8 only: 'auto' and fp8 become fp8_ds_mla); use auto or fp8")
    ssm_s = {"float32": 4, "fp32": 4, "float16": 2, "bfloat16": 2}.get(mamba_ssm_cache_dtype.lower(), model.dtype_bytes)
    buckets: dict[LayerSpec, int] = {}
    for layer in model.layers:
        if layer is not None:
            buckets[layer] = buckets.get(layer, 0) + 1
    groups = tuple(_group(sp, n, s, tp, (model.dtype_bytes, ssm_s)) for sp, n in buckets.items())
    per_gpu = _whole(sum(g.bytes_per_token for g in groups))
    model_tp1 = _whole(sum(n * sp.kv_bytes_per_token(s, 1) for sp, n in buckets.items()))
    growing = _whole(sum(g.bytes_per_token for g in groups if g.kind in ("full", "mla")))
    return KVLedger(groups, kv_cache_dtype, s, tp, per_gpu, model_tp1, growing,
                    sum(g.state_bytes_per_seq for g in groups),
                    tuple(_notes(model, buckets, s, tp, model_tp1)))


def _notes(model: ModelSpec, buckets: dict, s: float, tp: int, model_tp1: float) -> list[str]:
    notes = []
    attn = [sp for sp in buckets if isinstance(sp, FullAttention)]
    if attn:
        sp = attn[0]
        if sp.num_attention_heads != sp.num_kv_heads:
            ratio = sp.num_attention_heads // sp.num_kv_heads
            wrong = model_tp1 * ratio
            kind = "MQA" if sp.num_kv_heads == 1 else "GQA"
            notes.append(f"{kind}: {sp.num_kv_heads} KV heads ≠ {sp.num_attention_heads} attention heads (group of "
                         f"{ratio}); "
                         f"sizing with attention heads would give {wrong:,.0f} B/token ({wrong / KiB:,.0f} KiB), "
                         f"{ratio}× too high")
        if sp.num_kv_heads < tp:
            notes.append(f"TP {tp} > {sp.num_kv_heads} KV heads: each GPU holds 1 whole KV head (replicated), so "
                         f"per-GPU KV stops shrinking beyond TP {sp.num_kv_heads}")
    if any(isinstance(sp, MLAAttention) for sp in buckets):
        notes.append("MLA: the latent cache is replicated on every TP rank; per-GPU KV bytes do not shrink with TP")
    if any(isinstance(sp, CompressedMLAAttention) for sp in buckets):
        notes.append("DeepSeek-V4: every cached entry is a 584-B fp8_ds_mla entry (448 FP8 NoPE + 64 BF16 RoPE values "
                     "+ "
                     "8 B of scales): --kv-cache-dtype auto and every fp8 variant become fp8_ds_mla in vLLM 0.33; the "
                     "compressor states are float32")
    return notes
