"""Streaming multiprocessors (NVIDIA) or compute units (AMD) per GPU, from ``catalog/data/gpu_compute_units.csv``:
what torch reports as ``multi_processor_count`` (CUDA: SMs; ROCm/HIP: CUs, one GCD on an MI250X), each with its
source. The engines size per-SM work from it (vLLM's Triton top-k/top-p buffer: ``vllm_profile.sampler_peak_bytes``).
"""

from __future__ import annotations

import csv
from functools import cache
from importlib import resources
from typing import NamedTuple

__all__ = ["ComputeUnits", "compute_units"]


class ComputeUnits(NamedTuple):
    """One GPU's streaming multiprocessors or compute units: ``count``, ``unit`` ("SM" or "CU") and ``source``."""

    count: int
    unit: str
    source: str


@cache
def _table() -> dict[str, ComputeUnits]:
    path = resources.files("kvledger.catalog") / "data" / "gpu_compute_units.csv"
    with path.open(encoding="utf-8") as fh:
        return {r["gpu_id"]: ComputeUnits(int(r["compute_units"]), r["unit"], r["source"])
                for r in csv.DictReader(fh)}


def compute_units(gpu_id: str) -> ComputeUnits | None:
    """The SMs or CUs of a catalog GPU (count, unit, source), None where the table has no row."""
    return _table().get(gpu_id)
