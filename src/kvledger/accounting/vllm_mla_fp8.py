"""Which dense MLA backend vLLM picks on Hopper for an FP8 KV cache, and so the block size it prefers.

Read in the vLLM 0.18.0, 0.19.0, 0.26.0, 0.27.0 and 0.33.0 wheels:

* ``platforms/cuda.py::_get_backend_priorities`` (use_mla, a major other than 10 and 12) tries FLASH_ATTN_MLA,
  FLASHMLA, FLASHINFER_MLA, TRITON_MLA in that order; ``get_valid_backends`` keeps the first whose
  ``validate_configuration`` finds no reason against it.
* ``v1/attention/backend.py::supports_kv_cache_dtype`` rejects a KV dtype outside the backend's
  ``supported_kv_cache_dtypes``: FLASH_ATTN_MLA (``v1/attention/backends/mla/flashattn_mla.py``) lists auto, float16
  and bfloat16 only ("FlashAttnMLA V1 with FP8 KV cache not yet supported" in its impl); FLASHMLA (``flashmla.py``)
  and TRITON_MLA (``triton_mla.py``) add fp8 and fp8_e4m3, not fp8_e5m2; FLASHINFER_MLA needs compute capability 10.
* The selector passes ``block_size=None`` when ``--block-size`` is not given (``v1/attention/selector.py``), so the
  block does not rule FLASHMLA out; ``update_block_size_for_backend`` then takes the backend's
  ``get_preferred_block_size(16)``: FLASHMLA's kernels take exactly 64 (``get_supported_kernel_block_sizes``), so 64.

Up to 0.17 the Hopper MLA block is 64 whatever the KV dtype (``vllm_rules.default_block_size``); on Blackwell
(major 10) FLASHINFER_MLA heads the list and takes fp8 too, so its 32 stands.
"""

from __future__ import annotations

from kvledger.errors import EngineRefusalError

__all__ = ["FLASHMLA_FP8_DTYPES", "hopper_mla_fp8_block"]

FLASHMLA_FP8_DTYPES: frozenset[str] = frozenset({"fp8", "fp8_e4m3"})
"""FP8 spellings FLASHMLA's (and TRITON_MLA's) ``supported_kv_cache_dtypes`` list (0.18.0–0.33.0)."""
FLASHMLA_BLOCK_TOKENS = 64
"""FLASHMLA's only kernel block size (``FlashMLABackend.get_supported_kernel_block_sizes``), tokens."""
_FIRST_READ = (0, 18, 0)


def hopper_mla_fp8_block(ver: tuple[int, int, int], arch: str, kv_cache_dtype: str) -> tuple[int, str] | None:
    """(block size, why) for a dense MLA model with an FP8 KV cache on Hopper from vLLM 0.18; None elsewhere.

    Raises:
        EngineRefusalError: an FP8 format no Hopper MLA backend stores (fp8_e5m2; a valid --kv-cache-dtype, so exit 3).
    """
    if arch != "sm90" or ver < _FIRST_READ or not kv_cache_dtype.startswith("fp8"):
        return None
    v = ".".join(map(str, ver))
    if kv_cache_dtype not in FLASHMLA_FP8_DTYPES:
        raise EngineRefusalError(f"--kv-cache-dtype {kv_cache_dtype}: vLLM {v} has no MLA attention backend on "
                                 "Hopper for it (FLASH_ATTN_MLA takes no FP8 KV cache; FLASHMLA and TRITON_MLA take "
                                 "fp8 and fp8_e4m3 only; FLASHINFER_MLA needs compute capability 10); use "
                                 "--kv-cache-dtype fp8")
    return FLASHMLA_BLOCK_TOKENS, (
        f"vLLM {v} on Hopper, FP8 KV: FLASH_ATTN_MLA is skipped (its supported_kv_cache_dtypes lack {kv_cache_dtype}), "
        f"so the selector takes the next in the sm90 MLA priority list, FLASHMLA, whose kernels take "
        f"{FLASHMLA_BLOCK_TOKENS}-token blocks only (platforms/cuda.py _get_backend_priorities, "
        "v1/attention/backends/mla/flashattn_mla.py and flashmla.py, update_block_size_for_backend)")
