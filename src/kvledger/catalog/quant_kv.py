"""The KV-cache quantization a checkpoint declares (ModelOpt's ``kv_cache_quant_algo``, compressed-tensors'
``kv_cache_scheme``), read as vLLM's ``utils/torch_utils.py::get_kv_cache_quant_algo_string`` reads it.

That function (read in 0.15.0, 0.17.0, 0.19.0 and 0.33.0; absent in 0.11.0, 0.12.0 and 0.13.0) looks only at a
``quant_method`` starting with "modelopt": the first of ``quantization.kv_cache_scheme``, ``kv_cache_scheme``,
``quantization.kv_cache_quant_algo``, ``kv_cache_quant_algo``; a dict ``{num_bits: 8, type: float, dynamic: false}``
is "fp8" (0.33 also maps ``num_bits: 4`` to "nvfp4"); a string is lower-cased and mapped by
``MODELOPT_TO_VLLM_KV_CACHE_DTYPE_MAP`` (fp8 → fp8_e4m3; 0.33 adds nvfp4 → nvfp4); anything else falls back to
"auto" with a warning. A compressed-tensors ``kv_cache_scheme`` is not read there (its scales are loaded, the cache
dtype stays what ``--kv-cache-dtype`` says).
"""

from __future__ import annotations

from kvledger.catalog.cfg import Cfg

__all__ = ["kv_cache_quant"]


def _algo_of(value: object) -> str:
    """A declared KV scheme as vLLM names it before the dtype map: "fp8", "nvfp4", another lower-case name, or ""."""
    if isinstance(value, dict):
        if value.get("type") == "float" and value.get("num_bits") == 8 and value.get("dynamic") is False:
            return "fp8"
        if value.get("type") == "float" and value.get("num_bits") == 4:
            return "nvfp4"
        return "unrecognised"
    return value.lower() if isinstance(value, str) else ""


def kv_cache_quant(q: Cfg, method: str) -> tuple[str, str]:
    """(the declared KV scheme as vLLM names it — "fp8", "nvfp4", another name, or "" for none —, where it was read:
    "modelopt" when vLLM's auto resolution reads it, "compressed-tensors" when only its scales are used)."""
    if method.startswith("modelopt"):
        inner = q.get("quantization", None)
        inner = inner if isinstance(inner, dict) else {}
        for value in (inner.get("kv_cache_scheme"), q.get("kv_cache_scheme", None), inner.get("kv_cache_quant_algo"),
                      q.get("kv_cache_quant_algo", None)):
            if value:
                return _algo_of(value), "modelopt"
        return "", ""
    scheme = q.get("kv_cache_scheme", None)
    if method == "compressed-tensors" and scheme:
        return _algo_of(scheme), "compressed-tensors"
    return "", ""
