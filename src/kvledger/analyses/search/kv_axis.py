"""The --kv-cache-dtype axis of a search: each value checked against the names every command accepts
(``accounting.kv_dtype_choices.KV_DTYPE_BYTES``), and the spellings of one KV cache kept once, the first one given (as
``--tp 1,1`` and ``--gpus H100,H100-SXM`` are): ``auto,auto``; ``auto,bf16`` for a bf16 model (auto is the model's
dtype); ``bf16,bfloat16``; ``fp16,float16,half``; ``fp8,fp8_e4m3`` (vLLM stores its ``fp8`` as e4m3 on CUDA). A fresh-
user trial got one candidate twice, its tie "broken by candidate order: #2 against #2".

A model with DeepSeek sparse attention is the exception: vLLM picks its sparse MLA backend by the name itself
(``accounting.vllm_sparse_mla``: fp8 and fp8_e4m3 go to different backends on SM90, auto becomes fp8_ds_mla on SM120),
so there only identical spellings are one (an upper-case name is refused, as vLLM refuses it)."""

from __future__ import annotations

from kvledger.accounting.kv_dtype_choices import KV_DTYPE_BYTES, KV_DTYPE_NAMES, check_kv_dtype_case
from kvledger.accounting.vllm_sparse_mla import sparse_mla_layer
from kvledger.catalog.modelspec import ModelSpec
from kvledger.errors import InputError

__all__ = ["kv_dtype_axis"]

_SAME = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16", "fp8": "fp8_e4m3"}
"""vLLM's other spellings of one KV cache → the one kept as the key."""
_MODEL_DTYPE = {"bfloat16": "bf16", "float16": "fp16", "half": "fp16"}
"""A model's dtype → the KV dtype ``auto`` gives it (a float32 model's auto is its own: kept apart)."""


def _sparse(model: ModelSpec) -> bool:
    return any(map(sparse_mla_layer, model.layers))


def _key(name: str, model: ModelSpec | None, sparse: bool) -> str:
    d = name.lower()
    if sparse:
        return d
    if d == "auto":
        return _MODEL_DTYPE.get(model.dtype.lower(), "auto") if model is not None else "auto"
    return _SAME.get(d, d)


def kv_dtype_axis(names: tuple[str, ...], model: ModelSpec | None = None) -> tuple[str, ...]:
    """``names`` checked and each KV cache kept once, in the first spelling given (module docstring); without the
    ``model`` ``auto`` is a dtype of its own.

    Raises:
        InputError: a name no command accepts.
    """
    bad = [d for d in names if d.lower() != "auto" and d.lower() not in KV_DTYPE_BYTES]
    if bad:
        raise InputError(f"--kv-cache-dtype {bad[0]!r} is not supported; use {KV_DTYPE_NAMES}")
    for d in names:
        check_kv_dtype_case(d)
    sparse = model is not None and _sparse(model)
    kept: dict[str, str] = {}
    for d in names:
        kept.setdefault(_key(d, model, sparse), d)
    return tuple(kept.values())
