"""max_model_len as vLLM resolves it (``config.py :: _get_and_verify_max_len``): the user's ``--max-model-len``,
else the length the model's config derives (max_position_embeddings, scaled by a YaRN rope_scaling); a user value
above the derived one is refused unless ``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1`` (``--allow-long-max-model-len`` here),
when vLLM warns and takes it."""

from __future__ import annotations

from kvledger.accounting.settings import PlanSettings
from kvledger.catalog.modelspec import ModelSpec
from kvledger.errors import InputError

__all__ = ["resolve_max_model_len"]


def resolve_max_model_len(model: ModelSpec, s: PlanSettings) -> tuple[int, str]:
    """max_model_len as vLLM resolves it: the user's, else the config-derived length.

    Raises:
        InputError: a user value above the derived maximum but with ``s.allow_long_max_model_len`` (as vLLM).
    """
    derived = model.derived_max_model_len
    if s.max_model_len is None:
        return (
            derived,
            f"derived from the config (max_position_embeddings {model.max_position_embeddings:,}; YaRN rule)",
        )
    if s.max_model_len > derived and not s.allow_long_max_model_len:
        raise InputError(f"--max-model-len {s.max_model_len:,} exceeds the {derived:,} tokens {model.name} supports "
                         "(vLLM refuses this unless VLLM_ALLOW_LONG_MAX_MODEL_LEN=1: `kvledger plan "
                         "--allow-long-max-model-len`). For the model's own long-context set-up, give a config.json "
                         "whose rope_scaling sets it (YaRN) by its path in place of the model id")
    if s.max_model_len > derived:
        return s.max_model_len, (f"given, above the config's {derived:,} (VLLM_ALLOW_LONG_MAX_MODEL_LEN=1: vLLM warns "
                                 "that positions past the trained length may give wrong outputs)")
    return s.max_model_len, "given"
