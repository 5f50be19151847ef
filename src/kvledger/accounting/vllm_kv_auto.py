"""vLLM's ``--kv-cache-dtype auto`` on a checkpoint that declares its KV-cache quantization, release by release.

From 0.14.0 ``EngineArgs.create_engine_config`` passes the flag through ``utils/torch_utils.py ::
resolve_kv_cache_dtype_string``: "auto" becomes what ``get_kv_cache_quant_algo_string`` reads from a ModelOpt
checkpoint (catalog/quant_kv.py): ``kv_cache_quant_algo: FP8`` → fp8_e4m3 (read in 0.14.0, 0.15.0, 0.17.0, 0.19.0,
0.26.0, 0.33.0); an NVFP4 KV scheme → nvfp4 in 0.26.0 and 0.33.0 (0.19.0's map holds fp8 only: it warns and keeps
auto). Up to 0.13.0 (read in 0.11.0, 0.12.0, 0.13.0) the function does not exist: "auto" is the model dtype and the
checkpoint's KV scales are loaded for an explicit ``--kv-cache-dtype fp8`` only. A compressed-tensors
``kv_cache_scheme`` is never read by it: "auto" stays the model dtype in every release read.
"""

from __future__ import annotations

from kvledger.catalog.modelspec import ModelSpec
from kvledger.errors import InputError

__all__ = ["KV_AUTO_FROM_CHECKPOINT", "KV_AUTO_NVFP4_FROM", "KV_AUTO_NOTE", "resolve_auto_kv"]

KV_AUTO_FROM_CHECKPOINT = (0, 14, 0)
"""The first release read that resolves "auto" from the checkpoint (``resolve_kv_cache_dtype_string``; 0.13.0 lacks
it)."""
KV_AUTO_NVFP4_FROM = (0, 26, 0)
"""The first release read whose map resolves an NVFP4 KV scheme to nvfp4 (0.19.0 keeps auto)."""
KV_AUTO_NOTE = "--kv-cache-dtype auto "
"""How the note that says what "auto" became on this checkpoint begins (the KV line shows it)."""


def resolve_auto_kv(model: ModelSpec, kv_cache_dtype: str, version: tuple[int, int, int]) -> tuple[str, str]:
    """(the KV dtype vLLM ``version`` uses for ``--kv-cache-dtype kv_cache_dtype`` on ``model``, why — "" where the
    checkpoint declares no KV scheme or the flag is not auto).

    Raises:
        InputError: auto resolving to a KV dtype not modelled (nvfp4).
    """
    q = model.quant
    if kv_cache_dtype.lower() != "auto" or not q.kv_algo:
        return kv_cache_dtype, ""
    vtxt = ".".join(map(str, version))
    declared = f"the checkpoint's {'kv_cache_quant_algo' if q.kv_algo_from == 'modelopt' else 'kv_cache_scheme'}"
    if q.kv_algo_from != "modelopt":
        return kv_cache_dtype, (f"{KV_AUTO_NOTE}stays {model.dtype}: vLLM {vtxt} does not resolve auto from "
                                f"{declared} ({q.kv_algo}; resolve_kv_cache_dtype_string reads ModelOpt checkpoints "
                                f"only); --kv-cache-dtype fp8 uses its scales")
    if version < KV_AUTO_FROM_CHECKPOINT:
        return kv_cache_dtype, (f"{KV_AUTO_NOTE}stays {model.dtype}: vLLM {vtxt} does not read {declared} "
                                f"({q.kv_algo}) under auto (resolve_kv_cache_dtype_string from 0.14); "
                                f"--kv-cache-dtype fp8 uses its scales")
    if q.kv_algo == "fp8":
        return "fp8_e4m3", (f"{KV_AUTO_NOTE}→ fp8_e4m3: {declared} is FP8, which vLLM {vtxt} takes under auto "
                            f"(resolve_kv_cache_dtype_string, from 0.14)")
    if q.kv_algo == "nvfp4" and version >= KV_AUTO_NVFP4_FROM:
        raise InputError(f"--kv-cache-dtype auto: vLLM {vtxt} resolves it to nvfp4 from {declared} "
                         f"(resolve_kv_cache_dtype_string), an NVFP4 KV cache kvledger does not model; plan "
                         f"--kv-cache-dtype fp8 or bf16, or --engine-version 0.19.0 (which keeps auto)")
    return kv_cache_dtype, (f"{KV_AUTO_NOTE}stays {model.dtype}: vLLM {vtxt} does not map {declared} "
                            f"({q.kv_algo}) and keeps auto, with a warning")
