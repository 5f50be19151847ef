"""max_model_len as vLLM resolves it (``config.py :: _get_and_verify_max_len``): the user's ``--max-model-len``,
else the length the model's config derives by the engine version's RoPE rule (YaRN from its original length up to
0.26, the config's length as already scaled in 0.33; SGLang's ``get_context_length`` for an SGLang plan); a user
value above the derived one is refused unless ``VLLM_ALLOW_LONG_MAX_MODEL_LEN=1`` (``--allow-long-max-model-len``
here), when vLLM warns and takes it. TensorRT-LLM follows its own max_seq_len rule (``_trtllm_len``,
``_trtllm_long``): it never refuses a longer length."""

from __future__ import annotations

from kvledger.accounting.settings import PlanSettings
from kvledger.accounting.sglang_rules import SGLANG_LATEST, parse_sglang_version, sglang_version_text
from kvledger.accounting.trtllm_version import trtllm_before
from kvledger.accounting.vllm_rules import LATEST, version_tuple
from kvledger.catalog.modelspec import ModelSpec
from kvledger.errors import InputError

__all__ = ["resolve_max_model_len", "config_len", "engine_config_len", "trtllm_runtime_of", "SGLANG_TRANSFORMERS5_FROM",
           "default_max_model_len", "long_len_notes", "ALLOW_LONG_ENV", "YARN_AS_SCALED_FROM"]

#: each engine's switch for a context length above the config's (vLLM envs.py; SGLang model_config.py)
ALLOW_LONG_ENV = {"vllm": "VLLM_ALLOW_LONG_MAX_MODEL_LEN=1", "sglang": "SGLANG_ALLOW_OVERWRITE_LONGER_CONTEXT_LEN=1"}
#: first vLLM read whose ``_get_and_verify_max_len`` applies no YaRN factor (0.26 still does; 0.27–0.32 not read)
YARN_AS_SCALED_FROM = (0, 33, 0)
#: first SGLang release pinning transformers 5 (0.5.10's METADATA: transformers==5.3.0; 0.5.9's: 4.57.1)
SGLANG_TRANSFORMERS5_FROM = (0, 5, 10)


def engine_config_len(model: ModelSpec, engine: str, engine_version: str | None,
                      backend: str | None = None) -> tuple[int, str | None]:
    """(the config-derived max_model_len ``engine`` at ``engine_version`` (None: the newest read) takes, tokens; the
    note naming the rule where the engines' rules differ for this config, else None). vLLM: its two YaRN rules;
    SGLang: ``get_context_length`` (``catalog/max_len.py``); TensorRT-LLM: its own max_seq_len rule by runtime
    (``backend``, else the PyTorch backend from 1.0 and trtllm-build engines before; ``_trtllm_len``)."""
    if engine == "sglang":
        return _sglang_len(model, engine_version)
    if engine == "trtllm":
        return _trtllm_len(model, trtllm_runtime_of(engine_version, backend), engine_version)
    later = model.yarn_as_scaled_max_model_len
    old = model.derived_max_model_len
    if later is None or later == old:
        return old, None
    ver = version_tuple(engine_version or LATEST) or version_tuple(LATEST)
    v = ".".join(map(str, ver[:2]))
    if ver >= YARN_AS_SCALED_FROM:
        return later, (f"max_model_len {later:,} = max_position_embeddings {model.max_position_embeddings:,}: vLLM "
                       f"{v}'s _get_and_verify_max_len (config/model.py) applies no YaRN factor, taking the config's "
                       f"length as already scaled (up to 0.26 it derived {old:,} from the original length × factor)")
    return old, (f"max_model_len {old:,} = original_max_position_embeddings × YaRN factor: vLLM {v}'s "
                 f"_get_and_verify_max_len (config/model.py) scales a YaRN config from its original length, as every "
                 f"release up to 0.26 does (0.33 takes max_position_embeddings {later:,} as already scaled)")


def trtllm_runtime_of(engine_version: str | None, backend: str | None = None) -> str:
    """"pytorch" or "tensorrt": ``backend`` when given, else the PyTorch backend from 1.0 (and with no version) and
    the TensorRT-engine executor before (as ``plan_other.trtllm_runtime``).

    Raises:
        InputError: a version text that is not, as a whole, one release (``trtllm_version.trtllm_release``).
    """
    if backend:
        return backend
    return "tensorrt" if trtllm_before(engine_version, (1, 0)) else "pytorch"


#: first TensorRT-LLM release whose PyTorch backend runs Llama-4 past 8,192 tokens (chunked attention, TRTLLM
#: attention backend): the maintainers' known-issue note for 0.21 ("full chunked attention support has been added
#: to make sure LLaMA4 model can functionally run with > 8K seq length")
TRTLLM_LLAMA4_LONG_FROM = (0, 21)
#: what ``Llama4ForConditionalGeneration.infer_max_seq_len`` returns without chunked attention, tokens
TRTLLM_LLAMA4_SHORT_LEN = 8192
_LLAMA4_WHERE = ("Llama4ForConditionalGeneration.infer_max_seq_len, tensorrt_llm/_torch/models/modeling_llama.py, "
                 "read in NVIDIA/TensorRT-LLM's source as stored, not pinned to a release")


def _trtllm_llama4(model: ModelSpec, n: int, engine_version: str | None) -> tuple[int, str] | None:
    """Llama-4 on the PyTorch backend: ``Llama4ForConditionalGeneration.infer_max_seq_len`` overrides the rule. Read in
    NVIDIA/TensorRT-LLM's source as stored, not pinned to a release: earlier copies of the file (stored from forks of
    the repository) return 8,192 whatever the attention backend ("TODO: implement chunked attention to support 10M
    context length"), the current one 8,192 only where the attention backend is not TRTLLM (the default), else the
    model's own length. Before 0.21 (the release the maintainers say added chunked attention for Llama-4) 8,192; None
    for any other model."""
    if "Llama4ForConditionalGeneration" not in model.architectures:
        return None
    short = TRTLLM_LLAMA4_SHORT_LEN
    if trtllm_before(engine_version, TRTLLM_LLAMA4_LONG_FROM):
        return short, (f"max_model_len {short:,} = TensorRT-LLM's max_seq_len for Llama-4 on the PyTorch backend "
                       f"before 0.21, which has no chunked attention: 8,192, not the config's "
                       f"{model.max_position_embeddings:,} ({_LLAMA4_WHERE}); a longer --max-model-len is lowered to "
                       "8,192")
    return n, (f"max_model_len {n:,} = TensorRT-LLM's max_seq_len for Llama-4 with the PyTorch backend's default "
               f"TRTLLM attention backend, whose chunked attention runs past 8,192 tokens from 0.21; with another "
               f"attention backend (FLASHINFER, VANILLA) it is 8,192 ({_LLAMA4_WHERE})")


def _trtllm_len(model: ModelSpec, runtime: str, engine_version: str | None = None) -> tuple[int, str | None]:
    """TensorRT-LLM's max_seq_len with none given (``catalog/max_len.trtllm_max_seq_len``), with a note where it differs
    from vLLM 0.26's length, or for Llama-4 on the PyTorch backend (``_trtllm_llama4``)."""
    pytorch, engine = model.trtllm_max_seq_len or (model.max_position_embeddings,) * 2
    if runtime == "pytorch" and (llama4 := _trtllm_llama4(model, pytorch, engine_version)):
        return llama4
    n = pytorch if runtime == "pytorch" else engine
    if n == model.derived_max_model_len:
        return n, None
    mpe = model.max_position_embeddings
    how = (f"max_position_embeddings {mpe:,}" if n == mpe else f"max_position_embeddings {mpe:,} × the rope factor")
    rule = ("the PyTorch backend's infer_max_seq_len (tensorrt_llm/_torch/models/modeling_utils.py; no factor for "
            "su, longrope, llama3 and yarn)" if runtime == "pytorch" else
            "trtllm-build's _init_max_seq_len (tensorrt_llm/builder.py; no factor for su, longrope and llama3; the "
            "converted checkpoint's rotary_scaling taken as the config's rope_scaling)")
    return n, (f"max_model_len {n:,} = TensorRT-LLM's max_seq_len: {how}, by {rule}; vLLM 0.26's rule derives "
               f"{model.derived_max_model_len:,}; give --max-model-len to plan another length")


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
    return engine_config_len(model, s.engine, s.engine_version, s.trtllm_backend)


def resolve_max_model_len(model: ModelSpec, s: PlanSettings) -> tuple[int, str]:
    """max_model_len as vLLM resolves it: the user's, else the config-derived length (``config_len``).

    Raises:
        InputError: a user value above the derived maximum but with ``s.allow_long_max_model_len`` (as vLLM).
    """
    derived, rule = config_len(model, s)
    if s.max_model_len is None:
        return derived, rule or (f"derived from the config (max_position_embeddings "
                                 f"{model.max_position_embeddings:,})")
    if s.engine == "trtllm" and s.max_model_len > derived:
        return _trtllm_long(s, derived)
    env = ALLOW_LONG_ENV.get(s.engine)
    if s.max_model_len > derived and not s.allow_long_max_model_len:
        unless = f"unless {env}" if env else "(no switch read for it)"
        fix = (f"{s.engine} at this version takes a YaRN config's length as already scaled: give a config.json whose "
               "max_position_embeddings is the scaled length" if derived < model.derived_max_model_len else
               "For the model's own long-context set-up, give a config.json whose rope_scaling sets it (YaRN) by its "
               "path in place of the model id")
        flag = "--max-model-len" if s.engine != "sglang" else "--context-length (--max-model-len)"  # either typed
        raise InputError(f"{flag} {s.max_model_len:,} exceeds the {derived:,} tokens {model.name} supports "
                         f"({s.engine} refuses this {unless}: `kvledger plan --allow-long-max-model-len`). {fix}")
    if s.max_model_len > derived:
        return s.max_model_len, (f"given, above the config's {derived:,} ({env or '--allow-long-max-model-len'}: "
                                 "positions past the trained length may give wrong outputs, as the engine warns)")
    return s.max_model_len, "given"


def _trtllm_long(s: PlanSettings, derived: int) -> tuple[int, str]:
    """TensorRT-LLM given a max_seq_len above the model's: never refused. The PyTorch backend lowers it to the model's
    with a warning (``_torch/pyexecutor/model_engine.py`` ``_init_max_seq_len``: "Specified max_seq_len is larger than
    what the model can support"), unless TLLM_ALLOW_LONG_MAX_MODEL_LEN=1 (``--allow-long-max-model-len`` here; the
    switch is in the repository's current source, not pinned to a release); trtllm-build keeps it and warns
    (``builder.py`` ``_init_max_seq_len``: "the model accuracy might be affected")."""
    given = s.max_model_len or derived
    if trtllm_runtime_of(s.engine_version, s.trtllm_backend) == "tensorrt":
        return given, (f"given, above the model's {derived:,}: trtllm-build keeps it and warns that the model accuracy "
                       "might be affected (tensorrt_llm/builder.py _init_max_seq_len)")
    if s.allow_long_max_model_len:
        return given, (f"given, above the model's {derived:,} (TLLM_ALLOW_LONG_MAX_MODEL_LEN=1: the PyTorch backend "
                       "keeps it, _torch/pyexecutor/model_engine.py _init_max_seq_len)")
    return derived, (f"--max-model-len {given:,} is above the model's {derived:,}: TensorRT-LLM's PyTorch backend "
                     f"lowers max_seq_len to {derived:,} and warns (_torch/pyexecutor/model_engine.py "
                     "_init_max_seq_len), so this plan does too; TLLM_ALLOW_LONG_MAX_MODEL_LEN=1 "
                     "(--allow-long-max-model-len) keeps yours")


def long_len_notes(model: ModelSpec, s: PlanSettings, length: int, source: str) -> list[str]:
    """The plan's note for a max_model_len above the config's (``resolve_max_model_len``'s source), or for a default
    taken by one of vLLM's two YaRN rules where they differ; else none."""
    derived, rule = config_len(model, s)
    if length > derived or length < (s.max_model_len or 0):  # above the config's, or lowered (TensorRT-LLM)
        return [f"max_model_len {length:,}: {source}"]
    return [rule] if rule and s.max_model_len is None else []
