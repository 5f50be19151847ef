"""Which ``--quantization`` methods that quantize an unquantized checkpoint as it loads the replay takes from a run's
record (``validate``/``calibrate``: as ``simulate --quantization`` plans and prices them,
``analyses.serving.online_quant``), and which it refuses, with why; read by ``run_record`` (a launch flag) and
``resolved_quant`` (the engine's resolved config)."""

from __future__ import annotations

from typing import Any

__all__ = ["REPLAYED_ON_LOAD", "ON_LOAD_REFUSED", "launch_quantization"]

#: vLLM --quantization methods quantizing an unquantized checkpoint as it loads that the replay takes from a record,
#: as simulate -q plans and prices them (analyses.serving.online_quant), and those it refuses, with why
REPLAYED_ON_LOAD = ("fp8",)
ON_LOAD_REFUSED = {"bitsandbytes": (
    "the weights are quantized to 4 bits as they load (bitsandbytes), which kvledger's replay does not take from a "
    "record (it takes FP8 on load, as simulate --quantization fp8 plans and prices it): replayed without it, step "
    "times and the KV pool would be another engine's.")}


def launch_quantization(extra: dict[str, Any]) -> str | None:
    """The launch's ``--quantization`` (``engine_kwargs`` or its ``other_flags``) where the replay takes it as
    ``simulate -q`` plans and prices it (``REPLAYED_ON_LOAD``: fp8), lower-cased; None otherwise."""
    kwargs = extra.get("engine_kwargs") or {}
    q = {**kwargs, **(kwargs.get("other_flags") or {})}.get("quantization")
    return str(q).lower() if q is not None and str(q).lower() in REPLAYED_ON_LOAD else None
