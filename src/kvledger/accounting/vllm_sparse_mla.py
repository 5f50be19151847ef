"""Which sparse MLA backend vLLM 0.28 and 0.33 pick for DeepSeek-V3.2-class models (``index_topk``), its cache format
and block size.

Read from the 0.33.0 wheel:

- ``platforms/cuda.py::_get_backend_priorities`` (use_mla): Hopper and other non-10/12 majors try FLASH_ATTN_MLA_SPARSE,
  FLASHMLA_SPARSE, then FLASHINFER_MLA_SPARSE_SM90 (first when head_size is 512; MLA's 576 puts it last); Blackwell
  (major 10) tries FLASHINFER_MLA_SPARSE then FLASHMLA_SPARSE for a quantized KV dtype, else
  FLASH_ATTN_MLA_SPARSE_FA4 first at ≤ 16 heads per rank, then FLASHMLA_SPARSE; major 12 has
  FLASHINFER_MLA_SPARSE_SM120 only. The dense MLA backends ahead of them reject ``use_sparse``.
- each backend's ``supported_kv_cache_dtypes`` (``v1/attention/backends/mla/flashattn_mla_sparse.py``: auto/fp16/bf16;
  ``flashmla_sparse.py``: auto, bfloat16, fp8_ds_mla, fp8 "alias for fp8_ds_mla"; ``flashinfer_mla_sparse_sm90.py`` and
  ``flashinfer_mla_sparse.py``: auto, bf16, fp8, fp8_e4m3; SM120: auto, fp8, fp8_e4m3, fp8_ds_mla).
- ``model_executor/layers/attention/mla_attention.py::_canonicalize_sparse_mla_kv_cache_dtype``: FLASHMLA_SPARSE turns
  any quantized dtype into fp8_ds_mla, FLASHINFER_MLA_SPARSE_SM120 turns auto/fp8/fp8_e4m3 into it; other backends keep
  the plain layout. ``MLAAttention.get_kv_cache_spec``: fp8_ds_mla is 656 B per token (``state_content_bytes``;
  flashmla_sparse.py: 512 FP8 NoPE + 16 B of fp32 scales + 64 BF16 RoPE values = 512 + 16 + 128).
- block size (``platforms/interface.py::_preferred_block_size_for_backends``): the smallest size every backend takes —
  the sparse backends ``MultipleOf(64)`` (FLASHINFER_MLA_SPARSE ``MultipleOf(32)``) and the indexer cache
  (``v1/attention/backends/mla/indexer.py::DeepseekV32IndexerBackend``) exactly [64] on CUDA: 64 tokens.

Read again in the 0.28.0 wheel: the same canonicalisation (``mla_attention.py``), the same 656 B entry, the same
indexer cache (``models/deepseek_v2.py``: 128 FP8 values + a 4 B scale per 128, uint8, 64-token blocks) and the same
major-12 list (TRITON_MLA, which rejects sparse, then FLASHINFER_MLA_SPARSE_SM120). Two differences: Hopper has no
FLASHINFER_MLA_SPARSE_SM90 (the non-10/12 list ends FLASH_ATTN_MLA_SPARSE, FLASHMLA_SPARSE), so fp8_e4m3 finds no
backend there; Blackwell has no FA4 sparse backend (a plain cache goes to FLASHINFER_MLA_SPARSE at ≤ 16 heads per
rank, else FLASHMLA_SPARSE). The cache each picks is the 0.33 one. Checked against a public record: LLMServingSim's
vLLM 0.28.0 run of DeepSeek-V3.2-Exp-16L64E on one RTX PRO 6000 (kv_cache_dtype auto) holds 49,181 blocks of 64
tokens — 36.96 GiB at the packed 12,608 B a token, where the plain 20,544 B would need 60.2 GiB beside 42.76 GiB of
weights on a 94.97 GiB card.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from kvledger.catalog.layers import MLAAttention
from kvledger.catalog.modelspec import ModelSpec
from kvledger.errors import EngineRefusalError

__all__ = ["FP8_DS_MLA_V32_BYTES", "SPARSE_MLA_BLOCK_SIZE", "SparseMLAChoice", "sparse_mla_choice",
           "sparse_mla_cache_model", "sparse_mla_layer", "wheel_read"]

FP8_DS_MLA_V32_BYTES = 656
"""fp8_ds_mla entry of a 512 + 64 latent, B per token (vLLM 0.33 mla_attention.py ``state_content_bytes``)."""
SPARSE_MLA_BLOCK_SIZE = 64
"""Tokens per block: the indexer cache takes exactly 64 on CUDA (vLLM 0.33 indexer.py)."""
_PLAIN = ("auto", "bf16", "bfloat16", "fp16", "float16", "half")
FIRST_READ = (0, 28, 0)
"""The oldest vLLM whose sparse MLA choice was read (module docstring); older versions keep the plain layout."""


@dataclass(frozen=True)
class SparseMLAChoice:
    """The sparse MLA backend vLLM picks, and what it caches.

    Attributes:
        backend: the backend's name. cache_format: "fp8_ds_mla" or the plain dtype kept.
        packed_entry_bytes: the fp8_ds_mla entry, B per token per layer; 0 for the plain element layout.
        source: where it was read.
    """

    backend: str
    cache_format: str
    packed_entry_bytes: int
    source: str

    def note(self) -> str:
        size = f"{self.packed_entry_bytes} B per token per layer" if self.packed_entry_bytes else "elements × dtype"
        return (f"DeepSeek sparse attention: vLLM picks {self.backend} ({self.cache_format} latent, {size}) and "
                f"{SPARSE_MLA_BLOCK_SIZE}-token blocks ({self.source})")


def sparse_mla_layer(layer) -> bool:
    """Whether ``layer`` is DeepSeek's sparse MLA (an indexer's top-k, no window): the layers vLLM's sparse backend
    serves."""
    return isinstance(layer, MLAAttention) and layer.index_topk > 0 and not layer.window_tokens


def sparse_mla_choice(model: ModelSpec, ver, arch: str, kv_cache_dtype: str, tp: int) -> SparseMLAChoice | None:
    """The backend vLLM (0.28 and 0.33 read) picks for a model with DeepSeek sparse attention on this GPU family; None
    for other models, versions before 0.28 (not read) or GPUs whose sparse backend was not read (kept as before).

    Raises:
        EngineRefusalError: a KV dtype none of the family's sparse backends accepts (vLLM finds no backend: exit 3).
    """
    if ver < FIRST_READ or arch not in ("sm90", "sm100", "sm120") or not any(map(sparse_mla_layer, model.layers)):
        return None
    d = kv_cache_dtype.lower()
    plain = d in _PLAIN
    read = wheel_read(ver)
    between = (0, 29, 0) <= ver < (0, 33, 0)  # 0.29–0.32 not read: 0.28's rule, said so
    src = (f"vLLM {read} platforms/cuda.py _get_backend_priorities" + (" (this version's not read)" if between else "")
           + ", v1/attention/backends/mla/")
    if arch == "sm90":
        if plain or d == "fp8":
            return _hopper(d, plain, src)
        if d == "fp8_e4m3" and read == "0.33":  # 0.28 has no FLASHINFER_MLA_SPARSE_SM90: no backend takes it
            return SparseMLAChoice("FLASHINFER_MLA_SPARSE_SM90", d, 0, src + "flashinfer_mla_sparse_sm90.py")
        if d == "fp8_e4m3" and between:  # when the SM90 backend came is not read: the rule before stays
            return None
        ok = "auto, bf16, fp16, fp8 or fp8_e4m3" if read == "0.33" else "auto, bf16, fp16 or fp8"
    elif arch == "sm100":
        if plain:
            heads = model.num_attention_heads // tp
            small = "FLASH_ATTN_MLA_SPARSE_FA4" if read == "0.33" else "FLASHINFER_MLA_SPARSE"
            name = small if heads <= 16 else "FLASHMLA_SPARSE"
            files = "flashattn_mla_sparse.py" if read == "0.33" else "flashinfer_mla_sparse.py"
            return SparseMLAChoice(name, d, 0, src + f"{files}, flashmla_sparse.py ({heads} heads per rank; {small} "
                                   "first at ≤ 16)")
        if d in ("fp8", "fp8_e4m3"):
            return SparseMLAChoice("FLASHINFER_MLA_SPARSE", d, 0, src + "flashinfer_mla_sparse.py (plain fp8, not "
                                   "fp8_ds_mla)")
        ok = "auto, bf16, fp16, fp8 or fp8_e4m3"
    else:
        if d in ("auto", "fp8", "fp8_e4m3"):
            return SparseMLAChoice("FLASHINFER_MLA_SPARSE_SM120", "fp8_ds_mla", FP8_DS_MLA_V32_BYTES,
                                   src + "flashinfer_mla_sparse.py (SM120: auto and fp8 become fp8_ds_mla)")
        ok = "auto, fp8 or fp8_e4m3"
    raise EngineRefusalError(f"--kv-cache-dtype {kv_cache_dtype}: no sparse MLA backend of vLLM {read} on {arch} "
                             "accepts it for DeepSeek sparse attention (platforms/cuda.py, backends' "
                             f"supported_kv_cache_dtypes); use {ok}")


def wheel_read(ver) -> str:
    """The vLLM wheel whose sparse-MLA rules apply to ``ver`` (≥ ``FIRST_READ``): "0.33" from 0.33, else "0.28"."""
    return "0.33" if ver >= (0, 33, 0) else "0.28"


def _hopper(d: str, plain: bool, src: str) -> SparseMLAChoice:
    """Hopper's pick for a plain cache or fp8 (0.28 and 0.33 alike)."""
    if plain:
        return SparseMLAChoice("FLASH_ATTN_MLA_SPARSE", d, 0, src + "flashattn_mla_sparse.py")
    return SparseMLAChoice("FLASHMLA_SPARSE", "fp8_ds_mla", FP8_DS_MLA_V32_BYTES,
                           src + "flashmla_sparse.py (fp8 is an alias for fp8_ds_mla), mla_attention.py")


def sparse_mla_cache_model(model: ModelSpec, choice: SparseMLAChoice | None) -> ModelSpec:
    """The model with its sparse MLA layers in the chosen backend's packed entry (fp8_ds_mla), else unchanged."""
    if choice is None or not choice.packed_entry_bytes:
        return model
    layers = tuple(replace(x, packed_entry_bytes=choice.packed_entry_bytes) if sparse_mla_layer(x) else x
                   for x in model.layers)
    return replace(model, layers=layers)
