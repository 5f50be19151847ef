"""Error bands on a simulation's headline figures (mean TTFT, mean TPOT, throughput), from the regime that priced it
(``kvledger.ledgers.error_band``)."""

from __future__ import annotations

from typing import Any

from kvledger.ledgers.error_band import error_band, regime_of

__all__ = ["setup_regime", "prediction_bands"]


def setup_regime(setup: Any) -> str:
    """The regime of a prepared simulation: the scope that priced it, the model's architecture, the engine."""
    plan = getattr(setup, "plan", None)
    is_moe = bool(plan is not None and plan.model.is_moe)
    engine = getattr(getattr(plan, "memory", None), "engine", "vllm") if plan is not None else "vllm"
    return regime_of((setup.cost_info or {}).get("scope"), is_moe, engine)


def prediction_bands(setup: Any, summary: dict[str, Any]) -> dict[str, Any]:
    """metric → {predicted, low, high, regime, num_runs, source} for mean TTFT and TPOT (s) and throughput (req/s; the
    band holds at saturation, where throughput is the engine's capacity); a metric without a band is left out."""
    regime = setup_regime(setup)
    values = {"ttft_mean": (summary.get("ttft_s") or {}).get("mean"),
              "tpot_mean": (summary.get("tpot_s") or {}).get("mean"),
              "throughput": summary.get("throughput_req_per_s")}
    out: dict[str, Any] = {}
    for metric, v in values.items():
        band = error_band(regime, metric)
        if band is None or v is None:
            continue
        lo, hi = band.around(v)
        out[metric] = {"predicted": v, "low": lo, "high": hi, "regime": regime, "num_runs": band.num_runs,
                       "source": band.source}
    return out


def cost_band(setup: Any, capacity_req_per_s: float, self_host_usd_per_mtok: float,
              api_usd_per_mtok: float) -> dict[str, Any] | None:
    """The band of the goodput priced (``capacity_req_per_s``: good req/s at the SLO capacity, not the capacity's
    request rate) and what it does to the self-host vs API decision: the self-hosted $/M output tokens
    scaled by 1/capacity over the band (every self-host line item is paid per GPU-hour of capacity), and whether
    the API price lies inside that range (the decision flips inside the band). None when no band exists."""
    regime = setup_regime(setup)
    band = error_band(regime, "throughput")
    if band is None or capacity_req_per_s <= 0:
        return None
    lo, hi = band.around(capacity_req_per_s)
    cost_lo, cost_hi = self_host_usd_per_mtok / band.high, self_host_usd_per_mtok / band.low
    flips = cost_lo <= api_usd_per_mtok <= cost_hi
    cheaper = "self-hosting" if self_host_usd_per_mtok < api_usd_per_mtok else "the API"
    scope = {"uncalibrated": "uncalibrated roofline", "gpu": "GPU-calibrated roofline"}.get(regime.split("/")[0],
                                                                                          "model-calibrated")
    verdict = ("the decision FLIPS inside the band — the simulator cannot settle it; measure the capacity (kvledger "
               "calibrate --scope gpu, then validate)" if flips else f"{cheaper} is cheaper across the whole band")
    text = (f"goodput at the SLO capacity {capacity_req_per_s:.3g} good req/s (80% band {lo:.3g}–{hi:.3g}, "
            f"{scope}); self-hosted "
            f"${self_host_usd_per_mtok:.4g}/M output tokens (band ${cost_lo:.4g}–${cost_hi:.4g}) vs the API's "
            f"${api_usd_per_mtok:.4g}: {verdict}")
    return {"regime": regime, "capacity_req_per_s": capacity_req_per_s, "capacity_low": lo, "capacity_high": hi,
            "self_host_usd_per_mtok_output_low": cost_lo, "self_host_usd_per_mtok_output_high": cost_hi,
            "api_usd_per_mtok_output": api_usd_per_mtok, "decision_flips_inside_band": flips, "text": text,
            "source": band.source}


def capacity_band(setup: Any, capacity_req_per_s: float | None) -> dict[str, Any] | None:
    """The 80% band of an SLO capacity (req/s) found by simulation, with a sentence; None without a band or value."""
    regime = setup_regime(setup)
    band = error_band(regime, "throughput")
    if band is None or not capacity_req_per_s:
        return None
    lo, hi = band.around(capacity_req_per_s)
    scope = {"uncalibrated": "uncalibrated roofline", "gpu": "GPU-calibrated roofline"}.get(regime.split("/")[0],
                                                                                          "model-calibrated")
    return {"value": capacity_req_per_s, "low": lo, "high": hi, "regime": regime, "source": band.source,
            "text": f"SLO capacity {capacity_req_per_s:.3g} req/s (80% band {lo:.3g}–{hi:.3g}, {scope})"}
