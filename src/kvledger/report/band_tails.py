"""The lines ``simulate`` prints under its bands' sources: why a run has no throughput band, and what a saturated,
a burst's or a closed loop's throughput is (``simulate_view.render_bands``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from kvledger.analyses.serving.prediction_bands import PredictionBand
    from kvledger.ledgers.burst_read import BurstRead

__all__ = ["band_tails"]


def band_tails(bands: dict[str, PredictionBand], kept_up: bool, closed: str, at_knee: bool,
           burst: BurstRead | None) -> list[str]:
    """The lines under the bands' sources: why a run that kept up has no throughput band, what a saturated run's
    throughput is, what a closed loop's is."""
    if kept_up:
        why = (burst.no_band_reason() if burst is not None else "its queue drained by the end, so its throughput is "
               "the offered load, though it sat at its knee (see the note), not the capacity" if at_knee else
               "the run kept up with its arrivals, so its throughput is the offered load, not the capacity")
        return [f"no throughput band: {why} (goodput --simulate --target finds it)"]
    tails = []
    if "throughput" in bands and burst is not None:
        tails.append("throughput at saturation: a burst's — its completed requests ÷ first arrival → last finish, "
                     "the engine's drain capacity from a full queue to empty, as validate compares it; a sustained "
                     "load's may differ (goodput --simulate --target finds the SLO capacity)")
    elif "throughput" in bands and not closed:
        tails.append("throughput at saturation: this run's completed requests ÷ its first arrival → last finish, the "
                     "drain after the last arrival included, as validate compares it — a short run's is below what "
                     "the engine sustains (goodput --simulate --target finds the SLO capacity)")
    if closed and "throughput" in bands:
        tails.append("closed loop: each turn or request is sent after the last one finished (or, paced, when a client "
                     "slot frees), so the throughput is what the loop sent; its band holds where the engine was "
                     "saturated (search --workload finds a session workload's capacity, goodput --simulate --target "
                     "--axis concurrency a closed loop of requests)")
    return tails
