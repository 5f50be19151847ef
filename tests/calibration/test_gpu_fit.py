"""GPU-scope calibration: on a run the roofline itself generated at known achievable fractions, the fit finds them
back; the profile then prices another model and TP on that GPU. The synthetic runs are priced flat (the two fractions
alone) unless a test says measured: under the measured GEMM curve a FLOP fraction as low as 0.45 makes even decode
steps compute-bound (the curve's low-token efficiency is the weight read's), hiding the bandwidth fraction."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from kvledger.accounting.stepcost import StepShape
from kvledger.analyses.serving.sim_setup import SimRequestArgs, prepare
from kvledger.calibration.api import engine_for
from kvledger.calibration.gpu_fit import GRID_BANDWIDTH, GRID_FLOPS, fit_gpu_fractions, roofline_with
from kvledger.calibration.gpu_profile_file import gpu_profile_dict
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
    setup = engine_for(SimRequestArgs(model=MODEL, gpu=GPU, tp=1, gpu_profile="none", max_model_len=8192,
                                      gemm_efficiency="flat"), blank)  # flat: the fractions alone (see the docstring)
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
    # uncalibrated: the H100's measured matmul curve as measured (FLOP fraction 1.0), bandwidth 0.8
    assert (plain.cost.flops_fraction, plain.cost.bandwidth_fraction, plain.cost_info["scope"]) == (1.0, 0.8,
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



def test_two_setups_get_a_frontend_latency_each_and_the_fractions_stay_the_gpus():
    # the same GPU (true 0.45/0.65) timed through two clients: run A 25 ms from the engine, run B (another workload,
    # seed 4) 5 ms. Named apart, each set-up's latency is found on its own and the fractions land on the truth. A
    # latency a few % of a ~120 ms mean TTFT trades weakly against the FLOP share's 1.2% pattern steps (run B fitted
    # alone lands at 11.7 ms), so B's is held to 5 ms and the gap between the two clients to 4 ms (measured: 26.4 and
    # 9.3 ms, fractions 0.453/0.652). Under one name a single latency must serve both: it falls between 5 and 25 ms
    # (measured 20.3 ms) and the fit is worse (objective 0.021 against 0.0013).
    from kvledger.calibration.replay import with_frontend

    a, setup = _synthetic_run()
    reqs_b = _workload(seed=4)
    blank = MeasuredRun("b", "synthetic", reqs_b, RunRecords([], RunMetadata("synthetic", "synthetic")))
    truth = roofline_with(setup, TRUE_FLOPS, TRUE_BW)
    seen_a = with_frontend(replay(a, setup.config, truth), 0.025).records
    seen_b = with_frontend(replay(blank, setup.config, truth), 0.005).records
    items = [(MeasuredRun("a", "a", a.requests, seen_a), setup), (MeasuredRun("b", "b", reqs_b, seen_b), setup)]
    fit = fit_gpu_fractions(items, fit_frontend=True, setups=["client A", "client B"])
    assert fit.frontends_s["client A"] == pytest.approx(0.025, abs=0.002)
    assert fit.frontends_s["client B"] == pytest.approx(0.005, abs=0.005)
    assert fit.frontends_s["client A"] - fit.frontends_s["client B"] == pytest.approx(0.020, abs=0.004)
    assert fit.frontend_s == 0.0  # two set-ups: no single latency stands for the fit
    assert fit.flops_fraction == pytest.approx(TRUE_FLOPS, rel=0.05)
    assert fit.bandwidth_fraction == pytest.approx(TRUE_BW, rel=0.05)
    one = fit_gpu_fractions(items, fit_frontend=True)
    assert 0.005 < one.frontend_s < 0.025 and one.frontends_s == {"": one.frontend_s}
    assert one.objective > fit.objective
    with pytest.raises(InputError, match="one per run"):
        fit_gpu_fractions(items, fit_frontend=True, setups=["client A"])

TRUE_HOST_STEP, TRUE_HOST_SEQ = 0.8e-3, 1.2e-5  # s per step, s per sequence in the step


def _synthetic_host_runs():
    """Two models of different sizes on one H100 (Llama-3.1-8B TP1, Qwen3-32B TP2) replayed at the true fractions
    and host terms."""
    out = []
    for model, tp, seed in ((MODEL, 1, 3), ("Qwen/Qwen3-32B", 2, 4)):
        reqs = _workload(seed=seed)
        blank = MeasuredRun(model, "synthetic", reqs, RunRecords([], RunMetadata("synthetic", "synthetic")))
        setup = engine_for(SimRequestArgs(model=model, gpu=GPU, tp=tp, gpu_profile="none", max_model_len=8192,
                                          gemm_efficiency="flat"), blank)
        truth = replay(blank, setup.config, roofline_with(setup, TRUE_FLOPS, TRUE_BW, TRUE_HOST_STEP,
                                                          TRUE_HOST_SEQ)).records
        out.append((MeasuredRun(model, "synthetic", reqs, truth), setup))
    return out


def test_the_gpu_fit_with_host_terms_prices_every_step_of_two_models_and_a_third_as_the_truth_does():
    # truth: 0.45/0.65 of peak, 0.8 ms per step + 12 µs per sequence in series. An 8B TP1 decode step of 20 sequences
    # is ~9.7 ms, a 32B TP2 one ~18.4 ms: a fixed 0.8 ms is 8% of the first and 4% of the second, so a bandwidth share
    # alone cannot reproduce both and the fit takes host time. How much of it is per step and how much per sequence,
    # and how much is traded against a slightly lower bandwidth share, the two runs tell only weakly (measured: the fit
    # lands at 0.448/0.625, 0.65 ms + 4.7 µs, objective 5.5e-4 where the truth gives 0): the terms are not asserted
    # one by one. What must hold is what carries: every step shape priced within 3% of the truth, on both models and
    # on a third (Llama-3.1-70B TP4) never fitted (measured: −1.4 … +2.7%).
    items = _synthetic_host_runs()
    fit = fit_gpu_fractions(items, fit_host=True)
    assert fit.flops_fraction == pytest.approx(TRUE_FLOPS, rel=0.05)
    assert fit.bandwidth_fraction == pytest.approx(TRUE_BW, rel=0.05)
    assert fit.host_step_s > 0 and fit.objective < 1e-3 < fit.objective_start
    blank = MeasuredRun("third", "synthetic", items[0][0].requests,
                        RunRecords([], RunMetadata("synthetic", "synthetic")))
    third = engine_for(SimRequestArgs(model="meta-llama/Llama-3.1-70B", gpu=GPU, tp=4, gpu_profile="none",
                                      gemm_efficiency="flat",
                                      max_model_len=8192), blank)
    shapes = [StepShape(0, 0, 0, 0.0, n, kv) for n, kv in ((1, 1_000), (20, 30_000), (100, 150_000))]
    shapes.append(StepShape(2_000, 1, 2_000, 2_001_000.0, 0, 0))  # a 2,000-token prompt: n(n+1)/2 pairs
    for setup in (items[0][1], items[1][1], third):
        truth = roofline_with(setup, TRUE_FLOPS, TRUE_BW, TRUE_HOST_STEP, TRUE_HOST_SEQ)
        fitted = roofline_with(setup, fit.flops_fraction, fit.bandwidth_fraction, fit.host_step_s, fit.host_seq_s)
        for sh in shapes:
            assert fitted.step_time_s(sh) == pytest.approx(truth.step_time_s(sh), rel=0.03)
    prof = gpu_profile_dict(fit, [], ["synthetic"])
    assert (prof["version"], prof["host_step_s"], prof["host_seq_s"]) == (4, round(fit.host_step_s, 7),
                                                                          round(fit.host_seq_s, 9))
    assert prof["allreduce_link_share"] is None  # TP 1 and TP 2 on NVLink: no share fitted (link_fit.link_applies)


def test_a_version_2_profile_carries_its_host_terms_a_version_1_has_none_and_a_later_one_is_refused(tmp_path):
    # version 3 (gemm_efficiency) and 4 (allreduce_link_share) are read; version 5 is refused; a flat profile refuses
    # --gemm-efficiency measured
    from kvledger.errors import FormatError, InputError

    base = {"kind": "kvledger-gpu-profile", "gpu": "NVIDIA H100 80GB HBM3", "flops_fraction": 0.9,
            "bandwidth_fraction": 0.75}
    gpu = prepare(SimRequestArgs(model=MODEL, gpu=GPU, num_requests=5, gpu_profile="none")).gpu_name
    base["gpu"] = gpu
    v1, v2, v3, v4 = (tmp_path / f"v{i}.json" for i in (1, 2, 3, 4))
    v1.write_text(json.dumps({**base, "version": 1}))
    v2.write_text(json.dumps({**base, "version": 2, "host_step_s": 0.0006, "host_seq_s": 1.3e-5}))
    v3.write_text(json.dumps({**base, "version": 3, "gemm_efficiency": "measured"}))
    v4.write_text(json.dumps({**base, "version": 5}))
    old = prepare(SimRequestArgs(model=MODEL, gpu=GPU, num_requests=5, gpu_profile=str(v1)))
    assert (old.cost.host_step_s, old.cost.host_seq_s) == (0.0, 0.0) and "host_step_s" not in old.cost_info
    new = prepare(SimRequestArgs(model=MODEL, gpu=GPU, num_requests=5, gpu_profile=str(v2)))
    assert (new.cost.host_step_s, new.cost.host_seq_s) == (0.0006, 1.3e-5)
    assert new.cost_info["host_step_s"] == 0.0006 and "0.6 ms per step + 13 µs per sequence" in new.cost_info["source"]
    meas = prepare(SimRequestArgs(model=MODEL, gpu=GPU, num_requests=5, gpu_profile=str(v3)))
    assert meas.cost.gemm_curve is not None and meas.cost.flops_fraction == 0.9
    assert meas.cost_info["gemm_efficiency"] == "measured" and old.cost.gemm_curve is None
    with pytest.raises(FormatError, match="version 5"):
        prepare(SimRequestArgs(model=MODEL, gpu=GPU, num_requests=5, gpu_profile=str(v4)))
    with pytest.raises(InputError, match="fitted with flat"):
        prepare(SimRequestArgs(model=MODEL, gpu=GPU, num_requests=5, gpu_profile=str(v1), gemm_efficiency="measured"))


def test_a_poor_in_sample_fit_is_stated_with_its_threshold_and_hints():
    # kubecon `vllm` stage 0 under the fitted 0.439/0.557 (calibrate --scope gpu on stages 0–3): TTFT −56.3%, TPOT
    # +13.1% in-sample; the limits are issue 23's held-out targets (TTFT/TPOT 15%, throughput 10%)
    from kvledger.accounting.gpu_profile import run_facts
    from kvledger.ledgers.profile_band import fit_quality

    runs = [{"label": "stage_0", "model": "M", "tp": 1, "saturated": None, "ttft_mean_rel_error": -0.563,
             "tpot_mean_rel_error": 0.131, "throughput_rel_error": -0.001}]
    runs = [run_facts(r) for r in runs]
    q = fit_quality(runs, client_timed=True, fit_frontend=False)
    assert q["poor"] and q["beyond"] == ["stage_0: ttft mean -56.3% (limit ±15%)"]
    assert q["limits"] == {"ttft_mean": 0.15, "tpot_mean": 0.15, "throughput": 0.10}
    assert [h.split(":")[0].split(" ")[0] for h in q["hints"]] == ["--fit-frontend", "--max-model-len",
                                                                  "--engine-version"]
    # with the frontend fitted it is not suggested again; a good fit has no hints
    assert not fit_quality(runs, True, True)["hints"][0].startswith("--fit-frontend")
    good = [{**runs[0], "ttft_mean": -0.05}]
    assert fit_quality(good, True, False) == {**q, "poor": False, "beyond": [], "hints": [], "runs_within": 1}
    # one run beyond among five is 4/5 = 80% within: not poor (a stage's tail does not condemn the fit), but listed
    five = good * 4 + runs
    assert fit_quality(five, True, False)["poor"] is False and len(fit_quality(five, True, False)["beyond"]) == 1


def test_the_h100_profile_is_bundled_opt_in_with_its_evidence():
    # h100-sxm.json: "default": false, so a plain H100 run keeps the uncalibrated roofline (its error band was measured
    # on these runs; build_h100_profile.DEFAULT_NOTE); named, it loads with its fit, in measured mode, and errors
    from kvledger.accounting.gpu_profile import bundled_gpu_profile, load_gpu_profile, resolve_gpu_profile
    from kvledger.errors import FormatError

    h100 = "NVIDIA H100 80GB SXM5"
    assert bundled_gpu_profile(h100) is None and resolve_gpu_profile(None, h100) is None
    p = resolve_gpu_profile("bundled:h100-sxm", h100)
    assert (p.flops_fraction, p.bandwidth_fraction, p.gemm_efficiency) == (0.9881, 0.794, "measured")
    assert p.host_step_s == 0.0
    assert len(p.runs) == 16 and sum(r["saturated"] is True for r in p.runs) == 1
    assert "16 runs of meta-llama/Llama-2-7b-hf TP 1" in p.label
    # the training client's 5.8 ms is recorded, never priced: the profile has no frontend term
    d = json.loads((Path(__file__).parents[2] / "src/kvledger/accounting/data/gpu_profiles/h100-sxm.json").read_text())
    assert d["fit"]["frontend_s"] == 0.0 and 0.005 < next(iter(d["fit"]["set_up_frontend_s"].values())) < 0.007
    assert d["fit"]["flops_seen"] is True  # training's ~550-token prompt steps see the FLOP fraction (fit_checks.py)
    assert [m["predict"].split("/")[1] for m in d["leave_one_model_out"]] == ["CodeLlama-34b-Instruct-hf",
                                                                              "Llama-2-70b-hf", "Llama-2-7b-hf"]
    with pytest.raises(FormatError, match="bundled: bundled:h100-sxm"):
        load_gpu_profile("bundled:a100")


def test_with_the_measured_gemm_curve_the_fit_finds_the_scale_and_a_decode_only_run_keeps_the_curve():
    # --gemm-efficiency measured: the weight matmuls run at f × e(M, N·K) (accounting/gemm_efficiency.py). A run
    # generated at f = 0.8 (kernels at 0.8 of Vidur's measured ones), bandwidth 0.65: the prefill steps (200–3,000-token
    # prompts) see f through the curve, and the fit finds it back (measured 0.830 / 0.632: within 5%).
    # Then a decode-only run (8-token prompts, 300 outputs): no step reaches the ~190 tokens where the curve's FLOP
    # time passes the weight read, so f is not seen: the objective is the same float at every f (the search drifted
    # it to 0.29 along that plateau before fit_checks.flops_seen). The fit says so and keeps the uncalibrated default,
    # 1.0 × the curve: a 384-token step is priced at e(384, 218M) = 0.479 of peak, the measured kernels'.
    from kvledger.accounting.gemm_efficiency import gemm_curve

    reqs = _workload()
    blank = MeasuredRun("synthetic", "synthetic", reqs, RunRecords([], RunMetadata("synthetic", "synthetic")))
    setup = engine_for(SimRequestArgs(model=MODEL, gpu=GPU, tp=1, gpu_profile="none", max_model_len=8192,
                                      gemm_efficiency="measured"), blank)
    truth = roofline_with(setup, 0.8, TRUE_BW)
    assert truth.gemm_curve is gemm_curve("nvidia_h100_sxm")
    run = MeasuredRun("synthetic", "synthetic", reqs, replay(blank, setup.config, truth).records)
    fit = fit_gpu_fractions([(run, setup)])
    assert fit.gemm_efficiency == "measured"
    assert fit.flops_fraction == pytest.approx(0.8, rel=0.05) and fit.bandwidth_fraction == pytest.approx(TRUE_BW,
                                                                                                          rel=0.05)
    assert gpu_profile_dict(fit, [], ["synthetic"])["gemm_efficiency"] == "measured"
    dec = [RequestSpec(r.request_id, r.arrival_s, 8, 300) for r in reqs[:60]]
    blank = MeasuredRun("dec", "dec", dec, RunRecords([], RunMetadata("synthetic", "synthetic")))
    seen = MeasuredRun("dec", "dec", dec, replay(blank, setup.config, roofline_with(setup, 0.8, TRUE_BW)).records)
    got = fit_gpu_fractions([(seen, setup)])
    cost = roofline_with(setup, got.flops_fraction, got.bandwidth_fraction)
    shape = StepShape(384, 2, 384, 384 * 385 / 2, 0, 0)
    c = cost.costs(shape)  # the matmul term: the step less its attention and layer kernels
    share = c.matmul_flops / (cost.peak_flops * (cost.step_time_s(shape) - cost.attention_s(c) - c.layer_kernels_s))
    e384 = gemm_curve("nvidia_h100_sxm").efficiency(384, cost.gemm_nk)
    assert (got.flops_seen, got.flops_fraction, fit.flops_seen) == (False, 1.0, True)
    assert share == pytest.approx(e384) and 0.47 < e384 < 0.49
    assert got.bandwidth_fraction == pytest.approx(TRUE_BW, rel=0.05)


def test_the_gpu_fit_never_ends_above_its_start():
    # a run the roofline generated at the start fractions themselves (0.7/0.8, on neither grid): its objective
    # there is exactly 0 (the replay is the run), and every grid point is above it. Before the start was a
    # candidate, the pattern search walked on from the best grid point and ended above 0 (kubecon's four stages
    # with --fit-frontend printed 0.09007 at 0.7/0.8 → 0.09029); now it stays at the start
    reqs = _workload(n=60)
    blank = MeasuredRun("at-start", "at-start", reqs, RunRecords([], RunMetadata("synthetic", "synthetic")))
    setup = engine_for(SimRequestArgs(model=MODEL, gpu=GPU, tp=1, gpu_profile="none", max_model_len=8192,
                                      gemm_efficiency="flat"), blank)  # flat: the fractions alone (see the docstring)
    assert 0.7 not in GRID_FLOPS and 0.8 not in GRID_BANDWIDTH
    truth = replay(blank, setup.config, roofline_with(setup, 0.7, 0.8)).records
    said: list[str] = []
    fit = fit_gpu_fractions([(MeasuredRun("at-start", "at-start", reqs, truth), setup)], progress=said.append)
    assert fit.objective_start == 0.0 and fit.objective <= fit.objective_start
    assert (fit.flops_fraction, fit.bandwidth_fraction) == (0.7, 0.8)
    # progress: the grid, then one line per refine factor (calibrate prints them on a terminal's stderr)
    assert said[0].startswith("start and 16 grid points × 1 run(s) replayed") and len(said) == 4


def test_calibrate_says_when_the_flop_fraction_was_not_fitted():
    # a profile whose fit saw no step that prices the FLOPs (fit_checks.flops_seen False) prints that its FLOP fraction
    # is the default's, 1.000 under the measured curve, not a fit; one that saw them says nothing of the kind
    from rich.console import Console

    from kvledger.report.calibration_view import render_gpu_profile

    def shown(seen: bool) -> str:
        con = Console(record=True, width=300)
        p = {"gpu": "NVIDIA H100 80GB SXM5", "flops_fraction": 1.0, "bandwidth_fraction": 0.65,
             "gemm_efficiency": "measured", "runs": [],
             "fit": {"objective_start": 0.4, "objective": 0.0, "num_replays": 47, "flops_seen": seen}}
        render_gpu_profile(p, con, None)
        return " ".join(con.export_text().split())

    assert ("FLOP fraction not fitted: no step of these runs sees it (the objective is the same at every value tried; "
            "kvledger.calibration.fit_checks), so it is the uncalibrated default's, 1.000") in shown(False)
    assert "not fitted" not in shown(True)


def test_over_pcie_the_fit_finds_the_hosts_all_reduce_link_share_and_the_profile_prices_it(tmp_path):
    # truth: Llama-3.1-8B on RTX PRO 6000 (PCIe Gen5, 64 GB/s a direction, no NVLink) at 0.45/0.65 of peak, its TP 2
    # all-reduces at 0.6 of the link (38.4 GB/s) where the default rule prices 0.35 (22.4 GB/s). A 2,000-token
    # prompt's 64 all-reduces of 16.4 MB take 64 × (31.4 µs + 16.4 MB ÷ 38.4 GB/s) = 29.3 ms at 0.6 and 48.8 ms at
    # 0.35, beside 62 ms of matmuls at 0.45 of 500 TFLOP/s. Its matmul FLOPs and all-reduce bytes both grow with the
    # tokens, so the TP 2 run alone tells only their sum (fitted alone it lands at a share of 0.36 with a FLOP share of
    # 0.63); the TP 1 run of the same model fixes the FLOP share (link_fit.py).
    from kvledger.calibration.link_fit import link_applies

    items = []
    for tp in (1, 2):
        reqs = _workload(80, rate=4.0, seed=tp)
        blank = MeasuredRun(f"tp{tp}", "synthetic", reqs, RunRecords([], RunMetadata("synthetic", "synthetic")))
        setup = engine_for(SimRequestArgs(model=MODEL, gpu="RTX PRO 6000", tp=tp, gpu_profile="none",
                                          max_model_len=8192, gemm_efficiency="flat"), blank)
        truth = replay(blank, setup.config, roofline_with(setup, TRUE_FLOPS, TRUE_BW, link_share=0.6)).records
        items.append((MeasuredRun(f"tp{tp}", "synthetic", reqs, truth), setup))
    assert link_applies(items) and not link_applies(items[:1])
    assert items[1][1].cost.link_bytes_per_s == pytest.approx(22.4e9)  # the default rule
    fit = fit_gpu_fractions(items)
    assert fit.link_share == pytest.approx(0.6, rel=0.1)
    assert fit.flops_fraction == pytest.approx(TRUE_FLOPS, rel=0.05)
    assert fit.bandwidth_fraction == pytest.approx(TRUE_BW, rel=0.05)
    prof = gpu_profile_dict(fit, [{"label": "tp2", "model": MODEL, "tp": 2}], ["synthetic"])
    assert (prof["version"], prof["allreduce_link_share"]) == (4, fit.link_share)
    path = tmp_path / "rtx.json"
    path.write_text(json.dumps(prof))
    priced = prepare(SimRequestArgs(model=MODEL, gpu="RTX PRO 6000", tp=2, num_requests=5, gpu_profile=str(path),
                                    gemm_efficiency="flat"))
    # the profile's share of the host link's 128 / 2 = 64 GB/s a direction prices every all-reduce
    assert priced.cost.link_bytes_per_s == pytest.approx(64e9 * fit.link_share)
    assert f"at {fit.link_share:.0%} of the host link's 64 GB/s a direction (the GPU profile's fit" in \
        priced.cost_info["source"]
    from rich.console import Console

    from kvledger.report.calibration_view import render_gpu_profile

    con = Console(record=True, width=200)
    render_gpu_profile(prof, con, None)
    assert f"TP all-reduces at {fit.link_share:.3f} of the link's one-direction bandwidth" in con.export_text()


def test_a_link_share_given_to_the_fit_is_held_and_recorded():
    # the same synthetic TP 1 + TP 2 pair (true share 0.6), replayed with --allreduce-link-share 0.6 given: nothing to
    # fit for the link (link_fit.link_applies), the fractions land as before, the profile records the share as given
    items = []
    for tp in (1, 2):
        reqs = _workload(80, rate=4.0, seed=tp)
        blank = MeasuredRun(f"tp{tp}", "synthetic", reqs, RunRecords([], RunMetadata("synthetic", "synthetic")))
        setup = engine_for(SimRequestArgs(model=MODEL, gpu="RTX PRO 6000", tp=tp, gpu_profile="none",
                                          max_model_len=8192, gemm_efficiency="flat", allreduce_link_share=0.6), blank)
        truth = replay(blank, setup.config, roofline_with(setup, TRUE_FLOPS, TRUE_BW)).records  # the setup's 0.6
        items.append((MeasuredRun(f"tp{tp}", "synthetic", reqs, truth), setup))
    fit = fit_gpu_fractions(items)
    assert (fit.link_share, fit.link_given) == (0.6, True)
    assert fit.flops_fraction == pytest.approx(TRUE_FLOPS, rel=0.05)
    assert fit.bandwidth_fraction == pytest.approx(TRUE_BW, rel=0.05)
    prof = gpu_profile_dict(fit, [], ["synthetic"])
    assert prof["allreduce_link_share"] == 0.6 and prof["fit"]["allreduce_link_share_given"] is True


def test_a_fit_over_dense_and_moe_runs_is_flagged():
    # one pair of fractions cannot serve both kernel families (gpu_profile_file.mixed_families_note): a dense model
    # (Llama-3.1-8B, no experts) beside an MoE one (Qwen3-30B-A3B, 128 experts) is flagged, naming both; runs of one
    # family are not
    from kvledger.calibration.gpu_profile_file import mixed_families_note
    from kvledger.catalog.models import load_model

    dense, moe = load_model("meta-llama/Llama-3.1-8B"), load_model("Qwen/Qwen3-30B-A3B")
    assert (dense.is_moe, moe.is_moe) == (False, True)
    (note,) = mixed_families_note([dense, moe, dense])
    assert note.startswith("WARNING: the runs mix dense models (") and moe.name in note and dense.name in note
    assert mixed_families_note([dense, dense]) == [] and mixed_families_note([moe]) == []


def test_one_model_flag_over_runs_of_several_models_is_refused(tmp_path):
    # the records of the two public RTX PRO 6000 runs name Qwen/Qwen3-32B and deepseek-ai/DeepSeek-V3.2-Exp-16L64E:
    # one --model would replay the Qwen run as DeepSeek's config (a fresh user's trial fitted a link share of 0.05 that
    # way); refused before anything is replayed, naming both models, and nothing is written
    from pathlib import Path

    from typer.testing import CliRunner

    from kvledger.cli.main import app

    pub = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "public-runs"
    ds, qwen = pub / "llmservingsim-rtxpro6000-deepseek-v32-16l64e", pub / "llmservingsim-rtxpro6000-qwen3-32b"
    out = tmp_path / "p.json"
    res = CliRunner().invoke(app, ["calibrate", "--scope", "gpu", str(ds / "vllm" / "requests.jsonl"),
                                   str(qwen / "vllm" / "requests.jsonl"), "--gpu", "RTX PRO 6000", "--model",
                                   str(ds / "model" / "config.json"), "--out", str(out)])
    from kvledger.errors import InputError

    # the InputError the command raised (the console entry point prints it as one line and exits 2)
    assert isinstance(res.exception, InputError) and not out.exists()
    assert "their records name 2 models (Qwen/Qwen3-32B, deepseek-ai/DeepSeek-V3.2-Exp-16L64E)" in str(res.exception)
