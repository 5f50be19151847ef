"""vLLM's refusal of a step budget shorter than max_model_len with chunked prefill off, shared by ``plan`` and the
simulator's engine settings: ``SchedulerConfig.verify_max_model_len`` raises "max_num_batched_tokens (…) is smaller
than max_model_len (…)" where ``not enable_chunked_prefill`` (``config/scheduler.py``, read in 0.19.0 and 0.33.0); and
the budget vLLM sets with chunked prefill off and none given, with the notes that say so."""

from __future__ import annotations

__all__ = ["chunked_off_budget_error", "chunked_off_budget", "forced_on_note"]


def chunked_off_budget_error(max_num_batched_tokens: int, max_model_len: int) -> str | None:
    """The refusal's words where a budget of ``max_num_batched_tokens`` with chunked prefill off cannot take one
    ``max_model_len`` prompt, else None."""
    if max_num_batched_tokens >= max_model_len:
        return None
    return (f"max_num_batched_tokens ({max_num_batched_tokens:,}) is smaller than max_model_len ({max_model_len:,}) "
            "with chunked prefill off: a prompt longer than the step budget could never be scheduled (vLLM refuses "
            "this setting). Raise max_num_batched_tokens to ≥ max_model_len, lower max_model_len, or enable chunked "
            "prefill.")


def forced_on_note(version: str, max_num_batched_tokens: int) -> str:
    """The note where ``--no-enable-chunked-prefill`` is ignored: vLLM 0.8–0.11.0's V1 engine turns chunked prefill on
    for every generative model (``engine/arg_utils.py``, read in 0.9.0 and 0.11.0; honoured from 0.11.1)."""
    return (f"--no-enable-chunked-prefill has no effect in vLLM {version}: its V1 engine turns chunked prefill on for "
            "every generative model (engine/arg_utils.py, read in 0.9.0 and 0.11.0; honoured from 0.11.1); token "
            f"budget {max_num_batched_tokens:,} as with it on")


def chunked_off_budget(max_model_len: int, default_max_num_batched_tokens: int) -> tuple[int, str]:
    """The step budget vLLM sets with chunked prefill off and no ``--max-num-batched-tokens`` given, tokens: max(
    max_model_len, the default) (``engine/arg_utils.py``, 0.11.1–0.33.0), the tokens ``profile_run`` profiles (so the
    activation peak grows and the pool shrinks); and the note that says so."""
    mnbt = max(max_model_len, default_max_num_batched_tokens)
    return mnbt, (f"chunked prefill off: max_num_batched_tokens = max(max_model_len, default) = {mnbt:,} (vLLM rule, "
                  "engine/arg_utils.py), the tokens profile_run profiles")
