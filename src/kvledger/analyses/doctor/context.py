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
from typing import Any

from kvledger.accounting.plan import Plan, build_plan
from kvledger.accounting.settings import make_settings
from kvledger.accounting.vllm_rules import era, parse_version, printed_capacity_lines
from kvledger.analyses.doctor.checks import check_capacity, check_log_values, check_setting, printed_figures
from kvledger.analyses.doctor.launch_len import auto_len_notes, read_launch_len
from kvledger.analyses.doctor.log_model import resolve_log_model
from kvledger.analyses.doctor.stand_in import log_or_profile_gpu, stand_in_gpu
from kvledger.analyses.doctor.version_from_weights import weights_release_note
from kvledger.catalog.gpus import GpuSpec
from kvledger.catalog.modelspec import ModelSpec
from kvledger.errors import InputError
from kvledger.evidence.vllm_log import VllmLog
from kvledger.ranges import check_options

__all__ = ["LAUNCH_NOTE", "DoctorContext", "build_context", "plan_with", "log_blocks", "printed_figures",
           "stand_in_gpu"]

_KV_DTYPES = {"auto": "auto", "bfloat16": "bf16", "bf16": "bf16", "float16": "fp16", "fp16": "fp16", "half": "fp16",
              "fp8": "fp8", "fp8_e4m3": "fp8_e4m3", "fp8_e5m2": "fp8_e5m2"}
KV_DTYPES = _KV_DTYPES  # vLLM's --kv-cache-dtype words → the ledger's (doctor's scrape reading too)
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
    own_release_plan: Plan | None = None  # --engine-version given: ``model_plan`` under the log's own rules


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


def _newer_than_read(version: str | None) -> list[str]:
    """plan's note (``accounting.notes.vllm_newer_than_read``) when the rules' version is newer than the newest
    release whose code was read: the newest rules are then applied to it."""
    from kvledger.accounting import vllm_rules as R
    from kvledger.accounting.notes import vllm_newer_than_read
    from kvledger.accounting.vllm_releases import unknown_release_note
    from kvledger.errors import InputError

    try:
        v = R.parse_version(version) if version else None
    except InputError:
        return []
    if v is None:
        return []
    newer = [vllm_newer_than_read(".".join(map(str, v)), R.LATEST)] if v > R.parse_version(R.LATEST) else []
    return newer + [n for n in [unknown_release_note(v)] if n]  # --engine-version 0.19.7: no such release


_FLAGS = {"tp": "--tensor-parallel-size", "max_model_len": "--max-model-len",
          "gpu_memory_utilization": "--gpu-memory-utilization", "max_num_seqs": "--max-num-seqs"}
"""The launch settings ``doctor`` takes as flags, for a log that does not print them (one without its start-up)."""


def _num(value: float, sep: str = "") -> str:
    """A launch setting as a flag takes it: a whole number in full (10485760, not 1.04858e+07; ``sep`` "," in prose:
    10,485,760), a fraction as %g."""
    return f"{value:{sep}}" if isinstance(value, int) else f"{value:g}"


def _given(kw: dict[str, Any], src: dict[str, str], printed: dict[str, Any], given: dict[str, Any]) -> list[str]:
    """Apply the launch flags ``given`` where the log printed no value (``printed``: the setting's value as printed,
    or None); where it did, the log's value is kept and a note says the flag was not used."""
    notes = []
    for name, value in given.items():
        if value is None:
            continue
        flag = _FLAGS[name]
        if printed.get(name) is None:
            kw[name], src[name] = value, f"{flag} {_num(value)} (the log does not print it)"
        elif printed[name] != value:
            notes.append(f"{flag} {_num(value)} not used: the log prints {name} {_num(printed[name])} ({src[name]}), "
                         "the setting the server ran with")
    return notes


LAUNCH_NOTE = "launch settings: "
"""How the note begins that names the settings the ledger planned with, for a log that prints none of them."""


def _launch_note(log: VllmLog, plan: Plan | None, src: dict[str, str]) -> list[str]:
    """For a log that prints none of the ``_FLAGS`` settings (no start-up in it): the values the ledger planned with
    and where each came from, so a default is not taken for the server's."""
    st = log.startup
    if plan is None or st.tensor_parallel_size is not None or any(getattr(st, n) is not None for n in _FLAGS
                                                                   if n != "tp"):
        return []
    m = plan.memory
    values = {"tp": plan.settings.tp, "max_model_len": m.max_model_len, "gpu_memory_utilization": m.fraction,
              "max_num_seqs": m.max_num_seqs}
    why = {n: src[n][len(f"{values[n]:g} ("):-1] if src[n].startswith(f"{values[n]:g} (") else src[n] for n in _FLAGS}
    said = ", ".join(f"{n} {_num(values[n], ',')} [{why[n]}]" for n in _FLAGS)
    return [f"{LAUNCH_NOTE}the log prints none (no start-up in it), so the ledger plans with {said}; give the "
            "server's own with " + ", ".join(_FLAGS.values())]


def _settings(log: VllmLog, engine_version: str | None,
              given: dict[str, Any] | None = None) -> tuple[dict[str, Any], dict[str, str], list[str]]:
    st, notes = log.startup, []
    version = engine_version or log.rules_version
    kw: dict[str, Any] = {"engine": "vllm", "engine_version": version}
    src = {"engine_version": f"--engine-version {engine_version}" if engine_version else log.rules_reason}
    notes += _newer_than_read(version)
    kw["tp"], src["tp"] = _tp(log)
    printed = {"tp": st.tensor_parallel_size, **{n: getattr(st, n) for n in _FLAGS if n != "tp"}}
    if st.pipeline_parallel_size:
        kw["pp"], src["pp"] = st.pipeline_parallel_size, f"log line {st.lines['pipeline_parallel_size']}"
    for name in _FROM_LOG:
        value = getattr(st, name)
        kw[name], src[name] = value, (f"log line {st.lines[name]}" if value is not None else "vLLM default for this "
            "version (ledger rule)")
    if (st.quantization or "").strip().lower() == "fp8":  # vLLM's online FP8: planned as `kvledger plan -q fp8`
        kw["quantization"], src["quantization"] = "fp8", f"log line {st.lines.get('quantization')}"
    dtype = st.kv_cache_dtype or "auto"
    kw["kv_cache_dtype"] = _KV_DTYPES.get(dtype.lower(), dtype)
    src["kv_cache_dtype"] = (
        f"log line {st.lines['kv_cache_dtype']}" if st.kv_cache_dtype else "auto (vLLM default: the model dtype)"
    )
    if kw["kv_cache_dtype"] not in _KV_DTYPES.values():
        notes.append(f"kv_cache_dtype {dtype!r} is not one the ledger models; the comparison uses the model dtype")
        kw["kv_cache_dtype"] = "auto"
    return kw, src, notes + _given(kw, src, printed, given or {})


def plan_with(model: ModelSpec, gpu: GpuSpec, settings: dict[str, Any], **overrides: Any) -> Plan | str:
    """A ledger plan for these settings (roofline and advice off), or the ledger's error message."""
    try:
        s = make_settings(**{**settings, **overrides})
        return build_plan(model, gpu, s, with_roofline=False, with_advice=False)
    except InputError as err:
        return str(err)


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
                  prefix_share: float | None = None, engine_version: str | None = None,
                  launch: dict[str, Any] | None = None) -> DoctorContext:
    """Resolve model, GPU and settings, and build the three ledger plans. ``launch``: the settings the server was
    launched with (``tp``, ``max_model_len``, ``gpu_memory_utilization``, ``max_num_seqs``; None where not given),
    used where the log does not print them.

    Raises:
        InputError: replicas < 1, prefix_share outside [0, 1], a launch setting out of range; UnknownNameError/
        ConfigError from --model/--gpu.
    """
    launch, auto = read_launch_len(launch or {}, engine_version or log.rules_version)  # as that release reads it
    launch = {k: v for k, v in launch.items() if v is not None}
    check_options("doctor", {"replicas": replicas, "prefix_share": prefix_share, **launch},
                  {k: _FLAGS[k] for k in launch})  # kvledger.ranges
    spec, msrc, stood_in = resolve_log_model(log, model)
    kw, src, notes = _settings(log, engine_version, launch)
    g, gsrc, known = log_or_profile_gpu(log, gpu, kw)  # no device total printed: the memory profile's (stand_in.py)
    device_source = f"{g.name}, --gpu {gpu}" if gpu and g else gsrc.split(";")[0]
    check_log_values(log, g.memory_bytes if g is not None else None, device_source)
    notes += auto_len_notes(kw, src, auto)
    notes += [stood_in] if stood_in else []
    plans: list[Plan | None] = [None, None, None]
    release = None
    if spec is not None:
        st = log.startup
        if g is not None:
            plans[0] = plan_with(spec, g, kw)
            if launch and isinstance(plans[0], str):  # the flags given make no plan: bad input, not a note
                raise InputError(f"{plans[0]} (doctor plans with " + ", ".join(
                    f"{_FLAGS[k]} {_num(v)}" for k, v in launch.items()) + ")")
            if engine_version is None:  # the log's weights may name the release its rules came from
                release = weights_release_note(log, plans[0], lambda v: plan_with(spec, g, {**kw, "engine_version": v}))
                notes += [release] if release else []
            elif log.rules_version:  # the log's own rules too: a check beside the forecast (startup_verdicts.py)
                own = plan_with(spec, g, {**kw, "engine_version": log.rules_version})
                plans.append(None if isinstance(own, str) else own)
        sg = stand_in_gpu(log, g, kw)
        if st.available_kv_bytes:
            plans[1] = plan_with(spec, sg, kw, available_kv_memory_bytes=st.available_kv_bytes)
        for i, p in enumerate(plans):
            if isinstance(p, str):
                notes.append(f"ledger: {p}")
                plans[i] = None
        base = plans[1] or plans[0] or plan_with(spec, sg, kw)
        notes += _launch_note(log, plans[0], src)
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
                         blocks, tuple(notes), gpu_known=known, weights_release=release,
                         own_release_plan=plans[3] if len(plans) > 3 else None)
