"""A GPU fit whose FLOP fraction TTFT alone set (``kvledger.calibration.fit_identify``): replayed at the fitted and
the default FLOP fraction, no run's mean TPOT moves 2%, so the profile is not recommended, with the remedy."""

from __future__ import annotations

import numpy as np

from kvledger.analyses.serving.sim_setup import SimRequestArgs
from kvledger.calibration.api import engine_for
from kvledger.calibration.fit_identify import TPOT_SHIFT, flops_from_ttft_alone, ttft_alone_note
from kvledger.calibration.gpu_fit import GpuFit, roofline_with
from kvledger.calibration.replay import MeasuredRun, replay
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.records import RunMetadata, RunRecords

MODEL, GPU = "meta-llama/Llama-3.1-8B", "H100"


def _item(rate: float, prompts: tuple[int, int], n: int = 40, seed: int = 5):
    """(run, setup) of n requests at ``rate`` req/s, prompts uniform in ``prompts``, 100–300 output tokens, priced flat
    (the default FLOP fraction is then the flat 0.7); the measured side is the replay at the default itself."""
    rng = np.random.default_rng(seed)
    t = np.concatenate([[0.0], np.cumsum(rng.exponential(1.0 / rate, n - 1))])
    reqs = [RequestSpec(f"r{i}", float(t[i]), int(rng.integers(*prompts)), int(rng.integers(100, 300)))
            for i in range(n)]
    blank = MeasuredRun("synthetic", "synthetic", reqs, RunRecords([], RunMetadata("synthetic", "synthetic")))
    setup = engine_for(SimRequestArgs(model=MODEL, gpu=GPU, tp=1, gpu_profile="none", max_model_len=8192,
                                      gemm_efficiency="flat"), blank)
    truth = replay(blank, setup.config, roofline_with(setup, 0.7, 0.8)).records
    return MeasuredRun("synthetic", "synthetic", reqs, truth), setup


def _fit(ff: float) -> GpuFit:
    return GpuFit(GPU, ff, 0.8, 1.0, 0.5, 0)


def test_light_load_short_prompts_leave_tpot_blind_to_the_flop_fraction():
    # 1 request every 2 s on average, 100–200-token prompts: a prefill is one step of ≈ 2 × 8.0e9 × 150 FLOPs ÷
    # (989e12 × 0.45) ≈ 5.4 ms at FLOP fraction 0.45 (3.5 ms at 0.7), under the ≈ 6 ms a decode step reads its 16 GB
    # of weights in at 0.8 of 3.35 TB/s, and it seldom shares a step with another request's decodes: the fitted 0.45
    # (36% from the default 0.7) moves no run's mean TPOT by 2%
    got = flops_from_ttft_alone([_item(0.5, (100, 200))], _fit(0.45), fit_frontend=False)
    assert got is not None and got["default_flops_fraction"] == 0.7 and got["tpot_shift_max"] < TPOT_SHIFT
    note = ttft_alone_note(got)
    assert note.startswith("its FLOP fraction (0.450, the default's 0.7) was set by TTFT alone")
    assert "refit with --fit-frontend" in note


def test_prefill_heavy_steps_let_tpot_see_it_and_a_fitted_front_end_or_a_near_default_fraction_skip_the_check():
    # 12 req/s with 1,000–3,000-token prompts: most decode steps carry a prefill chunk of up to 2,048 tokens, whose
    # matmuls take 0.7 ÷ 0.45 = 1.56× as long at the fitted fraction: mean TPOT moves far more than 2%
    heavy = [_item(12.0, (1000, 3000), n=60)]
    assert flops_from_ttft_alone(heavy, _fit(0.45), fit_frontend=False) is None
    light = [_item(0.5, (100, 200))]
    assert flops_from_ttft_alone(light, _fit(0.45), fit_frontend=True) is None  # the front end fitted apart
    assert flops_from_ttft_alone(light, _fit(0.66), fit_frontend=False) is None  # |0.66 ÷ 0.7 − 1| = 5.7% < 10%
