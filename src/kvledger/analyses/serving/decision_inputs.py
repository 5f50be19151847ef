"""What the build-or-buy decision takes besides the run: the API rows serving the same model, the people defaults, the
bought-GPU power figures, and what the answer rests on (price-row confidence, unvalidated rules, the capacity band)."""

from __future__ import annotations

from typing import Any

from kvledger.errors import UnknownNameError

__all__ = ["api_rows_for", "gpu_power_for", "rests_on_for", "decision_inputs"]

MEMORY_RULES_GPU = "nvidia_h100_sxm"
"""The GPU the memory rules were measured on (vLLM 0.19 start-ups; ``catalog/data/vllm_memory_observations.csv``)."""
BAND_UNCALIBRATED = (
    0.3,
    "kvledger assumption for an uncalibrated roofline step cost, until measured error bands exist",
)
BAND_CALIBRATED = (0.15, "kvledger assumption for a calibrated step cost")
BAND_MEASURED = (0.1, "kvledger assumption: run-to-run variation of a measured benchmark")


def api_rows_for(model: str | None, named: Any) -> tuple[tuple[Any, bool, bool], ...]:
    """(row, serves the same model, named by the user) for every catalog row serving ``model``, cheapest later (the
    decision sorts by bill), plus the ``named`` row (None: none named)."""
    from kvledger.catalog.api_match import same_model_rows

    same = same_model_rows(model) if model else []
    rows = [(r, True, named is not None and r.key == named.key) for r in same]
    if named is not None and all(r.key != named.key for r in same):  # a historical row of the model is still it
        ever = {r.key for r in same_model_rows(model, with_historical=True)} if model else set()
        rows.insert(0, (named, named.key in ever, True))
    return tuple(rows)


def gpu_power_for(gpu_id: str | None, buy: Any) -> tuple[Any, str | None]:
    """(GpuPower or None, why none): board power from the GPU catalog's TDP (or ``--board-power-w``), idle from
    ``gpu_idle_power.csv`` (or ``--idle-power-w``)."""
    from kvledger.catalog.gpus import get_gpu
    from kvledger.ledgers.decision import GpuPower
    from kvledger.ledgers.host_bill import idle_power

    tdp, src = (buy.board_power_w, "user input (--board-power-w)") if buy.board_power_w is not None else (None, "")
    if tdp is None and gpu_id:
        try:
            spec = get_gpu(gpu_id)
        except UnknownNameError:
            spec = None
        if spec is not None and spec.tdp_w:
            tdp, src = (
                spec.tdp_w,
                f"board power {spec.tdp_w:,.0f} W: gpus.csv {spec.gpu_id} tdp_w ({spec.confidence} confidence)",
            )
    if tdp is None:
        return None, "no board power for this GPU: pass --board-power-w"
    if buy.idle_power_w is not None:
        idle, isrc = buy.idle_power_w, "user input (--idle-power-w)"
    else:
        idle, isrc = idle_power(gpu_id or "", tdp)
    return GpuPower(tdp, idle, f"{src}; idle {idle:,.0f} W: {isrc}"), None


def rests_on_for(gpu_id: str | None, sim: Any) -> tuple[list[str], float, str, tuple[float, float]]:
    """(what the answer rests on, capacity band (the wider side), its source, (fraction below, fraction above)); the
    GPU price row's confidence is said by ``ledgers.decision.decide``, which knows the row the replicas are billed
    on."""
    out = []
    if gpu_id and gpu_id != MEMORY_RULES_GPU and sim is not None:
        out.append(f"memory rules measured on H100 with vLLM 0.19 only: not validated on {gpu_id}")
    if sim is None:
        return out, *BAND_MEASURED, (BAND_MEASURED[0], BAND_MEASURED[0])
    step = (sim.provenance().step_cost or {}).get("source", "")
    uncalibrated = "uncalibrated" in step or "calibrat" not in step
    if uncalibrated:
        out.append("step cost uncalibrated (roofline): the capacity is a model estimate")
    measured = _measured_band(sim)
    if measured is not None:
        return out, *measured
    frac, src = BAND_UNCALIBRATED if uncalibrated else BAND_CALIBRATED
    return out, frac, src, (frac, frac)


def _measured_band(sim: Any) -> tuple[float, str, tuple[float, float]] | None:
    """The simulated capacity's measured 80% error band (kvledger.ledgers.error_band, by the regime that priced it):
    the wider side max(1 − low, high − 1) (kept for the JSON's ``capacity_band``), its source, and the two sides
    (1 − low, high − 1), which the flip test and the robustness line use."""
    from kvledger.analyses.serving.prediction_bands import setup_band

    setup = getattr(sim, "setup", None)
    band = setup_band(setup, "throughput") if setup is not None else None
    if band is None:
        return None
    frac = max(1.0 - band.low, band.high - 1.0)
    borrowed = "" if band.lent_from is None else \
        f"; borrowed from {band.lent_from}, the nearest regime with runs: a floor"
    elsewhere = f"; {band.elsewhere}" if band.elsewhere else ""  # its runs on other GPUs only (Band.on_gpu)
    return frac, (f"measured 80% band of simulated capacity ×{band.low:.2f}–×{band.high:.2f}, {band.regime}, "
                  f"{band.num_runs} runs left out one deployment at a time{borrowed}{elsewhere}"), \
        (1.0 - band.low, band.high - 1.0)


def decision_inputs(
    model: str | None,
    named: Any,
    gpu_id: str | None,
    sim: Any,
    buy: Any,
    people: Any,
    peak_to_mean: float = 1.0,
    quantization: str | None = None,
) -> tuple[Any, list[str]]:
    """(DecisionInputs, notes) for ``build_cost_report``; ``peak_to_mean``: --peak-to-mean, which the break-even sizes
    for even without a volume; ``quantization``: the self-hosted weights' --quantization where the caller knows it
    (``report`` prices a sized run that carries no plan), else read from ``sim``'s plan."""
    from kvledger.ledgers.cost_summary import DecisionInputs

    notes = []
    power = None
    if buy is not None and buy.gpu_capex_usd is not None:
        power, why = gpu_power_for(gpu_id, buy)
        if why:
            notes.append(why)
    rests, band, band_src, sides = rests_on_for(gpu_id, sim)
    return DecisionInputs(api_rows_for(model, named), buy, power, people.source, band, band_src, tuple(rests),
                          model, sides, quantization or _quantization(sim), peak_to_mean,
                          getattr(_plan_settings(sim), "engine", None)), notes


def _plan_settings(sim: Any) -> Any:
    """The simulated plan's settings (its engine, its --quantization), None for a measured file."""
    return getattr(getattr(getattr(sim, "setup", None), "plan", None), "settings", None)


def _quantization(sim: Any) -> str | None:
    """The --quantization the simulated plan loads its weights with (fp8), None for a measured file or none given."""
    return getattr(_plan_settings(sim), "quantization", None)
