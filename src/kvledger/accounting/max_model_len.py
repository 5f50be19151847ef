"""max_model_len as vLLM resolves it (``config.py :: _get_and_verify_max_len``): the user's ``--max-model-len``,
else the length the model's config derives by the engine version's RoPE rule (YaRN from its original length up to
0.26, the config's length as already scaled in 0.33); a user value above the derived one is refused unless
``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1`` (``--allow-long-max-model-len`` here), when vLLM warns and takes it."""

from __future__ import annotations

from kvledger.accounting.settings import PlanSettings
from kvledger.accounting.vllm_rules import LATEST, version_tuple
from kvledger.catalog.modelspec import ModelSpec
from kvledger.errors import InputError

__all__ = ["resolve_max_model_len", "config_len", "long_len_notes", "ALLOW_LONG_ENV", "YARN_AS_SCALED_FROM"]

#: each engine's switch for a context length above the config's (vLLM envs.py; SGLang model_config.py)
ALLOW_LONG_ENV = {"vllm": "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1", "sglang": "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1"}
#: first vLLM read whose ``_get_and_verify_max_len`` applies no YaRN factor (0.26 still does; 0.27–0.32 not read)
YARN_AS_SCALED_FROM = (0, 33, 0)


def config_len(model: ModelSpec, s: PlanSettings) -> tuple[int, str | None]:
    """(the config-derived max_model_len this engine and version take, tokens; the note naming the YaRN rule that
    applied where vLLM's two rules differ, else None). SGLang and TensorRT-LLM take the ≤0.26 length, as before."""
    later = model.yarn_as_scaled_max_model_len
    old = model.derived_max_model_len
    if s.engine != "vllm" or later is None or later == old:
        return old, None
    ver = version_tuple(s.engine_version or LATEST) or version_tuple(LATEST)
    v = ".".join(map(str, ver[:2]))
    if ver >= YARN_AS_SCALED_FROM:
        return later, (f"max_model_len {later:,} = max_position_embeddings {model.max_position_embeddings:,}: vLLM "
                       f"{v}'s _get_and_verify_max_len (config/model.py) applies no YaRN factor, taking the config's "
                       f"length as already scaled (up to 0.26 it derived {old:,} from the original length × factor)")
    return old, (f"max_model_len {old:,} = original_max_position_embeddings × YaRN factor: vLLM {v}'s "
                 f"_get_and_verify_max_len (config/model.py) scales a YaRN config from its original length, as every "
                 f"release up to 0.26 does (0.33 takes max_position_embeddings {later:,} as already scaled)")


def resolve_max_model_len(model: ModelSpec, s: PlanSettings) -> tuple[int, str]:
    """max_model_len as vLLM resolves it: the user's, else the config-derived length (``config_len``).

    Raises:
        InputError: a user value above the derived maximum but with ``s.allow_long_max_model_len`` (as vLLM).
    """
    derived, rule = config_len(model, s)
    if s.max_model_len is None:
        return derived, rule or (f"derived from the config (max_position_embeddings "
                                 f"{model.max_position_embeddings:,})")
    env = ALLOW_LONG_ENV.get(s.engine)
    if s.max_model_len > derived and not s.allow_long_max_model_len:
        unless = f"unless {env}" if env else "(no switch read for it)"
        fix = ("vLLM 0.33 takes a YaRN config's max_position_embeddings as already scaled: give a config.json whose "
               "max_position_embeddings is the scaled length" if derived != model.derived_max_model_len else
               "For the model's own long-context set-up, give a config.json whose rope_scaling sets it (YaRN) by its "
               "path in place of the model id")
        raise InputError(f"--max-model-len {s.max_model_len:,} exceeds the {derived:,} tokens {model.name} supports "
                         f"({s.engine} refuses this {unless}: `kvledger plan --allow-long-max-model-len`). {fix}")
    if s.max_model_len > derived:
        return s.max_model_len, (f"given, above the config's {derived:,} ({env or '--allow-long-max-model-len'}: "
                                 "positions past the trained length may give wrong outputs, as the engine warns)")
    return s.max_model_len, "given"


def long_len_notes(model: ModelSpec, s: PlanSettings, length: int, source: str) -> list[str]:
    """The plan's note for a max_model_len above the config's (``resolve_max_model_len``'s source), or for a default
    taken by one of vLLM's two YaRN rules where they differ; else none."""
    derived, rule = config_len(model, s)
    if length > derived:
        return [f"max_model_len {length:,}: {source}"]
    return [rule] if rule and s.max_model_len is None else []
