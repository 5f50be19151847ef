"""vLLM's max_num_seqs where the user sets --max-num-batched-tokens but not --max-num-seqs.

From 0.10.1 ``engine/arg_utils.py`` lowers the usage-context default max_num_seqs to the token budget when the user
left max_num_seqs unset (0.10.1, 0.10.2 ``_set_default_args_v1`` and 0.11.0 ``_set_default_args``:
``min(default_max_num_seqs[usage_context], self.max_num_batched_tokens or sys.maxsize)``; 0.19.0 and 0.33.0
``_set_default_max_num_seqs_and_batched_tokens_args``: ``if orig_max_num_seqs is None: self.max_num_seqs =
min(self.max_num_seqs, self.max_num_batched_tokens)``), so
``--max-num-batched-tokens 512`` alone on an H100 runs 512 sequences, not 1,024, and passes
``SchedulerConfig.verify_max_model_len``'s "must be greater than or equal to max_num_seqs". 0.9.0, 0.9.1, 0.9.2 and
0.10.0's ``_set_default_args_v1`` take the default as it is (``self.max_num_seqs = default_max_num_seqs[…]``, no min).
"""

from __future__ import annotations

__all__ = ["SEQS_FOLLOW_BUDGET_FROM", "default_max_num_seqs"]

SEQS_FOLLOW_BUDGET_FROM = (0, 10, 1)
"""The first release read whose default max_num_seqs follows a given --max-num-batched-tokens down."""


def default_max_num_seqs(ver: tuple[int, int, int], default_seqs: int, given_tokens: int | None) -> tuple[int, str]:
    """(max_num_seqs, words to add to the defaults' source, "" when unchanged) with --max-num-seqs unset:
    ``default_seqs``, lowered to ``given_tokens`` from 0.10.1 where the user gave a smaller token budget."""
    if given_tokens is None or given_tokens >= default_seqs or ver < SEQS_FOLLOW_BUDGET_FROM:
        return default_seqs, ""
    return given_tokens, (f"; max_num_seqs {default_seqs:,} → {given_tokens:,}: vLLM ≥0.10.1 lowers the default to "
                          "the given max_num_batched_tokens (engine/arg_utils.py: min(max_num_seqs, "
                          "max_num_batched_tokens) when --max-num-seqs is unset)")
