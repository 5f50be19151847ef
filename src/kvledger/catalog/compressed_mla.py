"""DeepSeek-V4's compressed attention layer: what one layer keeps per request, as vLLM 0.33 stores it.

Each layer attends to a window of its last ``sliding_window`` tokens and, at compress ratio r > 1, to one
compressed entry per r tokens; at r = 4 a sparse indexer scores the compressed entries with keys of its own.
vLLM 0.33 (``models/deepseek_v4/attention.py``, ``models/deepseek_v4/compressor.py``,
``v1/attention/backends/mla/sparse_swa.py``) keeps, per layer:

- the window: a ``DeepseekV4SWACache`` (SlidingWindowMLASpec), one entry per token;
- at r > 1 the compressed entries: an MLAAttentionSpec with ``tokens_per_state`` r;
- at r > 1 the compressor's float32 state (kv state + score state, ``2 × coff × head_dim`` values per token slot,
  coff = 2 at r = 4 where windows overlap, else 1) over its last ``coff × r`` tokens (a SlidingWindowMLASpec);
- at r = 4 the indexer's keys (``DeepseekV4IndexerCache``: FP8 ``index_head_dim`` values + one float32 scale per
  128, per 4 tokens) and the indexer compressor's float32 state over 8 tokens.

Every entry of the window and of the compressed cache is in the ``fp8_ds_mla`` format on FlashMLA backends:
448 FP8 NoPE values + 64 BF16 RoPE values + 8 B of scales = 584 B (``state_content_bytes``), whatever
``--kv-cache-dtype`` says ("auto" becomes fp8_ds_mla; bf16 is refused by that backend).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvledger.catalog.layers import MLAAttention

__all__ = ["CompressedMLAAttention", "FP8_DS_MLA_ENTRY_BYTES", "has_compressed_mla"]

FP8_DS_MLA_ENTRY_BYTES = 584
"""One fp8_ds_mla entry: 448 B NoPE + 128 B RoPE (64 BF16) + 8 B scales (vLLM 0.33
``DeepseekV4Attention.get_kv_cache_spec``)."""


@dataclass(frozen=True, slots=True)
class CompressedMLAAttention(MLAAttention):
    """One DeepSeek-V4 layer (kind "mla": its compressed entries grow with the context).

    Attributes (besides MLAAttention's; ``kv_lora_rank`` is head_dim − qk_rope_head_dim, the NoPE part):
        compress_ratio: tokens per compressed entry (4 or 128); 1 for a window-only layer.
        swa_window_tokens: the raw-entry window (config ``sliding_window``), tokens.
        index_head_dim: the indexer's key width at r = 4 (config ``index_head_dim``), elements; 0 otherwise.
        index_n_heads / index_topk: the indexer's scoring heads and the compressed entries each query keeps (r = 4).
    """

    compress_ratio: int = 1
    swa_window_tokens: int = 0
    index_head_dim: int = 0
    index_n_heads: int = 0
    index_topk: int = 0

    @property
    def head_dim(self) -> int:
        return self.kv_lora_rank + self.qk_rope_head_dim

    @property
    def index_entry_bytes(self) -> int:
        """One indexer key: FP8 values + a float32 scale per 128 (vLLM 0.33 ``DeepseekV4Indexer``: 128 + 4 = 132 B)."""
        return self.index_head_dim + self.index_head_dim // 128 * 4 if self.compress_ratio == 4 else 0

    @property
    def compressor_coff(self) -> int:
        """2 where compression windows overlap (r = 4), else 1 (``DeepseekCompressor.coff``)."""
        return 2 if self.compress_ratio == 4 else 1

    def compressor_state_bytes_per_token(self) -> int:
        """Float32 kv + score state per token slot of the compressor's window, B (``state_dim = 2 × coff ×
        head_dim``)."""
        return 2 * self.compressor_coff * self.head_dim * 4 if self.compress_ratio > 1 else 0

    def index_compressor_state_bytes_per_token(self) -> int:
        """The indexer compressor's float32 state per token slot (r = 4: 2 × 2 × index_head_dim × 4 B), B."""
        return 2 * 2 * self.index_head_dim * 4 if self.compress_ratio == 4 else 0

    def kv_elements_per_token(self, tp: int = 1) -> int:
        """Elements one raw window entry holds: one latent of head_dim (K = V), not a K/V pair."""
        return self.head_dim

    def kv_bytes_per_token(self, elem_bytes: float, tp: int = 1) -> float:
        """Bytes the layer grows by per token beyond its window: a 584-B entry per r tokens plus, at r = 4, an indexer
        key per 4 tokens, B/token (whole on every TP rank, like MLA; ``elem_bytes`` is not used: fp8_ds_mla)."""
        if self.compress_ratio <= 1:
            return 0.0
        return FP8_DS_MLA_ENTRY_BYTES / self.compress_ratio + self.index_entry_bytes / 4

    def state_bytes_per_seq(self) -> float:
        """Fixed bytes per request once the windows are full: the raw window's entries and the compressors' states,
        B."""
        comp = self.compressor_state_bytes_per_token() * self.compressor_coff * self.compress_ratio
        idx = self.index_compressor_state_bytes_per_token() * 8
        return self.swa_window_tokens * FP8_DS_MLA_ENTRY_BYTES + comp + idx

    def tokens_held(self, context_tokens: int) -> int:
        return context_tokens

    def formula(self, elem_bytes: float, tp: int = 1) -> str:
        if self.compress_ratio <= 1:
            return f"{self.swa_window_tokens} window entries × {FP8_DS_MLA_ENTRY_BYTES} B (fp8_ds_mla), nothing beyond the window"
        idx = f" + {self.index_entry_bytes} B indexer key / 4" if self.index_entry_bytes else ""
        return (f"{FP8_DS_MLA_ENTRY_BYTES} B fp8_ds_mla entry / {self.compress_ratio}{idx} per token, plus "
                f"{self.swa_window_tokens} window entries and the compressor's float32 state")


def has_compressed_mla(layers) -> bool:
    """Whether any of ``layers`` (a ModelSpec's, None for cache-less layers) is a DeepSeek-V4 compressed layer."""
    return any(isinstance(layer, CompressedMLAAttention) for layer in layers)
