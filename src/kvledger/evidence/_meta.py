"""Run metadata that benchmark files state in free-form places: GPU type and count, request rate, percentile keys.

vLLM copies ``--metadata KEY=VALUE`` pairs to the top level of its result, llm-d and
InferenceX rows name the accelerator, and users of every tool attach labels; these
helpers look for the usual spellings and nothing else (no guessing from model names).
"""

from __future__ import annotations

import math
import re
from typing import Any

__all__ = ["HARDWARE_KEYS", "GPU_COUNT_KEYS", "stated_hardware", "stated_gpu_count", "rate_or_none", "FLAT_STAT",
           "parse_flat_stat", "hub_id_of_cache_path", "stated_model"]

HARDWARE_KEYS = ("hardware", "hw", "gpu", "gpu_type", "gpu_name", "gpu_model", "accelerator", "accelerator_type",
                 "device")
GPU_COUNT_KEYS = ("num_gpus", "gpu_count", "n_gpus", "gpus", "num_accelerators", "accelerator_count")


def stated_hardware(*sources: dict[str, Any] | None) -> str | None:
    """The first GPU name found under a usual key (``hardware``, ``gpu``, ``accelerator``, ...), else None."""
    for src in sources:
        if not isinstance(src, dict):
            continue
        for k in HARDWARE_KEYS:
            v = src.get(k)
            if isinstance(v, str) and v.strip():
                return v.strip()
    return None


def stated_gpu_count(*sources: dict[str, Any] | None) -> int | None:
    """The first positive whole GPU count under a usual key (``num_gpus``, ``gpu_count``, ...), else None."""
    for src in sources:
        if not isinstance(src, dict):
            continue
        for k in GPU_COUNT_KEYS:
            v = src.get(k)
            try:
                n = float(v)
            except (TypeError, ValueError):
                continue
            if math.isfinite(n) and n >= 1 and n == int(n):
                return int(n)
    return None


def rate_or_none(value: Any) -> float | None:
    """A request rate, req/s: numbers as floats, "inf" (vLLM's spelling for as-fast-as-possible) as inf, else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return None
    return None


# : vLLM/SGLang/InferenceX flat statistic keys: mean_ttft_ms, median_tpot_ms, p99.9_itl_ms, p99_e2e_latency_ms,
# median_ttft (s).
FLAT_STAT = re.compile(r"^(mean|median|std|p\d+(?:\.\d+)?)_(ttft|tpot|itl|e2el|e2e_latency)(_ms)?$")
_FLAT_METRIC = {"ttft": "ttft", "tpot": "tpot", "itl": "itl", "e2el": "e2e", "e2e_latency": "e2e"}


def parse_flat_stat(key: str) -> tuple[str, str, float] | None:
    """``"p99.9_itl_ms"`` → ("p99.9", "itl", 1e-3); ``"median_ttft"`` → ("median", "ttft", 1.0); None if no match.

    The third item is seconds per unit: ``_ms`` keys are milliseconds; keys without the
    suffix are seconds (InferenceX's trimmed client and its processed rows, docs/formats.md §6).
    """
    m = FLAT_STAT.match(key)
    if not m:
        return None
    stat, metric, ms = m.groups()
    return stat, _FLAT_METRIC[metric], (1e-3 if ms else 1.0)


# the Hugging Face cache's folder for a model: huggingface_hub file_download.py repo_folder_name() names it
# "models--" + repo_id with "/" spelled "--", and a revision's files lie under its snapshots/<commit hash>/
_HF_CACHE_SNAPSHOT = re.compile(r"(?:^|/)models--([^/]+?)--([^/]+)/snapshots/[^/]+/?$")


def hub_id_of_cache_path(model: str) -> str | None:
    """The Hub id a Hugging Face cache snapshot folder holds ("/models/models--openai--gpt-oss-120b/snapshots/b5c9…/"
    → "openai/gpt-oss-120b"; a benchmark run with ``--model`` pointed at the cache records this path), else None."""
    m = _HF_CACHE_SNAPSHOT.search(model.strip())
    return f"{m.group(1)}/{m.group(2)}" if m else None


def stated_model(model: Any, definitions: list[str], extra: dict[str, Any]) -> str | None:
    """The model a file names: a Hugging Face cache snapshot path read as its Hub id (the path kept in
    ``extra["model_path"]`` and the reading said in ``definitions``), any other string as given, else None."""
    if not isinstance(model, str) or not model.strip():
        return None
    hub_id = hub_id_of_cache_path(model)
    if hub_id is None:
        return model
    extra["model_path"] = model
    definitions.append(f"model {model!r} is a Hugging Face cache snapshot folder (models--ORG--NAME/snapshots/"
                       f"REVISION): read as {hub_id}")
    return hub_id
