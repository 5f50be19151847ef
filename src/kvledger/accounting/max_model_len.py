"""max_model_len as vLLM resolves it (``config.py :: _get_and_verify_max_len``): the user's ``--max-model-len``,
else the length the model's config derives (max_position_embeddings, scaled by a YaRN rope_scaling); a user value
above the derived one is refused unless ``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1`` (``--allow-long-max-model-len`` here),
when vLLM warns and takes it."""

from __future__ import annotations

from kvledger.accounting.settings import PlanSettings
from kvledger.catalog.modelspec import ModelSpec
from kvledger.errors import InputError

__all__ = ["resolve_max_model_len", "long_len_notes", "ALLOW_LONG_ENV"]

#: each engine's switch for a context length above the config's (vLLM envs.py; SGLang model_config.py)
ALLOW_LONG_ENV = {"vllm": "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1", "sglang": "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1"}


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
    env = ALLOW_LONG_ENV.get(s.engine)
    if s.max_model_len > derived and not s.allow_long_max_model_len:
        unless = f"unless {env}" if env else "(no switch read for it)"
        raise InputError(f"--max-model-len {s.max_model_len:,} exceeds the {derived:,} tokens {model.name} supports "
                         f"({s.engine} refuses this {unless}: `kvledger plan --allow-long-max-model-len`). For the "
                         "model's own long-context set-up, give a config.json whose rope_scaling sets it (YaRN) by its "
                         "path in place of the model id")
    if s.max_model_len > derived:
        return s.max_model_len, (f"given, above the config's {derived:,} ({env or '--allow-long-max-model-len'}: "
                                 "positions past the trained length may give wrong outputs, as the engine warns)")
    return s.max_model_len, "given"


def long_len_notes(model: ModelSpec, length: int, source: str) -> list[str]:
    """The plan's note for a max_model_len above the config's (``resolve_max_model_len``'s source), else none."""
    return [f"max_model_len {length:,}: {source}"] if length > model.derived_max_model_len else []
