"""simulate withholds the TTFT band of a run at or past its knee (kvledger.analyses.serving.prediction_bands.
knee_withheld, the rule of kvledger.analyses.serving.knee_rule on the simulated run alone), as validate does: its mean
TTFT then measures the queue, not the step-cost error the band was measured on. TPOT keeps its band."""

from __future__ import annotations

import json

import pytest

from kvledger.analyses.serving.knee_rule import KNEE_GROWTH, quarter_growth
from kvledger.analyses.serving.sim_ledgers import simulate_document, simulate_run
from kvledger.analyses.serving.sim_setup import SimRequestArgs

# the flat roofline (0.7 of peak FLOP/s for every matmul): the quarters below were read off runs priced that way
ARGS = dict(model="meta-llama/Llama-3.1-8B", gpu="H100", trace="azure-conv", num_requests=2000, gpu_profile="none",
            gemm_efficiency="flat")


def _doc(rate: float):
    sim = simulate_run(SimRequestArgs(rate=rate, **ARGS))
    return simulate_document(sim.setup, sim.result), sim.result.records


def test_a_run_at_its_knee_has_a_tpot_band_and_no_ttft_band():
    # 2,000 azure-conv requests at 20 req/s on one H100 (uncalibrated roofline; the backlog tests pass it, its queue
    # did not grow at the last arrival): the mean TTFT of its arrivals' quarters (500 each, read from this
    # simulation) 59.2, 118.7, 136.4, 123.5 ms; the third ÷ the first = 0.136423 / 0.059216 = 2.30 ≥ 2 → at its knee
    doc, _ = _doc(20.0)
    assert doc.overload is None and doc.too_short is None
    k = doc.at_knee
    assert k["quarter_ttft_mean_s"] == pytest.approx([0.0592158, 0.1187294, 0.1364230, 0.1234927], abs=1e-7)
    assert (k["peak_quarter"], k["ratio"], k["grew"]) == (3, pytest.approx(2.303827, abs=1e-6), True)
    assert k["growth_factor"] == KNEE_GROWTH == 2.0
    # four equal quarters: their means average to the run's mean TTFT
    assert sum(k["quarter_ttft_mean_s"]) / 4 == pytest.approx(doc.summary["ttft_s"]["mean"], rel=1e-12)
    assert set(doc.error_bands) == {"tpot_mean"}  # the open loop kept up: no throughput band either
    assert ("no TTFT mean error band: the run sat at or past its knee — its mean TTFT grew from 59.2 ms in the first "
            "quarter of its arrivals to 136.4 ms in the third (2.3×;") in " ".join(doc.notes)
    d = json.loads(json.dumps(doc.to_dict()))
    assert d["at_knee"]["ratio"] == pytest.approx(2.303827, abs=1e-6)
    assert d["band_coverage"]["banded"] == ["tpot_mean"] and d["band_coverage"]["unbanded"]["ttft_mean"] is None


def test_the_same_trace_below_its_knee_keeps_its_ttft_band():
    # 18.3 req/s: quarters 54.3, 99.3, 104.0, 90.8 ms; 0.1040 / 0.0543 = 1.92 < 2 → below its knee
    doc, records = _doc(18.3)
    g = quarter_growth(records)
    assert g["quarter_ttft_mean_s"] == pytest.approx([0.0543, 0.0993, 0.1040, 0.0908], abs=5e-5)
    assert g["ratio"] == pytest.approx(1.916, abs=5e-4) and g["grew"] is False
    assert doc.at_knee is None and {"ttft_mean", "tpot_mean"} == set(doc.error_bands)
    assert doc.to_dict()["at_knee"] is None  # null: the key is always there
    assert not any("knee" in n for n in doc.notes)
