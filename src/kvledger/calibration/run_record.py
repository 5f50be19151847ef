"""What a measured run's own record says about the engine that served it (LLMServingSim's ``meta.json``), as simulate
flags.

A record names the engine it measured: replaying it under the tool's defaults would be another engine. Read, in order
of trust (the engine's resolved ``VllmConfig`` first, then the launch ``engine_kwargs``, then the ``kv_cache`` block):
tensor/pipeline/data parallel sizes, expert parallelism, KV block count and block size, async scheduling, prefix
caching, chunked prefill, ``max_num_seqs``, ``max_num_batched_tokens``, ``max_model_len``, ``gpu_memory_utilization``,
``kv_cache_dtype``, ``enforce_eager`` and the engine version; a benchmark file naming SGLang as its backend (SGLang's
bench_serving) is replayed with the ``sglang`` policy (its scheduler, radix cache and memory plan). ``unmodelled``
names what kvledger cannot replay as one engine (data parallelism, with or without expert parallelism; pipeline
parallelism); expert parallelism with data parallel 1 is one engine, replayed with ``enable_expert_parallel``.

Every other launch setting the record holds (a meta.json ``engine_kwargs`` key, a manifest's ``other_flags``) is
sorted three ways (``other_settings``), never dropped unsaid, save a launch ``--quantization fp8``, replayed as
``simulate --quantization fp8`` plans and prices it (``analyses.serving.online_quant``; the checkpoint tells them apart:
one already FP8 is loaded as stored, an unquantized one quantized on load): ``refused`` — an engine kvledger's replay
does not model at all (speculative decoding: the simulator steps one token per sequence, ``kvledger simulate --help``
has no draft model; bitsandbytes on load, ``on_load``); ``_HARMLESS`` — settings that change no step time
and no memory (where the server listens, logging, the served name, the seed); anything else is ``unapplied``, named in
a warning. An argument vLLM's parser reads as a positional (one argv element holding a space,
``evidence.k8s_manifests``) is no flag at all: ``positional`` says what that version did with it
(``positional_notes``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvledger.calibration.on_load import ON_LOAD_REFUSED, launch_quantization

__all__ = ["RecordedSettings", "recorded_settings", "RECORD_WORDS", "other_settings", "positional_notes", "unused_keys",
           "API_SERVER_TAG_FROM", "resolved_quantization"]

#: SimRequestArgs field → where the record states it: (resolved_config section, key), then engine_kwargs key
_SOURCES: dict[str, tuple[tuple[str, str] | None, str | None, str | None]] = {
    # field: ((resolved section, key), engine_kwargs key, kv_cache key)
    "tp": (("parallel_config", "tensor_parallel_size"), "tensor_parallel_size", None),
    "max_num_seqs": (("scheduler_config", "max_num_seqs"), "max_num_seqs", None),
    "max_num_batched_tokens": (("scheduler_config", "max_num_batched_tokens"), "max_num_batched_tokens", None),
    "async_scheduling": (("scheduler_config", "async_scheduling"), "async_scheduling", None),
    "enable_chunked_prefill": (("scheduler_config", "enable_chunked_prefill"), "enable_chunked_prefill", None),
    "enable_prefix_caching": (("cache_config", "enable_prefix_caching"), "enable_prefix_caching",
                              "enable_prefix_caching"),
    "block_size": (("cache_config", "block_size"), "block_size", "block_size"),
    "num_gpu_blocks_override": (("cache_config", "num_gpu_blocks"), None, "num_gpu_blocks"),
    "gpu_memory_utilization": (("cache_config", "gpu_memory_utilization"), "gpu_memory_utilization",
                               "gpu_memory_utilization"),
    "max_model_len": (None, "max_model_len", None),
    "kv_cache_dtype": (("cache_config", "cache_dtype"), "kv_cache_dtype", None),
    "enforce_eager": (("model_config", "enforce_eager"), "enforce_eager", None),
    "batching": (None, "batching", None),  # a Deployment's VLLM_USE_V1=0 (evidence.k8s_manifests): the V0 engine
    "mem_fraction_static": (None, "mem_fraction_static", None),  # SGLang's server_info (evidence.sglang_bench)
    "max_total_tokens": (None, "max_total_tokens", None),  # server_info's max_total_num_tokens: the pool it sized
}
_PARALLEL = {"pp": (("parallel_config", "pipeline_parallel_size"), "pipeline_parallel_size"),
             "dp": (("parallel_config", "data_parallel_size"), "data_parallel_size"),
             "ep": (("parallel_config", "enable_expert_parallel"), "enable_expert_parallel")}


#: how the replay's note names a recorded setting whose record name differs from the field it sets ("{}": the value)
RECORD_WORDS = {"num_gpu_blocks_override": "num_gpu_blocks {} (replayed as --num-gpu-blocks-override)",
                "quantization": "--quantization {} (replayed as simulate plans and prices it: a checkpoint already in "
                                "that format as stored, an unquantized one quantized on load)",
                "max_total_tokens": "max_total_num_tokens {} (the KV pool the server sized, replayed as it)"}


@dataclass
class RecordedSettings:
    """The engine settings a run's record states.

    Attributes:
        flags: SimRequestArgs field → value (only what the record states).
        engine_version: the vLLM version it names, or None.
        pp / dp: pipeline- and data-parallel sizes (1 when not stated). ep: expert parallelism on.
        unmodelled: sentences naming what kvledger cannot replay as one engine (empty when all is modelled).
        refused: sentences naming each launch flag whose engine the replay does not model (module docstring).
        unapplied: the other launch flags neither applied nor known to be harmless, as ``--flag value``.
        positional: sentences on the launch arguments vLLM's parser read as positionals (``positional_notes``).
    """

    flags: dict[str, Any] = field(default_factory=dict)
    engine_version: str | None = None
    pp: int = 1
    dp: int = 1
    ep: bool = False
    unmodelled: list[str] = field(default_factory=list)
    refused: list[str] = field(default_factory=list)
    unapplied: list[str] = field(default_factory=list)
    positional: list[str] = field(default_factory=list)
    unused: list[str] = field(default_factory=list)
    """A sentence naming the keys the run's record holds that the replay does not use (``unused_keys``), or none."""
    backend: str | None = None
    """The server the benchmark file says it measured (bench_serving's ``backend``: "vllm", "sglang", ...), or None."""


#: launch settings that change no step time and no memory: where the server listens and logs, what it calls the model
_HARMLESS = {"model", "served_model_name", "host", "port", "seed", "tokenizer", "trust_remote_code", "download_dir",
             "disable_log_requests", "enable_log_requests", "disable_log_stats", "max_log_len", "uvicorn_log_level",
             "disable_uvicorn_access_log", "api_key", "chat_template", "response_role", "enable_auto_tool_choice",
             "tool_call_parser", "allowed_origins", "root_path", "load_format",
             "swap_space"}  # V0's host memory for preemption by swapping, which a one-sequence request never takes
#: dtype values that are the checkpoint's own 16-bit weights, which the replay prices
_SAME_DTYPE = {"auto", "bfloat16", "float16", "half"}
_SPECULATIVE = {"speculative_config", "speculative_model", "num_speculative_tokens",
                "speculative_draft_tensor_parallel_size", "ngram_prompt_lookup_max", "ngram_prompt_lookup_min"}
_APPLIED = ({k for _, k, _ in _SOURCES.values() if k} | {k for _, k in _PARALLEL.values()}
            | {"other_flags", "positional_args", "entrypoint", "max_paddings"})  # max_paddings: api.engine_for
API_SERVER = "vllm.entrypoints.openai.api_server"
API_SERVER_TAG_FROM = (0, 10, 0)
"""The first vLLM whose OpenAI server module takes an optional positional (``model_tag``, ``nargs="?"``, in
``entrypoints/openai/cli_args.py :: make_arg_parser``, read in the 0.10.0 and 0.11.0 wheels), which that module's
``__main__`` never reads (only ``vllm serve`` makes it the model); 0.9.0–0.9.2 declare it on ``vllm serve`` only, so
their server module's parser exits on any positional ("unrecognized arguments")."""


def _shown(key: str, value: Any) -> str:
    """``--flag value`` as a launch line writes it (a long value cut at 100 characters)."""
    v = "" if value is True else f" {value}"
    return "--" + key.replace("_", "-") + (v if len(v) <= 101 else v[:98] + "…")


def other_settings(extra: dict[str, Any]) -> tuple[list[str], list[str]]:
    """(refused, unapplied) of the launch settings in ``extra["engine_kwargs"]`` that no field above reads (module
    docstring), each naming the flag and the record file (``extra["record_file"]``) it came from."""
    kwargs = extra.get("engine_kwargs") or {}
    where = extra.get("record_file") or "the run's record"
    others = {**{k: v for k, v in kwargs.items() if k not in _APPLIED}, **(kwargs.get("other_flags") or {})}
    # what only the engine's resolved config states (a launch flag saying it too is read above, once)
    launched_spec = any(others.get(k) is not None for k in _SPECULATIVE)
    resolved = {k: v for k, v in _resolved_others(extra).items()
                if others.get(k) is None and not (k in _SPECULATIVE and launched_spec)}
    refused, unapplied = [], []
    for key, value in {**others, **{k: v for k, (v, _) in resolved.items()}}.items():
        if key in _HARMLESS or value is None or (key == "dtype" and str(value).lower() in _SAME_DTYPE):
            continue
        said = (f"{where} records in its resolved config {resolved[key][1]} {_value(value)}" if key in resolved
                else f"{where} launches vLLM with {_shown(key, value)}")
        if key in _SPECULATIVE:
            refused.append(f"{said}: speculative decoding (a draft proposes "
                           "several tokens that the model verifies in one step), which kvledger's replay does not "
                           "model: it steps one token per sequence per step, so every latency and throughput it "
                           "compares would be another engine's. kvledger spec-decode estimates speculative "
                           "decoding's gain apart.")
        elif key == "quantization" and (key in resolved or launch_quantization(extra) is not None):
            continue  # replayed as simulate -q (launch_quantization), or told once the model is read (resolved_quant)
        elif key == "quantization" and str(value).lower() in ON_LOAD_REFUSED:
            refused.append(f"{said}: {ON_LOAD_REFUSED[str(value).lower()]}")
        else:
            unapplied.append(_shown(key, value) + (f" (resolved_config {resolved[key][1]})" if key in resolved else ""))
    return refused, unapplied


def _resolved_others(extra: dict[str, Any]) -> dict[str, tuple[Any, str]]:
    """Launch settings the engine's resolved ``VllmConfig`` states (the reader keeps them): ``model_config``'s
    ``quantization`` and ``dtype`` (``torch.float32`` read as ``float32``), and ``speculative_config`` when not empty;
    engine_kwargs key → (value, where in the resolved config)."""
    resolved = extra.get("resolved_config") or {}
    model = resolved.get("model_config") if isinstance(resolved.get("model_config"), dict) else {}
    out = {k: (str(model[k]).removeprefix("torch."), f"model_config.{k}") for k in ("quantization", "dtype")
           if model.get(k) is not None}
    if resolved.get("speculative_config"):  # None or {}: no speculative decoding
        out["speculative_config"] = (resolved["speculative_config"], "speculative_config")
    return out


def resolved_quantization(extra: dict[str, Any]) -> str | None:
    """``model_config.quantization`` of the engine's resolved config where the launch (``engine_kwargs``) names no
    ``quantization``: the checkpoint's own format or a method it was quantized with on load (``resolved_quant``)."""
    kwargs = extra.get("engine_kwargs") or {}
    if {**kwargs, **(kwargs.get("other_flags") or {})}.get("quantization") is not None:
        return None
    got = _resolved_others(extra).get("quantization")
    return None if got is None else str(got[0])


def _value(value: Any) -> str:
    """A resolved setting as the record writes it, a long one cut at 100 characters."""
    import json

    text = json.dumps(value, default=str) if isinstance(value, (dict, list)) else str(value)
    return text if len(text) <= 100 else text[:99] + "…"


def positional_notes(extra: dict[str, Any], version: str | None) -> list[str]:
    """What vLLM ``version`` did with the launch arguments its parser reads as positionals (module docstring): one
    under the OpenAI server module from 0.10.0 is its unread ``model_tag`` (a note: the engine ran without it, as the
    replay does); otherwise a WARNING that the launch as written does not parse, and the replay runs without them."""
    kwargs = extra.get("engine_kwargs") or {}
    args = [str(a) for a in kwargs.get("positional_args") or []]
    if not args:
        return []
    from kvledger.accounting.vllm_rules import parse_version
    from kvledger.errors import InputError

    try:
        ver = parse_version(version) if version else None
    except InputError:
        ver = None
    where = extra.get("record_file") or "the run's record"
    how = "one argument" if len(args) == 1 else "one argument each"
    head = (f"{where} passes {', '.join(repr(a) for a in args)} as {how} (Kubernetes hands each args entry to the "
            "process unsplit): vLLM's parser (argparse) reads an argument holding a space as a positional, not as a "
            "flag")
    api = kwargs.get("entrypoint") == API_SERVER and ver is not None
    if api and ver >= API_SERVER_TAG_FROM and len(args) == 1:
        return [f"{head}; vLLM {version}'s {API_SERVER} takes it as its optional model_tag (cli_args.py :: "
                "make_arg_parser), which that server never reads: the engine ran without it, and so does the replay"]
    if api:
        why = (f"vLLM {version}'s {API_SERVER} takes no positional (from 0.10.0 one)" if ver < API_SERVER_TAG_FROM
               else f"vLLM {version}'s {API_SERVER} takes one positional, not {len(args)}")
        why += ": its parser exits on it (unrecognized arguments), so the launch as written cannot have served the run"
    elif kwargs.get("entrypoint") == API_SERVER:  # the version unknown: both readings
        why = (f"the record names no vLLM version: {API_SERVER} from 0.10.0 takes one such argument as its unread "
               "model_tag (the engine ran without it), and before 0.10.0 its parser exits on it")
    elif kwargs.get("entrypoint") == "vllm serve":  # entrypoints/cli/serve.py: the positional model_tag is the model
        why = ("vllm serve takes its one positional as the model to serve (entrypoints/cli/serve.py), so the launch as "
               "written cannot have served the run")
    else:
        why = "the record does not say which vLLM entry point and version parsed it, so what it did is not known"
    return [f"WARNING: {head}; {why}; the replay runs without it"]


def _lookup(extra: dict[str, Any], where: tuple[str, str] | None, kw_key: str | None, kv_key: str | None = None):
    resolved = extra.get("resolved_config") or {}
    if where is not None and isinstance(resolved.get(where[0]), dict) and resolved[where[0]].get(where[1]) is not None:
        return resolved[where[0]][where[1]]
    kwargs = extra.get("engine_kwargs") or {}
    if kw_key is not None and kwargs.get(kw_key) is not None:
        return kwargs[kw_key]
    kv = extra.get("kv_cache") or {}
    if kv_key is not None and kv.get(kv_key) is not None:
        return kv[kv_key]
    return None


def recorded_settings(extra: dict[str, Any]) -> RecordedSettings:
    """The settings in a run's ``metadata.extra`` (the reader keeps ``vllm_version``, ``engine_kwargs``, ``kv_cache``
    and the resolved ``scheduler_config``/``parallel_config``/``cache_config``)."""
    out = RecordedSettings()
    for name, (where, kw_key, kv_key) in _SOURCES.items():
        v = _lookup(extra, where, kw_key, kv_key)
        if v is not None:
            out.flags[name] = v
    if out.flags.get("kv_cache_dtype") == "auto":
        out.flags.pop("kv_cache_dtype")
    if (q := launch_quantization(extra)) is not None:  # replayed as simulate -q plans it (module docstring)
        out.flags["quantization"] = q
    out.backend = extra.get("backend") if isinstance(extra.get("backend"), str) else None
    if out.backend == "sglang":  # SGLang's bench_serving names the server it measured
        out.flags["policy"] = "sglang"
    # the engine's own version: SGLang's server_info.version for an SGLang run (a vllm_version beside it is not its)
    version = extra.get("sglang_version") if out.flags.get("policy") == "sglang" else extra.get("vllm_version")
    out.engine_version = version if isinstance(version, str) else None
    out.pp = int(_lookup(extra, *_PARALLEL["pp"]) or 1)
    out.dp = int(_lookup(extra, *_PARALLEL["dp"]) or 1)
    out.ep = bool(_lookup(extra, *_PARALLEL["ep"]) or False)
    if out.ep and out.dp == 1:  # one engine: experts whole over its TP ranks (accounting/expert_parallel.py)
        out.flags["enable_expert_parallel"] = True
    if out.dp > 1:
        what = f"data parallel {out.dp}" + (" with expert parallelism (experts sharded over the ranks, tokens "
                                            "exchanged all-to-all)" if out.ep else "")
        out.unmodelled.append(f"{what}: {out.dp} engines that share the load, which kvledger would replay as one "
                              "engine on one GPU's share")
    if out.pp > 1:
        out.unmodelled.append(f"pipeline parallel {out.pp}: stages kvledger does not model as one engine")
    out.refused, out.unapplied = other_settings(extra)
    out.positional = positional_notes(extra, out.engine_version)
    unused, where = unused_keys(extra), extra.get("record_file") or "the run's record"
    if unused:  # grouped: the top-level keys, then "hardware: a, b" and so on
        groups: dict[str, list[str]] = {}
        for key in unused:
            head, _, sub = key.rpartition(".")
            groups.setdefault(head, []).append(sub)
        out.unused.append(f"recorded in {where}, not used by the replay: " + "; ".join(
            (f"{head}: " if head else "") + ", ".join(subs)
            for head, subs in sorted(groups.items(), key=lambda g: g[0] != "")))  # top-level keys first
    return out


def unused_keys(extra: dict[str, Any]) -> list[str]:
    """The keys of the run's record (``extra["record_keys"]``, the LLMServingSim reader's) the replay does not use:
    besides the model, the vLLM version, the GPU's name and count and the launch ``engine_kwargs``, it reads only the
    ``kv_cache`` keys and the ``resolved_config`` sections ``_SOURCES`` and ``_PARALLEL`` name that the reader kept."""
    kept = extra.get("resolved_config") or {}
    sections = ({w[0] for w, _, _ in _SOURCES.values() if w} | {w[0] for w, _ in _PARALLEL.values()}
                | {"model_config", "speculative_config"})  # the weights' format and speculative decoding: checked
    used = ({"model", "vllm_version", "engine_kwargs", "hardware.device_name", "hardware.device_count"}
            | {f"kv_cache.{k}" for _, _, k in _SOURCES.values() if k}
            | {f"resolved_config.{s}" for s in sections if s in kept})
    return [k for k in extra.get("record_keys") or () if k not in used]
