"""The weights' quantization that only the engine's resolved config states (LLMServingSim's ``meta.json``
``resolved_config.model_config.quantization``, no ``quantization`` among the launch's ``engine_kwargs``).

vLLM writes there the checkpoint's own format or the method that quantized an unquantized checkpoint as it loaded:
``ModelConfig._verify_quantization`` (vLLM 0.19 ``config/model.py``) takes the checkpoint's ``quantization_config``
method (or its override, e.g. ``awq_marlin``) and refuses a ``--quantization`` that differs from it. So the checkpoint
kvledger reads for the model tells them apart: a quantized checkpoint — its own format, which the replay prices as
stored, nothing to say; an unquantized one with fp8 — quantized on load, replayed as ``simulate --quantization fp8``
plans and prices it (``analyses.serving.online_quant``), as a launch flag naming it is (``on_load``); with
bitsandbytes — refused, as the launch flag is; with another method — named in a warning, as a launch setting not
modelled."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kvledger.calibration.on_load import ON_LOAD_REFUSED, REPLAYED_ON_LOAD
from kvledger.calibration.record_notes import record_name
from kvledger.calibration.run_record import resolved_quantization

__all__ = ["replay_setup", "resolved_quantization_notes"]


def _method(plan: Any) -> str | None:
    """The checkpoint's own quantization method as kvledger read it (``plan.model``); None: not read."""
    return getattr(getattr(getattr(plan, "model", None), "quant", None), "method", None)


def replay_setup(args: Any, run: Any, taken: dict[str, Any]) -> tuple[Any, list[str]]:
    """(the replay's ``SimSetup`` of ``run`` under ``args``, the notes on its resolved quantization): where the
    resolved config states fp8 (``REPLAYED_ON_LOAD``) on an unquantized checkpoint and no flag names a quantization, the
    setup is prepared again with it (``args.quantization``; ``taken`` records it), as ``simulate -q`` would plan it."""
    from kvledger.analyses.serving.sim_setup import prepare
    from kvledger.calibration.startup_pool import check_log_block_size, startup_log_words
    from kvledger.errors import KvLedgerError

    check_log_block_size(args, taken)  # --startup-log's blocks are the replay's size, or refused
    try:
        setup = prepare(args, run.requests, run.label)
    except KvLedgerError as err:  # the log's pool refused: in --startup-log's words, not the override's
        if not args.kv_pool_source or "--num-gpu-blocks-override" not in str(err):
            raise
        raise type(err)(startup_log_words(str(err), args)) from None
    q = resolved_quantization(run.measured.metadata.extra if run.measured is not None else {})
    if q is not None and q.lower() in REPLAYED_ON_LOAD and _method(setup.plan) == "none" and args.quantization is None:
        taken["quantization"] = q.lower()
        setup = prepare(replace(args, quantization=q.lower()), run.requests, run.label)
    return setup, resolved_quantization_notes(run, setup.plan)


def resolved_quantization_notes(run: Any, plan: Any) -> list[str]:
    """The note on ``run``'s resolved quantization (module docstring), or none; ``plan``: the replay's memory plan
    (its ``model``, the checkpoint as kvledger read it, and its settings' ``quantization``; None: not read, so the
    format cannot be told).

    Raises:
        InputError: an unquantized checkpoint quantized on load by bitsandbytes, as the launch flag is refused.
    """
    from kvledger.errors import InputError

    q = resolved_quantization(run.measured.metadata.extra if run.measured is not None else {})
    own = _method(plan)
    if q is None or own not in (None, "none"):  # none stated, or the checkpoint's own format
        return []
    where = record_name(run)
    said = f"{where} records in its resolved config model_config.quantization {q}"
    if own is None:
        return [f"WARNING: {said}, and the checkpoint's own format was not read: if it is not already {q}, the weights "
                "were quantized as they loaded, which the replay cannot tell, so it prices them as stored"]
    if q.lower() in ON_LOAD_REFUSED:
        raise InputError(f"{run.source}: {said} on an unquantized checkpoint: {ON_LOAD_REFUSED[q.lower()]} Validate "
                         "or calibrate runs launched without it.")
    if getattr(plan.settings, "quantization", None) == q.lower():
        return [f"{said} on an unquantized checkpoint: the weights were quantized as they loaded, replayed as "
                f"simulate --quantization {q.lower()} plans and prices them (a flag given on the command line wins)"]
    return [f"WARNING: recorded, not modelled: --quantization {q} (resolved_config model_config.quantization, "
            f"{where}) on an unquantized checkpoint: the replay runs without it, so whatever it changes in the "
            "measured engine is in the errors"]
