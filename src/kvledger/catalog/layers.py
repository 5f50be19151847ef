"""Per-layer KV-cache specs: what one layer keeps per token (or per sequence) and how that scales with TP.

One frozen dataclass per attention kind whose formula really differs, after vLLM's
family in ``vllm/v1/kv_cache_interface.py`` (FullAttentionSpec, SlidingWindowSpec,
ChunkedLocalAttentionSpec, MLAAttentionSpec, MambaSpec). Element sizes (``elem_bytes``)
are passed in by the caller: they come from the KV-cache dtype, not from the model.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "FullAttention",
    "SlidingWindowAttention",
    "ChunkedLocalAttention",
    "MLAAttention",
    "StateLayer",
    "LayerSpec",
    "kv_heads_per_gpu",
]


def kv_heads_per_gpu(num_kv_heads: int, tp: int) -> int:
    """KV heads each GPU holds under tensor parallelism: ``max(1, H_kv // tp)``.

    With fewer KV heads than GPUs each GPU still holds one whole head (heads are
    replicated). Source: vLLM ``config/model.py::ModelConfig.get_num_kv_heads``.
    """
    return max(1, num_kv_heads // tp)


@dataclass(frozen=True, slots=True)
class FullAttention:
    """Softmax attention over the whole context (MHA, GQA or MQA; the head counts tell which).

    Attributes:
        num_kv_heads: KV heads of the layer (all GPUs together).
        head_dim: K head size, elements.
        v_head_dim: V head size, elements (equal to head_dim except in a few models).
        num_attention_heads: query heads, kept to flag the classic heads-vs-KV-heads error.
        indexer_bytes_per_token: a sparse-attention indexer's compressed keys beside the K/V, B per token, whatever the
            KV dtype (Qwen4-Exp's QSA: ``index_head_dim`` BF16 values per ``compress_ratio`` tokens, vLLM 0.33
            ``models/qwen4_exp/common/qsa_cache.py : QSACompressedKeyCache``); 0 for plain attention.
    """

    num_kv_heads: int
    head_dim: int
    v_head_dim: int
    num_attention_heads: int
    kind: str = "full"
    indexer_bytes_per_token: float = 0.0

    def kv_elements_per_token(self, tp: int = 1) -> int:
        """K and V elements one token adds on one GPU: ``H_kv_per_gpu · (d_k + d_v)``."""
        return kv_heads_per_gpu(self.num_kv_heads, tp) * (self.head_dim + self.v_head_dim)

    def kv_bytes_per_token(self, elem_bytes: float, tp: int = 1) -> float:
        """Bytes one token adds on one GPU, B/token (vLLM ``FullAttentionSpec.page_size_bytes`` / block_size; plus the
        indexer's compressed keys, replicated on every rank)."""
        return self.kv_elements_per_token(tp) * elem_bytes + self.indexer_bytes_per_token

    def tokens_held(self, context_tokens: int) -> int:
        """Tokens whose KV the layer holds at a given context, tokens."""
        return context_tokens

    def formula(self, elem_bytes: float, tp: int = 1) -> str:
        h = kv_heads_per_gpu(self.num_kv_heads, tp)
        dims = f"2 × {self.head_dim}" if self.head_dim == self.v_head_dim else f"({self.head_dim} + {self.v_head_dim})"
        idx = f" + {self.indexer_bytes_per_token:g} B indexer keys" if self.indexer_bytes_per_token else ""
        return f"{h} KV heads × {dims} × {elem_bytes:g} B{idx}"


@dataclass(frozen=True, slots=True)
class SlidingWindowAttention(FullAttention):
    """Attention over the last ``window_tokens`` tokens only (Mistral, Gemma-2 local layers, gpt-oss banded layers)."""

    window_tokens: int = 0
    kind: str = "sliding_window"

    def tokens_held(self, context_tokens: int) -> int:
        return min(context_tokens, self.window_tokens)


@dataclass(frozen=True, slots=True)
class ChunkedLocalAttention(FullAttention):
    """Attention within fixed chunks of ``chunk_tokens`` tokens (Llama-4 ``attention_chunk_size``)."""

    chunk_tokens: int = 0
    kind: str = "chunked_local"

    def tokens_held(self, context_tokens: int) -> int:
        # Upper bound: a token sees at most the chunk it sits in.
        return min(context_tokens, self.chunk_tokens)


@dataclass(frozen=True, slots=True)
class MLAAttention:
    """Multi-head latent attention (DeepSeek-V2/V3, Kimi-K2): one compressed latent per token, no K/V pair.

    Per layer per token the cache holds ``kv_lora_rank + qk_rope_head_dim`` elements
    (576 for DeepSeek-V3), whatever the head count, and the latent is replicated on every
    TP rank (vLLM ``MLAAttentionSpec``; DeepSeek-V2 paper §2.1.2).
    """

    kv_lora_rank: int
    qk_rope_head_dim: int
    num_attention_heads: int
    kind: str = "mla"
    indexer_bytes_per_token: int = 0
    """DeepSeek-V3.2's sparse-attention indexer keys, B per token, whatever the KV dtype: ``index_head_dim`` FP8
    values + an fp32 scale per 128 (vLLM ``DeepseekV32IndexerCache``: 128 + 4 = 132 B); 0 for other MLA models."""
    window_tokens: int = 0
    """Sliding-window MLA (dots3's ``sliding_attention`` layers, kind "sliding_window"): the latent of the last
    ``window_tokens`` tokens only; 0 for MLA over the whole context."""
    index_topk: int = 0
    """DeepSeek sparse attention (``index_topk``): latent entries each query attends, tokens; 0 without an indexer."""
    index_n_heads: int = 0
    """The indexer's query heads (``index_n_heads``), whole on every TP rank (vLLM ``Indexer.wq_b`` is replicated)."""
    index_head_dim: int = 0
    """The indexer's key width (``index_head_dim``), elements."""
    packed_entry_bytes: int = 0
    """A packed per-token latent entry that replaces ``elements × dtype bytes``, B (vLLM's fp8_ds_mla: 656 B, set by
    the engine's backend choice, accounting/vllm_sparse_mla.py); 0 for the plain element layout."""
    qk_nope_head_dim: int = 0
    """The config's ``qk_nope_head_dim`` (the non-rotary query/key width), which vLLM's MLA backend choice on SM 10.x
    tests (accounting/vllm_mla_blackwell.py); 0 where not known."""

    def kv_elements_per_token(self, tp: int = 1) -> int:
        return self.kv_lora_rank + self.qk_rope_head_dim

    def kv_bytes_per_token(self, elem_bytes: float, tp: int = 1) -> float:
        latent = self.packed_entry_bytes or self.kv_elements_per_token(tp) * elem_bytes
        return latent + self.indexer_bytes_per_token

    def tokens_held(self, context_tokens: int) -> int:
        return min(context_tokens, self.window_tokens) if self.window_tokens else context_tokens

    def formula(self, elem_bytes: float, tp: int = 1) -> str:
        idx = f" + {self.indexer_bytes_per_token} B indexer keys" if self.indexer_bytes_per_token else ""
        if self.packed_entry_bytes:
            return f"{self.packed_entry_bytes} B fp8_ds_mla latent entry{idx}, whole on every TP rank"
        return (f"({self.kv_lora_rank} kv_lora_rank + {self.qk_rope_head_dim} qk_rope_head_dim) "
                f"× {elem_bytes:g} B{idx}, no K/V factor 2, whole on every TP rank")


@dataclass(frozen=True, slots=True)
class StateLayer:
    """A linear-attention or state-space layer (Mamba-1/2, Gated DeltaNet): a fixed state per sequence.

    Attributes:
        mixer: "mamba", "mamba2" or "gated_deltanet".
        conv_elements: convolution state elements per sequence (all GPUs), elements.
        ssm_elements: recurrent/SSM state elements per sequence (all GPUs), elements.
        tp_shardable: True when the state splits across TP ranks by heads/channels.
    """

    mixer: str
    conv_elements: int
    ssm_elements: int
    tp_shardable: bool = True
    kind: str = "state"

    def kv_elements_per_token(self, tp: int = 1) -> int:
        return 0

    def kv_bytes_per_token(self, elem_bytes: float, tp: int = 1) -> float:
        return 0.0

    def tokens_held(self, context_tokens: int) -> int:
        return 0

    def state_bytes(self, conv_elem_bytes: float, ssm_elem_bytes: float, tp: int = 1) -> float:
        """Bytes of state per sequence on one GPU, B/sequence (independent of context length)."""
        div = tp if self.tp_shardable else 1
        return (self.conv_elements * conv_elem_bytes + self.ssm_elements * ssm_elem_bytes) / div

    def formula(self, elem_bytes: float, tp: int = 1) -> str:
        return f"{self.mixer}: {self.conv_elements:,} conv + {self.ssm_elements:,} SSM state elements per sequence"


LayerSpec = FullAttention | SlidingWindowAttention | ChunkedLocalAttention | MLAAttention | StateLayer
