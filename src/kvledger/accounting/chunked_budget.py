"""vLLM's refusal of a step budget shorter than max_model_len with chunked prefill off, shared by ``plan`` and the
simulator's engine settings: ``SchedulerConfig.verify_max_model_len`` raises "max_num_batched_tokens (…) is smaller
than max_model_len (…)" where ``not enable_chunked_prefill`` (``config/scheduler.py``, read in 0.19.0 and 0.33.0)."""

from __future__ import annotations

__all__ = ["chunked_off_budget_error"]


def chunked_off_budget_error(max_num_batched_tokens: int, max_model_len: int) -> str | None:
    """The refusal's words where a budget of ``max_num_batched_tokens`` with chunked prefill off cannot take one
    ``max_model_len`` prompt, else None."""
    if max_num_batched_tokens >= max_model_len:
        return None
    return (f"max_num_batched_tokens ({max_num_batched_tokens:,}) is smaller than max_model_len ({max_model_len:,}) "
            "with chunked prefill off: a prompt longer than the step budget could never be scheduled (vLLM refuses "
            "this setting). Raise max_num_batched_tokens to ≥ max_model_len, lower max_model_len, or enable chunked "
            "prefill.")
