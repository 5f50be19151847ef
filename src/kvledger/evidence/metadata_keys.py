"""The launch settings a ``vllm bench serve`` result records as top-level keys (``--metadata KEY=VALUE``, which vLLM
copies into the result as strings: ``tensor_parallel_size``, ``max_num_seqs``, ``max_num_batched_tokens``,
``vllm_version``, ...), kept as the run's launch record the way SGLang's ``server_info`` and LLMServingSim's
``meta.json`` are: ``extra["engine_kwargs"]`` (each value as the number or flag it spells), ``extra["vllm_version"]``
and ``extra["record_file"]`` naming where they came from. ``validate`` and ``calibrate`` replay what they can and warn
on each key they cannot (``calibration.run_record.other_settings``).
"""

from __future__ import annotations

from typing import Any

from kvledger.evidence._meta import GPU_COUNT_KEYS, HARDWARE_KEYS, parse_flat_stat
from kvledger.records import RunMetadata

__all__ = ["cap_source", "CAP_FIELD_KEY", "launch_keys", "OWN_KEYS_SUFFIX", "RECORD_SUFFIX", "SERVER_RECORD_KEYS",
           "spelled_value"]

#: the ``metadata.extra`` keys that hold the server's own record of a run (its launch settings, where they were read,
#: the engine's version: vLLM's ``--metadata`` keys, SGLang's ``server_info``); every reader of the record
#: (``calibration.run_record.recorded_settings``) reads these, whether the run is per-request or aggregate-only
SERVER_RECORD_KEYS = ("engine_kwargs", "record_file", "vllm_version", "sglang_version")
#: the end of ``extra["record_file"]`` for settings read from a result's own top-level keys
RECORD_SUFFIX = "top-level keys (vllm bench serve --metadata)"
#: the end of ``extra["record_file"]`` for settings a result states in keys of its own layout (together_runner's
#: ``tp``): compared as settings, like ``RECORD_SUFFIX``'s, when runs are joined into one sweep
OWN_KEYS_SUFFIX = "the result's own keys"
_VERSION_KEYS = ("vllm_version", "version", "engine_version")
#: short spellings of vLLM's launch flags that result files use
_ALIASES = {"tp": "tensor_parallel_size", "tp_size": "tensor_parallel_size", "pp": "pipeline_parallel_size",
            "pp_size": "pipeline_parallel_size", "dp": "data_parallel_size", "dp_size": "data_parallel_size"}
_NOT_LAUNCH = {"model_id", "model", "tokenizer_id", "num_gpu_blocks"} | set(HARDWARE_KEYS) | set(GPU_COUNT_KEYS)


#: the ``metadata.extra`` key naming the field a run's client cap (``RunMetadata.concurrency``) was read from, as the
#: file spells it (GuideLLM ``strategy.streams``, AIPerf ``concurrency``); absent: ``max_concurrency`` (vLLM, SGLang)
CAP_FIELD_KEY = "concurrency_field"


def cap_source(meta: RunMetadata, cap: int | None = None) -> str:
    """Where a run's client cap (``cap``, else ``meta.concurrency``) was read, in the file's own words: "the file's
    max_concurrency 4", "the file's strategy.streams 4", "the file's concurrency 4" (``CAP_FIELD_KEY``)."""
    field = meta.extra.get(CAP_FIELD_KEY) or "max_concurrency"
    return f"the file's {field} {cap if cap is not None else meta.concurrency:,}"


def spelled_value(v: Any) -> Any:
    """A ``--metadata`` string as the value it spells: "2" → 2, "0.9" → 0.9, "true" → True; other values as given."""
    if not isinstance(v, str):
        return v
    low = v.strip().lower()
    if low in ("true", "false"):
        return low == "true"
    for kind in (int, float):
        try:
            return kind(v.strip())
        except ValueError:
            pass
    return v


def launch_keys(path: str, obj: dict[str, Any], where: str, meta: RunMetadata, known: set[str]) -> None:
    """Put the launch settings among ``obj``'s top-level scalars (those not in ``known``, a result's own keys, nor a
    summary statistic, model, GPU or GPU count) into ``meta.extra`` (module docstring)."""
    version = next((obj[k] for k in _VERSION_KEYS if isinstance(obj.get(k), str) and obj[k].strip()), None)
    if version is not None:
        meta.extra["vllm_version"] = version.strip()
    kwargs = {k: spelled_value(v) for k, v in obj.items()
              if k not in known and k not in _NOT_LAUNCH and k not in _VERSION_KEYS and parse_flat_stat(k) is None
              and not k.endswith(("_ms", "_ms:")) and isinstance(v, (str, int, float, bool))}
    for short, full in _ALIASES.items():
        if short in kwargs:
            value = kwargs.pop(short)
            kwargs.setdefault(full, value)
    if "max_num_seqs" in kwargs:  # the load axis goodput --target --axis max_num_seqs reads (as inference-perf's)
        meta.extra["max_num_seqs"] = kwargs["max_num_seqs"]
    if kwargs:
        meta.extra["engine_kwargs"] = kwargs
        meta.extra["record_file"] = f"{path} {where}{RECORD_SUFFIX}".replace("  ", " ")
