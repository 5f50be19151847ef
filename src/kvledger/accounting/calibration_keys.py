"""The names of the bundled step-cost calibrations (``calibrated.py``): a model's loose key and the keys of every
model with a bundled table, read from file and folder names. Apart from ``calibrated`` so that a run priced by the
roofline checks its model (``step_cost_choice.find_calibrated_cost``) without importing the calibrated models."""

from __future__ import annotations

import functools
import json
import re
from importlib import resources
from pathlib import Path

__all__ = ["SPLITWISE_MODELS", "VIDUR_GPU", "calibrated_model_keys", "calibration_model_key", "profiling_root"]


def profiling_root() -> Path:
    """The bundled profiling data (``accounting/data/profiling``)."""
    return Path(str(resources.files("kvledger.accounting") / "data" / "profiling"))


SPLITWISE_MODELS = {"llama2-70b": "meta-llama/Llama-2-70b-hf", "bloom-176b": "bigscience/bloom"}
VIDUR_GPU = {"a100-80gb": "a100", "h100-80gb": "h100", "a40": "a40"}


def calibration_model_key(name: str) -> str:
    """Loose model key: last path part, lower case, '-hf' dropped, 'llama2' → 'llama-2'."""
    key = name.strip().lower().rsplit("/", 1)[-1].removesuffix("-hf")
    return re.sub(r"^llama2-", "llama-2-", key).replace("bloom-176b", "bloom")


@functools.lru_cache(maxsize=1)
def calibrated_model_keys() -> frozenset[str]:
    """The loose model keys (``calibration_model_key``) of every bundled calibration, from file and folder names only
    (cheap: ``list_calibrated`` reads each table for its TP degrees)."""
    root, keys = profiling_root(), set(calibration_model_key(m) for m in SPLITWISE_MODELS.values())
    for file in ("vllm", "distserve"):
        table = json.loads((root / "distserve" / f"profiler-a100-80g.{file}.json").read_text())
        keys |= {calibration_model_key(m) for m in table}
    for folder in VIDUR_GPU.values():
        tables = (root / "vidur" / "compute" / folder).glob("*/*/mlp_median.csv")
        keys |= {calibration_model_key(p.parent.name) for p in tables}
    return frozenset(keys)
