"""Measured figures of a GPU beyond its datasheet: the HBM bandwidth a STREAM-class benchmark sustains
(``catalog/data/gpu_hbm_measured.csv``) and the SM (or engine) boost clock (``catalog/data/gpu_clocks.csv``), each row
with its source; what the step cost of a GPU without measured kernel tables carries (``accounting.carried_kernels``).

The bandwidth rows are BabelStream's Copy and Triad kernels from one public harness (the Azure AI Benchmarking Guide,
FP64 arrays far larger than the L2), so their ratios between GPUs compare like with like; the H100 SXM's row is the
reference the roofline's default bandwidth share was validated on (``REFERENCE_GPU``).
"""

from __future__ import annotations

import csv
from functools import cache
from importlib import resources
from typing import NamedTuple

__all__ = ["HbmMeasured", "hbm_measured", "boost_clock", "REFERENCE_GPU", "hbm_rows"]

#: the GPU whose measured runs the roofline's flat 0.8 bandwidth share and the error bands were validated on
REFERENCE_GPU = "nvidia_h100_sxm"


class HbmMeasured(NamedTuple):
    """One GPU's sustained HBM bandwidth: BabelStream ``copy_bytes_per_s`` and ``triad_bytes_per_s`` (B/s, from TB/s
    = 10^12 B/s), the ``method``, ``source`` (words, printed) and ``licence`` of the figures; the row's ``references``
    (its address, never printed) stay in the file."""

    copy_bytes_per_s: float
    triad_bytes_per_s: float
    method: str
    source: str
    licence: str


def _read(name: str) -> list[dict[str, str]]:
    path = resources.files("kvledger.catalog") / "data" / name
    with path.open(encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


@cache
def hbm_rows() -> dict[str, HbmMeasured]:
    """Every row of ``gpu_hbm_measured.csv`` by catalog GPU id."""
    return {r["gpu_id"]: HbmMeasured(float(r["copy_tb_s"]) * 1e12, float(r["triad_tb_s"]) * 1e12, r["method"],
                                     r["source"], r["licence"]) for r in _read("gpu_hbm_measured.csv")}


def hbm_measured(gpu_id: str) -> HbmMeasured | None:
    """The measured sustained HBM bandwidth of a catalog GPU, None where no public figure was found."""
    return hbm_rows().get(gpu_id)


@cache
def _clocks() -> dict[str, tuple[float, str]]:
    return {r["gpu_id"]: (float(r["boost_clock_mhz"]) * 1e6, r["source"]) for r in _read("gpu_clocks.csv")}


def boost_clock(gpu_id: str) -> tuple[float, str] | None:
    """(boost clock in Hz, its source) of a catalog GPU, None where the table has no row."""
    return _clocks().get(gpu_id)
