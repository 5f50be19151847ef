"""The weights' quantization that only the engine's resolved config states (LLMServingSim's ``meta.json``
``resolved_config.model_config.quantization``, no ``quantization`` among the launch's ``engine_kwargs``).

vLLM writes there the checkpoint's own format or the method that quantized an unquantized checkpoint as it loaded:
``ModelConfig._verify_quantization`` (vLLM 0.19 ``config/model.py``) takes the checkpoint's ``quantization_config``
method (or its override, e.g. ``awq_marlin``) and refuses a ``--quantization`` that differs from it. So the checkpoint
kvledger reads for the model tells them apart: a quantized checkpoint — its own format, which the replay prices as
stored, nothing to say; an unquantized one with bitsandbytes or fp8 — refused as the launch flag is
(``run_record.other_settings``); with another method — named in a warning, as a launch setting not modelled."""

from __future__ import annotations

from typing import Any

from kvledger.calibration.record_notes import record_name
from kvledger.calibration.run_record import ON_LOAD, ON_LOAD_WHY, resolved_quantization

__all__ = ["resolved_quantization_notes"]


def resolved_quantization_notes(run: Any, plan: Any) -> list[str]:
    """The warning on ``run``'s resolved quantization (module docstring), or none; ``plan``: the replay's memory plan
    (its ``model``, the checkpoint as kvledger read it; None: not read, so the format cannot be told).

    Raises:
        InputError: an unquantized checkpoint quantized on load (bitsandbytes, fp8), as the launch flag is refused.
    """
    from kvledger.errors import InputError

    q = resolved_quantization(run.measured.metadata.extra if run.measured is not None else {})
    own = getattr(getattr(getattr(plan, "model", None), "quant", None), "method", None)
    if q is None or own not in (None, "none"):  # none stated, or the checkpoint's own format
        return []
    where = record_name(run)
    said = f"{where} records in its resolved config model_config.quantization {q}"
    if own is None:
        return [f"WARNING: {said}, and the checkpoint's own format was not read: if it is not already {q}, the weights "
                "were quantized as they loaded, which the replay does not model (it prices the checkpoint's weights)"]
    if q.lower() in ON_LOAD:
        raise InputError(f"{run.source}: {said} on an unquantized checkpoint: {ON_LOAD_WHY} Validate or calibrate "
                         "runs launched without it.")
    return [f"WARNING: recorded, not modelled: --quantization {q} (resolved_config model_config.quantization, "
            f"{where}) on an unquantized checkpoint: the replay runs without it, so whatever it changes in the "
            "measured engine is in the errors"]
