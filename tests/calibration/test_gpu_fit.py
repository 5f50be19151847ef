"""GPU-scope calibration: on a run the roofline itself generated at known achievable fractions, the fit finds them
back; the profile then prices another model and TP on that GPU."""

from __future__ import annotations

import json

import numpy as np
import pytest

from kvledger.analyses.serving.sim_setup import SimRequestArgs, prepare
from kvledger.calibration.api import engine_for
from kvledger.calibration.gpu_fit import GRID_BANDWIDTH, GRID_FLOPS, fit_gpu_fractions, gpu_profile_dict, roofline_with
from kvledger.calibration.replay import MeasuredRun, replay
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.errors import InputError
from kvledger.records import RunMetadata, RunRecords

MODEL, GPU = "meta-llama/Llama-3.1-8B", "H100"
TRUE_FLOPS, TRUE_BW = 0.45, 0.65  # on neither grid: the pattern search must walk to them


def _workload(n: int = 120, rate: float = 12.0, seed: int = 3) -> list[RequestSpec]:
    rng = np.random.default_rng(seed)
    t = np.concatenate([[0.0], np.cumsum(rng.exponential(1.0 / rate, n - 1))])
    return [RequestSpec(f"r{i}", float(t[i]), int(rng.integers(200, 3000)), int(rng.integers(20, 300)))
            for i in range(n)]


def _synthetic_run():
    reqs = _workload()
    blank = MeasuredRun("synthetic", "synthetic", reqs, RunRecords([], RunMetadata("synthetic", "synthetic")))
    setup = engine_for(SimRequestArgs(model=MODEL, gpu=GPU, tp=1, gpu_profile="none", max_model_len=8192), blank)
    truth = replay(blank, setup.config, roofline_with(setup, TRUE_FLOPS, TRUE_BW)).records
    return MeasuredRun("synthetic", "synthetic", reqs, truth), setup


def test_the_gpu_fit_recovers_known_fractions():
    assert TRUE_FLOPS not in GRID_FLOPS and TRUE_BW not in GRID_BANDWIDTH
    run, setup = _synthetic_run()
    fit = fit_gpu_fractions([(run, setup)])
    # the prefill steps are compute-bound (FLOP share), the decode steps bandwidth-bound (bandwidth share): both
    # fractions are seen by the TTFT/TPOT statistics, so the fit lands on them (pattern steps of 2%)
    assert fit.flops_fraction == pytest.approx(TRUE_FLOPS, rel=0.05)
    assert fit.bandwidth_fraction == pytest.approx(TRUE_BW, rel=0.05)
    assert fit.objective < 1e-3 < fit.objective_start
    prof = gpu_profile_dict(fit, [{"label": "synthetic", "model": MODEL, "tp": 1}], ["synthetic"])
    assert prof["kind"] == "kvledger-gpu-profile" and prof["gpu"] == setup.gpu_name


def test_a_gpu_profile_prices_another_model_and_tp_on_that_gpu_and_no_other_gpu(tmp_path):
    run, setup = _synthetic_run()
    prof = gpu_profile_dict(fit_gpu_fractions([(run, setup)]), [], ["synthetic"])
    path = tmp_path / "h100.json"
    path.write_text(json.dumps(prof))
    other = prepare(SimRequestArgs(model="Qwen/Qwen3-32B", gpu=GPU, tp=2, num_requests=5,
                                   gpu_profile=str(path)))
    assert other.cost.flops_fraction == prof["flops_fraction"] and other.cost_info["scope"] == "gpu"
    assert other.cost.bandwidth_fraction == prof["bandwidth_fraction"]
    with pytest.raises(InputError, match="fitted on"):
        prepare(SimRequestArgs(model=MODEL, gpu="A100-80GB", num_requests=5, gpu_profile=str(path)))
    plain = prepare(SimRequestArgs(model=MODEL, gpu=GPU, num_requests=5, gpu_profile="none"))
    assert (plain.cost.flops_fraction, plain.cost.bandwidth_fraction, plain.cost_info["scope"]) == (0.7, 0.8,
                                                                                                   "uncalibrated")


def test_validating_a_run_the_bundled_profile_was_fitted_on_says_in_sample():
    # the bundled RTX 4090 profile was fitted on LLMServingSim's two RTX 4090 runs: a validation of a run whose
    # source is one of them is the fit's own error, and says so; with --gpu-profile none it is a prediction again
    from kvledger.analyses.serving.step_cost_choice import gpu_profile_of
    from kvledger.catalog.gpu_file import resolve_gpu

    prof = gpu_profile_of(SimRequestArgs(model=MODEL, gpu="RTX 4090"), resolve_gpu("RTX 4090").name)
    assert prof is not None and any("RTX4090/Llama-3.1-8B" in d for d in prof.data)
    assert gpu_profile_of(SimRequestArgs(model=MODEL, gpu="RTX 4090", gpu_profile="none"), "x") is None
    setup = prepare(SimRequestArgs(model=MODEL, gpu="RTX 4090", num_requests=5, max_model_len=8192))
    assert setup.cost_info["scope"] == "gpu" and setup.cost.flops_fraction == prof.flops_fraction
    assert setup.cost_info["gpu_profile_data"] == list(prof.data)


def test_the_setups_frontend_latency_is_fitted_apart_from_the_gpu_fractions():
    # the same synthetic run seen from a client 25 ms away (each TTFT and E2E 25 ms longer, TPOT unchanged): fitted
    # with the frontend latency, the fractions land where they were and the latency is found (golden-section
    # search, ~1e-9 s; the fractions' pattern steps of 1.2% leave it within 2 ms)
    from kvledger.calibration.replay import with_frontend

    run, setup = _synthetic_run()
    seen = with_frontend(replay(run, setup.config, roofline_with(setup, TRUE_FLOPS, TRUE_BW)), 0.025).records
    client = MeasuredRun("client", "client", run.requests, seen)
    fit = fit_gpu_fractions([(client, setup)], fit_frontend=True)
    assert fit.frontend_s == pytest.approx(0.025, abs=0.002)
    assert fit.flops_fraction == pytest.approx(TRUE_FLOPS, rel=0.05)
    assert fit.bandwidth_fraction == pytest.approx(TRUE_BW, rel=0.05)
    # without it the fractions must absorb 25 ms per request: the prefill share falls (0.40) to stretch every TTFT
    # and the fit stays worse. (~4 s: two fits of ~60 replays each; the contrast is what the term is for.)
    plain = fit_gpu_fractions([(client, setup)])
    assert plain.frontend_s == 0.0 and plain.flops_fraction < 0.95 * TRUE_FLOPS
    assert plain.objective > 10 * fit.objective
