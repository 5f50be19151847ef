"""The sentences a session run (``--workload chat|agent``) prints of its draw and its context cap, and the flag that
sets a simulated run's load, named for its workload kind."""

from __future__ import annotations

from typing import Any

__all__ = ["sessions_left_out", "left_out_note", "session_default_cap", "load_flag"]


def sessions_left_out(left_out: int, drawn: int, system_tokens: int, cap_tokens: int, by_max_model_len: bool = True,
                      model_context_tokens: int | None = None) -> str:
    """Why ``left_out`` of the ``drawn`` sessions did not run: the draw's rule (``dynamics.workload.sessions``) stops
    a session before a turn whose prompt + output would pass the cap, and for these that turn was the first. The cap
    is the smaller of max_model_len and the preset's own context cap; ``by_max_model_len``: max_model_len set it, so
    raising it keeps them (else the preset's cap bound, which no flag moves) unless ``model_context_tokens`` (the
    model's context) is given: max_model_len is already the model's context, which the engine refuses to pass."""
    kept = drawn - left_out
    if not by_max_model_len:
        fix = "the cap is the preset's own (the session shape's context), not max_model_len, so no flag keeps them"
    elif model_context_tokens is not None:
        fix = (f"the cap is the model's own {model_context_tokens:,}-token context (the engine refuses a longer "
               "max_model_len): these sessions exceed it and cannot be served whole, so no flag keeps them")
    else:
        fix = "raise --max-model-len to keep them"
    return (f"sessions: {left_out:,} of the {drawn:,} drawn sessions left out, {kept:,} run: the first turn of each "
            f"(the {system_tokens:,}-token shared system prompt + its first input + its output) would pass the "
            f"context cap of {cap_tokens:,} tokens, and a session stops before a turn that would "
            f"(kvledger.dynamics.workload.sessions), so these had no turn to send; {fix}")


def left_out_note(drawn: int, kept: int, shape: Any, preset: Any, model_context_tokens: int | None = None
                  ) -> str | None:
    """``sessions_left_out`` for a draw of ``drawn`` sessions of which ``kept`` run, under ``shape`` (its context cap
    the smaller of the preset's, ``preset``, and max_model_len); None when none was left out. ``model_context_tokens``:
    the model's context by the run's engine and version (``accounting/max_model_len.py : config_len``); a cap at or
    above it was set by it, not by a flag (the session rule, ``judgments/offload.py : session_context_cap``, takes it
    when below kvledger's default)."""
    if kept >= drawn:
        return None
    cap = shape.max_context_tokens
    by_model = model_context_tokens is not None and cap >= model_context_tokens
    return sessions_left_out(drawn - kept, drawn, shape.system_tokens, cap, cap < preset.max_context_tokens,
                             model_context_tokens if by_model else None)


def session_default_cap(cap_tokens: int, refusal: str) -> str:
    """The engine's refusal of max_model_len ``cap_tokens`` restated for a session run that took kvledger's own
    default cap (``judgments/offload.py : SESSION_MAX_MODEL_LEN_TOKENS``), which the user did not set."""
    return (f"max_model_len {cap_tokens:,} is kvledger's default for a session run (--workload chat|agent without "
            "--max-model-len), not a value you set nor the model's context; --max-model-len N sets it (a lower one "
            f"also stops the sessions sooner), and here it is too long: {refusal}")


def load_flag(mode: str) -> str:
    """The flag that lowers the load of a simulated run of workload ``mode`` (``workload_info["mode"]``): sessions
    start at --session-rate, a closed loop holds --concurrency users, an open loop (or a paced client) sends --rate."""
    if mode.startswith("sessions"):
        return "--session-rate (or --sessions)"
    if mode == "closed loop":
        return "--concurrency"
    return "--rate"


def model_default_plan(model: Any, gpu: Any, settings: Any, cap_tokens: int) -> dict[str, Any] | None:
    """What the plan's own default max_model_len (the model's context by the engine's rule: what `kvledger plan` and
    the engine take without --max-model-len) does on ``gpu``, for a session run that took kvledger's shorter session
    cap ``cap_tokens`` instead: {"max_model_len_tokens", "verdict", "message", "estimated_max_model_len"} from the
    plan's advice; None when that default is not longer than the cap."""
    from kvledger.accounting.max_model_len import config_len
    from kvledger.accounting.plan import build_plan
    from kvledger.errors import InputError

    default = config_len(model, settings)[0]
    if default <= cap_tokens:
        return None
    try:
        adv = build_plan(model, gpu, settings.model_copy(update={"max_model_len": None}), with_roofline=False).advice
    except InputError as err:  # the engine's own refusal of that length (a check before the memory plan)
        return {"max_model_len_tokens": default, "verdict": "refused", "message": str(err),
                "estimated_max_model_len": None}
    return {"max_model_len_tokens": default, "verdict": adv.verdict, "message": adv.message,
            "estimated_max_model_len": adv.estimated_max_model_len}
