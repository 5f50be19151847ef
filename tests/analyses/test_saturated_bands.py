"""A saturated simulated run prints no latency band (kvledger.analyses.serving.sim_ledgers.simulate_document): its
TTFT and TPOT are set by how long the arrivals lasted, which the bands (measured below saturation) do not cover."""

from __future__ import annotations

from kvledger.analyses.serving.prediction_bands import NO_LATENCY_BAND
from kvledger.analyses.serving.sim_ledgers import simulate_document, simulate_run
from kvledger.analyses.serving.sim_setup import SimRequestArgs

ARGS = dict(model="meta-llama/Llama-3.1-8B", gpu="H100", trace="azure-conv", num_requests=300, gpu_profile="none")


def test_a_saturated_run_has_a_throughput_band_and_no_latency_band():
    # 40 req/s on one H100: the fresh-user trial's `simulate --rate 40` (the uncalibrated roofline's capacity on
    # azure-conv is ~19.5 req/s, so the queue grows)
    sim = simulate_run(SimRequestArgs(rate=40.0, **ARGS))
    doc = simulate_document(sim.setup, sim.result)
    assert doc.overload is not None
    assert set(doc.error_bands) == {"throughput"} and NO_LATENCY_BAND in doc.notes


def test_a_run_that_keeps_up_keeps_its_latency_bands():
    sim = simulate_run(SimRequestArgs(rate=2.0, **ARGS))
    doc = simulate_document(sim.setup, sim.result)
    assert doc.overload is None and {"ttft_mean", "tpot_mean"} <= set(doc.error_bands)
    assert NO_LATENCY_BAND not in doc.notes
