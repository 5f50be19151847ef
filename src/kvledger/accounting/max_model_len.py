"""max_model_len as vLLM resolves it (``config.py :: _get_and_verify_max_len``): the user's ``--max-model-len``,
else the length the model's config derives by the engine version's RoPE rule (YaRN from its original length up to
0.26, the config's length as already scaled in 0.33; SGLang's ``get_context_length`` for an SGLang plan); a user
value above the derived one is refused unless ``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1`` (``--allow-long-max-model-len``
here), when vLLM warns and takes it."""

from __future__ import annotations

from kvledger.accounting.settings import PlanSettings
from kvledger.accounting.sglang_rules import SGLANG_LATEST, parse_sglang_version, sglang_version_text
from kvledger.accounting.vllm_rules import LATEST, version_tuple
from kvledger.catalog.modelspec import ModelSpec
from kvledger.errors import InputError

__all__ = ["resolve_max_model_len", "config_len", "engine_config_len", "SGLANG_TRANSFORMERS5_FROM",
           "default_max_model_len", "long_len_notes", "ALLOW_LONG_ENV", "YARN_AS_SCALED_FROM"]

#: each engine's switch for a context length above the config's (vLLM envs.py; SGLang model_config.py)
ALLOW_LONG_ENV = {"vllm": "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1", "sglang": "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1"}
#: first vLLM read whose ``_get_and_verify_max_len`` applies no YaRN factor (0.26 still does; 0.27–0.32 not read)
YARN_AS_SCALED_FROM = (0, 33, 0)
#: first SGLang release pinning transformers 5 (0.5.10's METADATA: transformers==5.3.0; 0.5.9's: 4.57.1)
SGLANG_TRANSFORMERS5_FROM = (0, 5, 10)


def engine_config_len(model: ModelSpec, engine: str, engine_version: str | None) -> tuple[int, str | None]:
    """(the config-derived max_model_len ``engine`` at ``engine_version`` (None: the newest read) takes, tokens; the
    note naming the rule where the engines' rules differ for this config, else None). vLLM: its two YaRN rules;
    SGLang: ``get_context_length`` (``catalog/max_len.py``); TensorRT-LLM: vLLM's ≤0.26 length (its own rule not
    read), as before."""
    if engine == "sglang":
        return _sglang_len(model, engine_version)
    later = model.yarn_as_scaled_max_model_len
    old = model.derived_max_model_len
    if later is None or later == old:
        return old, None
    if engine != "vllm":  # TensorRT-LLM: its own rule not read; say whose rule the length is
        return old, (f"max_model_len {old:,} by vLLM 0.26's YaRN rule (original_max_position_embeddings × factor): "
                     f"TensorRT-LLM's own max_seq_len rule is not read here, and vLLM 0.33's rule gives {later:,}; "
                     "give --max-model-len to plan the length you serve")
    ver = version_tuple(engine_version or LATEST) or version_tuple(LATEST)
    v = ".".join(map(str, ver[:2]))
    if ver >= YARN_AS_SCALED_FROM:
        return later, (f"max_model_len {later:,} = max_position_embeddings {model.max_position_embeddings:,}: vLLM "
                       f"{v}'s _get_and_verify_max_len (config/model.py) applies no YaRN factor, taking the config's "
                       f"length as already scaled (up to 0.26 it derived {old:,} from the original length × factor)")
    return old, (f"max_model_len {old:,} = original_max_position_embeddings × YaRN factor: vLLM {v}'s "
                 f"_get_and_verify_max_len (config/model.py) scales a YaRN config from its original length, as every "
                 f"release up to 0.26 does (0.33 takes max_position_embeddings {later:,} as already scaled)")


def _sglang_len(model: ModelSpec, engine_version: str | None) -> tuple[int, str | None]:
    """SGLang's context_len for the release's transformers (4.57 up to 0.5.9, 5.x from 0.5.10), with a note where it
    differs from vLLM's ≤0.26 length."""
    if model.sglang_context_len is None:
        return model.derived_max_model_len, None
    ver = parse_sglang_version(engine_version) if engine_version else SGLANG_LATEST
    v5 = ver >= SGLANG_TRANSFORMERS5_FROM
    n = model.sglang_context_len[v5]
    if n == model.derived_max_model_len:
        return n, None
    tf = "transformers 5's rope_parameters" if v5 else "transformers 4.57's rope_scaling"
    return n, (f"max_model_len {n:,} (SGLang's context_len): SGLang {sglang_version_text(ver)}'s get_context_length "
               f"(srt/utils hf_transformers) "
               f"takes the config's first length key × a rope_scaling factor only where {tf} names no "
               f"original_max_position_embeddings and no llama3 type (vLLM 0.26's rule derives "
               f"{model.derived_max_model_len:,}, vLLM 0.33's {model.yarn_as_scaled_max_model_len or 0:,})")


def default_max_model_len(model: ModelSpec, engine: str, engine_version: str | None) -> int:
    """The max_model_len ``engine`` at ``engine_version`` derives when none is given, tokens (``engine_config_len``):
    the model's context for callers that know the engine but build no plan (session caps)."""
    return engine_config_len(model, engine, engine_version)[0]


def config_len(model: ModelSpec, s: PlanSettings) -> tuple[int, str | None]:
    """``engine_config_len`` for the plan's engine and version."""
    return engine_config_len(model, s.engine, s.engine_version)


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
        fix = (f"{s.engine} at this version takes a YaRN config's length as already scaled: give a config.json whose "
               "max_position_embeddings is the scaled length" if derived < model.derived_max_model_len else
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
