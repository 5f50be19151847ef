"""What ``kvledger doctor`` knows before diagnosing: the log, the model and GPU it resolves, the settings it reads, and
ledger plans built from them.

Settings come from the log (argument echo, engine-config echo, capacity lines) and otherwise from the
engine's defaults as the ledger applies them; each carries its source. Three plans are built:
* ``model_plan``: the ledger from the model and GPU alone (every memory term modelled) — what ``kvledger plan`` prints;
* ``log_memory_plan``: the ledger given the log's printed available KV memory (``--available-kv-memory``);
* ``log_blocks_plan``: the ledger given the log's block count (``--num-gpu-blocks-override``), to check the
  printed tokens and concurrency formulas exactly.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import PurePath
from typing import Any

from kvledger.accounting.plan import Plan, build_plan
from kvledger.accounting.settings import make_settings
from kvledger.accounting.vllm_rules import era, parse_version, printed_capacity_lines
from kvledger.analyses.doctor.checks import check_capacity, check_log_values, check_setting, printed_figures
from kvledger.analyses.doctor.log_gpu import resolve_log_gpu
from kvledger.analyses.doctor.version_from_weights import weights_release_note
from kvledger.catalog.gpus import GpuSpec, custom_gpu
from kvledger.catalog.models import load_model
from kvledger.catalog.modelspec import ModelSpec
from kvledger.errors import InputError, KvLedgerError
from kvledger.evidence.vllm_log import VllmLog
from kvledger.ranges import check_options
from kvledger.units import GiB

__all__ = ["DoctorContext", "build_context", "plan_with", "log_blocks", "printed_figures", "stand_in_gpu"]

_KV_DTYPES = {"auto": "auto", "bfloat16": "bf16", "bf16": "bf16", "float16": "fp16", "fp16": "fp16", "half": "fp16",
              "fp8": "fp8", "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2"}
_FROM_LOG = ("max_model_len", "gpu_memory_utilization", "max_num_batched_tokens", "max_num_seqs", "block_size",
             "num_gpu_blocks_override", "max_cudagraph_capture_size")


@dataclass(frozen=True)
class DoctorContext:
    """The resolved inputs of a diagnosis. ``settings`` are ``make_settings`` keywords; ``sources`` says where each
    came from."""

    log: VllmLog
    model: ModelSpec | None
    model_source: str
    gpu: GpuSpec | None
    gpu_source: str
    settings: dict[str, Any]
    sources: dict[str, str]
    replicas: int
    prefix_share: float | None
    model_plan: Plan | None = None
    log_memory_plan: Plan | None = None
    log_blocks_plan: Plan | None = None
    log_blocks: tuple[int | None, int | None, str] = (None, None, "")
    notes: tuple[str, ...] = field(default_factory=tuple)
    gpu_known: bool = False  # --gpu, or the device the log names (else a generic GPU of the log's device total)
    weights_release: str | None = None  # version_from_weights' note (also in ``notes``), or None


def _same_model(given: str, spec: ModelSpec, named: str) -> bool | None:
    """Whether the log's model name and the --model spec are the same model (None: cannot tell, e.g. a local config)."""
    from kvledger.catalog.models import resolve_bundled

    logged = resolve_bundled(named) or resolve_bundled(PurePath(named).name)
    if spec.catalog_id and logged is not None:
        return spec.catalog_id == logged.hf_id
    if PurePath(given).suffix == ".json" or given.startswith((".", "/", "~")):
        return None
    mine = _name_key(spec.catalog_id or spec.name)
    if logged is not None:
        return _same_key(mine, _name_key(logged.hf_id))
    parts = PurePath(named).parts
    if any(_same_key(mine, _name_key(p)) for p in parts[-2:] if p != parts[0] or len(parts) == 1):
        return True  # the file or folder names the model (an org such as "meta-llama" is not compared)
    # a hub id names its model; a local path (/models/x, ~/.cache/…) may name anything, so only a hub id can differ
    return None if named.startswith((".", "/", "~")) or len(parts) > 2 else False


def _same_key(a: str, b: str) -> bool:
    """Equal, or one a prefix of the other up to a separator ("qwen3-8b" and "qwen3-8b-q4_k_m.gguf")."""
    short, long = sorted((a, b), key=len)
    if long == short:
        return True
    return any(c.isdigit() for c in short) and long.startswith(short) and long[len(short)] in "-._"


_VARIANT = re.compile(r"(-(instruct|chat|hf|it|base|fp8|fp8-dynamic|awq|gptq|int4|int8|w8a8|w4a16|bnb-4bit))+$")


def _name_key(name: str) -> str:
    """A model name without org, ``Meta-`` prefix and variant suffixes (Instruct, FP8, AWQ, …): the same
    architecture."""
    base = PurePath(name.split(" (config of ")[0]).name.lower().removeprefix("meta-")
    return _VARIANT.sub("", base)


def model_mismatch(log: VllmLog, given: str, spec: ModelSpec) -> str | None:
    """The warning when ``--model`` names another model than the one the log serves (None when they agree or it cannot
    be told)."""
    st = log.startup
    named = st.model or st.served_model_name
    if not named or _same_model(given, spec, named) is not False:
        return None
    field_name = "model" if st.model else "served_model_name"
    return (f"--model {given} is not the model this log serves: the log names {named!r} (line "
            f"{st.lines.get(field_name)}). "
            f"The comparison below is the ledger for {given}, so it will not match the log's figures; drop --model to "
            f"use "
            "the log's model (when bundled) or pass its config.json")


def _resolve_model(log: VllmLog, name: str | None) -> tuple[ModelSpec | None, str]:
    if name:
        spec = load_model(name)
        named = log.startup.model or log.startup.served_model_name
        return spec, f"--model {name}" + (f" (the log names {named!r})" if named and model_mismatch(log, name,
            spec) else "")
    st = log.startup
    for field_name in ("model", "served_model_name"):
        text = getattr(st, field_name)
        if not text:
            continue
        for candidate in dict.fromkeys((text, PurePath(text).name)):
            try:
                return load_model(candidate, allow_hub=False), f"from the log, line {st.lines.get(field_name)}: {text}"
            except KvLedgerError:
                continue
    named = st.model or st.served_model_name
    return None, (f"the log's model {named!r} is not a bundled model or a local config" if named else "the log names "
        "no model") + \
        "; pass --model (a bundled name or a config.json) for the ledger comparison"


def _tp(log: VllmLog) -> tuple[int, str]:
    st = log.startup
    if st.tensor_parallel_size:
        return st.tensor_parallel_size, f"log line {st.lines['tensor_parallel_size']}"
    ranks = [int(m.group(1)) for w in st.workers if (m := re.match(r"Worker_TP(\d+)", w))]
    if ranks:
        tp = max(2, max(ranks) + 1)
        return tp, (f"at least {tp}: Worker_TP<rank> tags (up to rank {max(ranks)}) appear only with V1's multiprocess "
                    "executor, used when TP > 1")
    return 1, "1 (the log prints no tensor_parallel_size; vLLM's default)"


def _settings(log: VllmLog, engine_version: str | None) -> tuple[dict[str, Any], dict[str, str], list[str]]:
    st, notes = log.startup, []
    version = engine_version or log.rules_version
    kw: dict[str, Any] = {"engine": "vllm", "engine_version": version}
    src = {"engine_version": f"--engine-version {engine_version}" if engine_version else log.rules_reason}
    kw["tp"], src["tp"] = _tp(log)
    if st.pipeline_parallel_size:
        kw["pp"], src["pp"] = st.pipeline_parallel_size, f"log line {st.lines['pipeline_parallel_size']}"
    for name in _FROM_LOG:
        value = getattr(st, name)
        kw[name], src[name] = value, (f"log line {st.lines[name]}" if value is not None else "vLLM default for this "
            "version (ledger rule)")
    dtype = st.kv_cache_dtype or "auto"
    kw["kv_cache_dtype"] = _KV_DTYPES.get(dtype.lower(), dtype)
    src["kv_cache_dtype"] = (
        f"log line {st.lines['kv_cache_dtype']}" if st.kv_cache_dtype else "auto (vLLM default: the model dtype)"
    )
    if kw["kv_cache_dtype"] not in _KV_DTYPES.values():
        notes.append(f"kv_cache_dtype {dtype!r} is not one the ledger models; the comparison uses the model dtype")
        kw["kv_cache_dtype"] = "auto"
    return kw, src, notes


def plan_with(model: ModelSpec, gpu: GpuSpec, settings: dict[str, Any], **overrides: Any) -> Plan | str:
    """A ledger plan for these settings (roofline and advice off), or the ledger's error message."""
    try:
        s = make_settings(**{**settings, **overrides})
        return build_plan(model, gpu, s, with_roofline=False, with_advice=False)
    except InputError as err:
        return str(err)


def stand_in_gpu(log: VllmLog, gpu: GpuSpec | None, settings: dict[str, Any]) -> GpuSpec:
    """The GPU for plans that take the KV budget or the block count from the log: the given one, else a stand-in
    whose total is (available KV + weights) ÷ utilization when the log prints them (a lower bound), else 80 GiB.
    Its total only picks vLLM's default batch limits for those plans."""
    if gpu is not None:
        return gpu
    st = log.startup
    util = settings.get("gpu_memory_utilization") or 0.9
    known = (st.available_kv_bytes or 0) + (st.weights_bytes or 0)
    total = min(max(int(known / util), 1 << 30), 1 << 45) if known else 80 * GiB  # within custom_gpu's plausible range
    return custom_gpu("unknown GPU (stand-in)", total, 1e12, 1e14)


def log_blocks(log: VllmLog, plan: Plan | None) -> tuple[int | None, int | None, str]:
    """The log's block count (low, high) and how it was found: printed, the override, or inverted from the
    printed "GPU KV cache size" under this version's rule (docs/engine-model.md §1.7) using the plan's layout."""
    st = log.startup
    if st.num_gpu_blocks_override:
        n = st.num_gpu_blocks_override
        return n, n, f"num_gpu_blocks_override, line {st.lines['num_gpu_blocks_override']}"
    if st.num_gpu_blocks:
        return st.num_gpu_blocks, st.num_gpu_blocks, f"printed, line {st.lines['num_gpu_blocks']}"
    if st.kv_cache_tokens is None or plan is None or plan.layout is None:
        return None, None, "the log prints neither a block count nor a KV cache size the ledger can invert"
    ver = parse_version(plan.memory.engine_version)
    L, B, g = plan.memory.max_model_len, plan.memory.block_size, len(plan.layout.groups)
    R = plan.layout.blocks_per_request(L, plan.inflight_tokens)
    n0 = st.kv_cache_tokens * R // L if era(ver) == "v1-0.24" else st.kv_cache_tokens * g // B
    # Every printed capacity figure narrows n: with g groups the tokens line alone allows g counts, and the printed
    # concurrency (n / R(L), 2 decimals) tells them apart (vllm-project/vllm 0.10.2, Qwen3-Next at TP 2: 7,160–7,163
    # from the tokens, 7,162 with the concurrency, the count vLLM reported).
    printed = {"kv_cache_tokens": st.kv_cache_tokens}
    if st.max_concurrency is not None and st.concurrency_context_tokens in (None, L):
        printed["max_concurrency"] = st.max_concurrency
    figures = {n: printed_figures(printed_capacity_lines(ver, n, B, g, L, R))
               for n in range(max(1, n0 - 2 * g - 2), n0 + 2 * g + 3)}
    found = [n for n, f in figures.items() if f.get("kv_cache_tokens") == st.kv_cache_tokens]
    both = [n for n in found if all(figures[n].get(k) == v for k, v in printed.items())]
    if not both:  # the concurrency matched no count the tokens allow: the tokens line alone, and said so
        printed = {"kv_cache_tokens": st.kv_cache_tokens}
    found = both or found
    if not found:
        return (
            None,
            None,
            f"no block count reproduces the printed {st.kv_cache_tokens:,} tokens under vLLM "
            f"{plan.memory.engine_version}'s rule",
        )
    rule = "int(n / R(L) × L)" if era(ver) == "v1-0.24" else ("(n // groups) × block_size" if g > 1 else "n × "
        "block_size")
    return (
        min(found),
        max(found),
        f"from the printed KV cache size, line {st.lines['kv_cache_tokens']}: tokens = {rule}"
        + (f", and the printed concurrency, line {st.lines.get('max_concurrency')}" if len(printed) > 1 else ""),
    )


def build_context(log: VllmLog, *, model: str | None = None, gpu: str | None = None, replicas: int = 1,
                  prefix_share: float | None = None, engine_version: str | None = None) -> DoctorContext:
    """Resolve model, GPU and settings, and build the three ledger plans.

    Raises:
        InputError: replicas < 1, prefix_share outside [0, 1]; UnknownNameError/ConfigError from --model/--gpu.
    """
    check_options("doctor", {"replicas": replicas, "prefix_share": prefix_share})  # kvledger.ranges
    spec, msrc = _resolve_model(log, model)
    g, gsrc, known = resolve_log_gpu(log, gpu)
    device_source = f"{g.name}, --gpu {gpu}" if gpu and g else gsrc.split(";")[0]
    check_log_values(log, g.memory_bytes if g is not None else None, device_source)
    kw, src, notes = _settings(log, engine_version)
    plans: list[Plan | None] = [None, None, None]
    release = None
    if spec is not None:
        st = log.startup
        if g is not None:
            plans[0] = plan_with(spec, g, kw)
            if engine_version is None:  # the log's weights may name the release its rules came from
                release = weights_release_note(log, plans[0], lambda v: plan_with(spec, g, {**kw, "engine_version": v}))
                notes += [release] if release else []
        sg = stand_in_gpu(log, g, kw)
        if st.available_kv_bytes:
            plans[1] = plan_with(spec, sg, kw, available_kv_memory_bytes=st.available_kv_bytes)
        for i, p in enumerate(plans):
            if isinstance(p, str):
                notes.append(f"ledger: {p}")
                plans[i] = None
        base = plans[1] or plans[0] or plan_with(spec, sg, kw)
        check_capacity(log, base if not isinstance(base, str) else None, g.memory_bytes if g else None,
                       device_source)
        blocks = log_blocks(log, base if not isinstance(base, str) else None)
        if blocks[0] is not None and st.num_gpu_blocks is None and st.num_gpu_blocks_override is None:
            check_setting(log, "kv_cache_tokens", "num_gpu_blocks_override", blocks[0], st.lines.get("kv_cache_tokens"),
                          f"the block count behind the printed KV cache size ({st.kv_cache_tokens:,} tokens)")
        if blocks[0] is not None:
            p = plan_with(spec, sg, kw, num_gpu_blocks_override=blocks[0])
            plans[2] = p if not isinstance(p, str) else None
    else:
        blocks = log_blocks(log, None)
    return DoctorContext(log, spec, msrc, g, gsrc, kw, src, replicas, prefix_share, plans[0], plans[1], plans[2],
                         blocks, tuple(notes), gpu_known=known, weights_release=release)
