"""Error bands on a simulation's headline figures (mean TTFT, mean TPOT, throughput), from the regime that priced it
(``kvledger.ledgers.error_band``); those of an SLO capacity and of the cost decision are in ``capacity_bands``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvledger.jsonable import to_jsonable
from kvledger.ledgers.error_band import error_band, regime_of

# the bands of an SLO capacity and of the cost decision are in capacity_bands.py: `simulate` reports only the
# prediction bands, and need not make those two classes
__all__ = ["setup_regime", "PredictionBand", "prediction_bands"]


@dataclass(frozen=True)
class PredictionBand:
    """One simulated figure and the 80% band of where a real engine's figure fell around such a prediction.

    Attributes:
        predicted: the simulated figure (s, or req/s for throughput); low / high: the band, same unit.
        regime: the calibration regime that priced the run; num_runs: measured runs behind the band; source: the data.
    """

    predicted: float
    low: float
    high: float
    regime: str
    num_runs: int
    source: str

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


def setup_regime(setup: Any) -> str:
    """The regime of a prepared simulation: the scope that priced it, the model's architecture, the engine."""
    plan = getattr(setup, "plan", None)
    is_moe = bool(plan is not None and plan.model.is_moe)
    engine = getattr(getattr(plan, "memory", None), "engine", "vllm") if plan is not None else "vllm"
    return regime_of((setup.cost_info or {}).get("scope"), is_moe, engine)


def prediction_bands(setup: Any, summary: dict[str, Any]) -> dict[str, PredictionBand]:
    """metric → its band, for mean TTFT and TPOT (s) and throughput (req/s; the band holds at saturation, where
    throughput is the engine's capacity); a metric without a band is left out."""
    regime = setup_regime(setup)
    values = {"ttft_mean": (summary.get("ttft_s") or {}).get("mean"),
              "tpot_mean": (summary.get("tpot_s") or {}).get("mean"),
              "throughput": summary.get("throughput_req_per_s")}
    out: dict[str, PredictionBand] = {}
    for metric, v in values.items():
        band = error_band(regime, metric)
        if band is None or v is None:
            continue
        lo, hi = band.around(v)
        out[metric] = PredictionBand(v, lo, hi, regime, band.num_runs, band.source)
    return out
