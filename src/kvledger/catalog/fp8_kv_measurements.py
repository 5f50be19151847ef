"""Published measurements of FP8 KV against a 16-bit KV cache (``catalog/data/fp8_kv_measurements.csv``), one row per
engine × GPU × model × metric, each with its source and date in the file: what the FP8 KV analysis's caveats quote.

A row's figure is the change FP8 KV made to its metric, in % of the 16-bit run's (``fp8_change_low_pct`` …
``fp8_change_high_pct`` over the row's settings); a row without a figure records a direction only. Output cites a row
by its name, figure and unit (``Fp8KvMeasurement.citation``), never the row's source document.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache

from kvledger.catalog.prices import rows_from_text
from kvledger.errors import ConfigError

__all__ = ["Fp8KvMeasurement", "fp8_kv_measurements", "fp8_kv_measurement", "fp8_kv_measurements_from_text"]

_FILE = "fp8_kv_measurements.csv"
_COLUMNS = ("name", "engine", "gpu", "model", "setting", "metric", "fp8_change_low_pct", "fp8_change_high_pct", "unit",
            "as_of", "source", "notes")


@dataclass(frozen=True, slots=True)
class Fp8KvMeasurement:
    """One row: the change FP8 KV made to ``metric``, ``low_pct`` … ``high_pct`` % (None: a direction only, in
    ``unit``), on ``gpu`` with ``model`` under ``engine`` and ``setting``; ``source`` and ``as_of`` say where from."""

    name: str
    engine: str
    gpu: str
    model: str
    setting: str
    metric: str
    low_pct: float | None
    high_pct: float | None
    unit: str
    as_of: str
    source: str
    notes: str

    @property
    def figure(self) -> str:
        """``-4.9 … -2.4 %``, ``+3.7 %`` or the unit alone for a direction-only row."""
        if self.low_pct is None or self.high_pct is None:
            return self.unit
        one = f"{self.low_pct:+g}" if self.low_pct == self.high_pct else f"{self.low_pct:+g} … {self.high_pct:+g}"
        return f"{one} {self.unit}"

    @property
    def citation(self) -> str:
        """``fp8_kv_measurements.csv row vllm-a100-qwen3-8b-decode: decode speed (tok/s) +0.4 … +5.5 % (FP8 KV against
        auto) (NVIDIA A100 80GB, Qwen/Qwen3-8B (bf16 weights), vLLM 0.26.0)``."""
        return f"{_FILE} row {self.name}: {self.metric} {self.figure} ({self.gpu}, {self.model}, {self.engine})"


def _pct(name: str, r: dict[str, str], key: str) -> float | None:
    text = r[key].strip()
    if not text:
        return None
    try:
        v = float(text)
    except ValueError:
        v = math.nan
    if not (math.isfinite(v) and -100 < v <= 1000):
        raise ConfigError(name, f"line {r['_line']}: {key} must be a change in % in (-100, 1000], got {text!r}")
    return v


def fp8_kv_measurements_from_text(text: str, name: str = _FILE) -> tuple[Fp8KvMeasurement, ...]:
    """The rows of a CSV text in the ``fp8_kv_measurements.csv`` layout.

    Raises:
        ConfigError: a missing column, a figure that is not a change in %, low above high, one end blank, a row
            without a source or a repeated name.
    """
    out: list[Fp8KvMeasurement] = []
    for r in rows_from_text(text, name, _COLUMNS):
        lo, hi = _pct(name, r, "fp8_change_low_pct"), _pct(name, r, "fp8_change_high_pct")
        if (lo is None) != (hi is None) or (lo is not None and hi is not None and lo > hi):
            raise ConfigError(name, f"line {r['_line']}: give both ends of the change, low ≤ high, or neither")
        if not r["source"].strip() or any(m.name == r["name"] for m in out):
            raise ConfigError(name, f"line {r['_line']}: every row needs a source and a name of its own")
        out.append(Fp8KvMeasurement(r["name"], r["engine"], r["gpu"], r["model"], r["setting"], r["metric"], lo, hi,
                                    r["unit"], r["as_of"], r["source"], r["notes"]))
    return tuple(out)


@cache
def fp8_kv_measurements() -> tuple[Fp8KvMeasurement, ...]:
    """The bundled rows."""
    from importlib.resources import files

    return fp8_kv_measurements_from_text(files("kvledger.catalog").joinpath("data", _FILE).read_text("utf-8"))


def fp8_kv_measurement(name: str) -> Fp8KvMeasurement:
    """The bundled row ``name``.

    Raises:
        ConfigError: no such row.
    """
    for m in fp8_kv_measurements():
        if m.name == name:
            return m
    raise ConfigError(_FILE, f"no row named {name!r}")
