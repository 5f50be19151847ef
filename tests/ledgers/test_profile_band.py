"""The band of a figure priced by a GPU profile (kvledger.ledgers.profile_band): widened for few calibrated points,
another model or TP, a poor fit; never narrower than the fit's own in-sample errors."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

from kvledger.ledgers.error_band import error_band, stored_bands
from kvledger.ledgers.profile_band import ProfileFacts, fit_verdict, poor_fit, profile_band

GPU = "gpu/dense/vllm"


def _facts(*runs: dict) -> ProfileFacts:
    return ProfileFacts("GPU profile test.json", tuple((r["model"], r["tp"]) for r in runs), tuple(runs))


def _q(b) -> tuple[float, float]:
    return 1 / b.high - 1, 1 / b.low - 1  # back to the error's q10, q90


def _run(ttft=0.01, tpot=-0.02, thr=0.0, model="M8", tp=1, sat=False):
    return {"label": f"{model} run", "model": model, "tp": tp, "saturated": sat, "ttft_mean": ttft,
            "tpot_mean": tpot, "throughput": thr}


def test_the_calibrated_regime_has_too_few_points_so_the_cross_model_band_stands():
    # the stored gpu/dense/vllm throughput band comes from 2 RTX 4090 points, a profile used on the model it was
    # fitted on (< MIN_POINTS 10): even for the very model and TP the profile was fitted on, the band is the wider
    # per side of it and the cross-model one
    base, cm = error_band(GPU, "throughput"), stored_bands()["cross_model"][GPU]["throughput"]
    assert base.num_runs == 2 and base.lent_from is None
    b = profile_band(GPU, "throughput", _facts(_run(sat=True)), "M8", 1)
    q10, q90 = _q(b)
    assert q10 == pytest.approx(min(cm["q10"], 1 / base.high - 1))
    assert q90 == pytest.approx(max(cm["q90"], 1 / base.low - 1))
    assert "cross-model" in b.source and "fewer than 10" in b.source


def test_a_gpu_regime_without_a_point_below_saturation_takes_the_cross_model_band_not_the_rooflines():
    # every GPU-calibrated per-request run of the leave-one-deployment-out pool (LLMServingSim's two RTX 4090 runs)
    # is saturated, so lodo_bands stores no TPOT band for gpu/dense/vllm; error_band then stands the cross-model
    # band (GPU profiles fitted on other models, below saturation) for it — not a lent uncalibrated band, whose
    # errors are the plain roofline's (TPOT −15% … +2.5%), not a profile's fitted on other models
    assert "tpot_mean" not in stored_bands()["regimes"][GPU]
    cm = stored_bands()["cross_model"][GPU]["tpot_mean"]
    b = error_band(GPU, "tpot_mean")
    assert b.lent_from is None and b.num_runs == cm["num_runs"]
    assert _q(b) == pytest.approx((cm["q10"], cm["q90"]))
    assert b.source.startswith(f"errors of GPU profiles fitted on other models, on {cm['num_runs']} measured points")
    # a model-calibrated regime, which has no band of its own, borrows it from there as before
    assert error_band("model/dense/vllm", "tpot_mean").lent_from == GPU


def test_the_cross_model_band_is_symmetric_in_log_and_from_the_printedstored_bands():
    # half-width h: the conformal 80% rank of |ln(1 + e)|, each deployment weighted once. Three errors of three
    # deployments +10%, −50%, +30%: |ln| = 0.0953, 0.693, 0.262; k = 3 → level 0.8 × 4/3 > 1, so the largest, 0.693:
    # band e^−0.693 − 1 = −50% … e^0.693 − 1 = +100%
    sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
    import crossmodel_bands

    b = crossmodel_bands.symmetric_band([(0.10, "a", "H100"), (-0.50, "b", "H100"), (0.30, "c", "RTX4090")])
    assert b["q10"] == pytest.approx(-0.5) and b["q90"] == pytest.approx(1.0)
    assert b["gpu_ids"] == ["nvidia_h100_sxm", "nvidia_rtx_4090"]
    # the stored TPOT band: 31 values of 13 deployments (validate_all.py --sections gpuscope --json, 2026-12-04;
    # rule "all", the wider of the two: the GPU-profile rows below saturation). Level 0.8 × 14/13 = 0.8615 of the
    # pooled share (a deployment 1/13 = 0.0769, shared among its stages): ascending |ln(1 + e)|, the share reaches
    # 0.8308 at Llama-2-7B `codegen` stage 1 (+5.944%, |ln| 0.05774) and 0.9077 with CodeLlama-34B `roleplay`'s one
    # stage, +7.626% (|ln 1.07626| = 0.07349): q90 = +7.63%, q10 its mirror 1/1.07626 − 1 = −7.09%
    cm = stored_bands()["cross_model"][GPU]["tpot_mean"]
    assert cm["num_runs"] == 31 and cm["q90"] == pytest.approx(0.07626, abs=1e-5)
    assert cm["q10"] == pytest.approx(1 / (1 + 0.07626) - 1, abs=1e-5)
    assert math.log1p(cm["q90"]) == pytest.approx(-math.log1p(cm["q10"]))


def test_never_narrower_than_the_fit_in_sample():
    # an in-sample TTFT of −95% lies below the cross-model band's q10 (−64.7%) and, the fit being poor, below the
    # uncalibrated one's (−71.1%, error_bands.json): the band's q10 becomes −95%
    b = profile_band(GPU, "ttft_mean", _facts(_run(ttft=-0.05), _run(ttft=-0.95, tp=2)), "M8", 1)
    assert _q(b)[0] == pytest.approx(-0.95) and "in-sample" in b.source


def test_a_poor_fit_widens_to_the_uncalibrated_band():
    # stage 0 TTFT −56% in-sample: beyond ±15%, so a band takes the uncalibrated one where wider. Throughput: the
    # calibrated regime's own (−3.2 … +3.3%, 2 points) widens to the cross-model band (−11.6 … +13.1%), then its top
    # to the uncalibrated +22.6% (q10 −10.7% lies inside the cross-model −11.6%); the calibrated regime's −3.2% side
    # lies inside the cross-model band
    facts = _facts(_run(ttft=-0.563, tpot=0.131))
    assert poor_fit(facts.in_sample) == ["M8 run: ttft mean -56.3% (limit ±15%)"]
    unc = error_band("uncalibrated/dense/vllm", "throughput")
    b = profile_band(GPU, "throughput", facts, "M70", 4)
    assert _q(b)[0] <= 1 / unc.high - 1 + 1e-12 and _q(b)[1] >= 1 / unc.low - 1 - 1e-12
    assert "fit is poor (0 of 1 runs within" in b.source
    assert "M70 TP 4 is not what the profile was fitted on" in b.source
    # the cross-model band holds the regime's own −3.2 … +3.3% whole: it is the band used, named first in one sentence
    assert ("calibrated regime gpu/dense/vllm: the cross-model band -11.6% … +13.1% (15 runs" in b.source
            and "in place of the regime's own -3.2% … +3.3% from 2 measured points on NVIDIA GeForce RTX 4090"
            in b.source)
    assert "widened, each side, to take in the uncalibrated band -10.7% … +22.6%: -11.6% … +22.6%" in b.source
    # TPOT: the cross-model band −7.1 … +7.6% stands for the regime; the poor fit widens its top to the uncalibrated
    # +11.8% (its −6.3% lies inside), then to the fit's own +13.1%. Each widening states the band it ends at
    # (fresh-user trial: "widened to the uncalibrated band −85.8% … −21.5%" read as a narrowing of −79.0% … +376.2%)
    t = profile_band(GPU, "tpot_mean", facts, "M70", 4)
    lo, hi = _q(t)
    assert (lo, hi) == pytest.approx((-0.0709, 0.131), abs=1e-4)
    assert "widened, each side, to take in the uncalibrated band -6.3% … +11.8%: -7.1% … +11.8%" in t.source
    # 4 of 5 runs within is issue 23's 80%: not poor, the band stays the cross-model one
    five = _facts(*[_run()] * 4, _run(ttft=-0.563))
    assert fit_verdict(five.in_sample)[:1] == (False,) and "poor" not in profile_band(GPU, "throughput", five).source


def test_saturated_runs_are_judged_on_throughput_only():
    # a saturated run's TTFT −60% is its queue, not the fit: not poor; its throughput −12% is (limit 10%)
    assert poor_fit([_run(ttft=-0.6, tpot=-0.3, thr=-0.05, sat=True)]) == []
    assert poor_fit([_run(ttft=-0.6, thr=-0.12, sat=True)]) == ["M8 run: throughput -12.0% (limit ±10%)"]


def test_a_queue_in_the_prediction_alone_is_judged_as_a_real_miss_not_saturation():
    # calibrate records the sides whose queue kept growing; with the simulated side alone the measured run kept up,
    # so its TTFT +40% is the profile's miss (calibrate/validate: "a real miss, not a queue to discount"), beyond
    # ±15%, not hidden behind its throughput −2% (within 10%) as a saturated run's would be
    predicted = {"sides": ["simulated"], "notes": ["simulated: its queue grew"]}
    assert poor_fit([_run(ttft=0.4, thr=-0.02, sat=predicted)]) == ["M8 run: ttft mean +40.0% (limit ±15%)"]
    assert fit_verdict([_run(ttft=0.4, thr=-0.02, sat=predicted)])[0] is True
    # the measured side named (alone or with the prediction's): saturated, judged on throughput only
    for sides in (["measured"], ["measured", "simulated"]):
        assert poor_fit([_run(ttft=0.4, thr=-0.02, sat={"sides": sides, "notes": []})]) == []


def test_no_profile_keeps_the_regime_band():
    assert profile_band("uncalibrated/dense/vllm", "ttft_mean", None) == error_band("uncalibrated/dense/vllm",
                                                                                     "ttft_mean")


def test_a_profile_band_standing_on_the_cross_model_band_says_so_once():
    # gpu/dense/vllm has no TPOT point of its own: its band is the cross-model one, which a profile used on another
    # model would otherwise be "widened, each side, to take in" — the same band again (a fresh reading of validate's
    # band line repeated −14.1% … +16.4% twice); now the source names it once, and the band is exactly it
    cm = stored_bands()["cross_model"][GPU]["tpot_mean"]
    b = profile_band(GPU, "tpot_mean", _facts(_run()), "M70", 4)
    assert _q(b) == pytest.approx((cm["q10"], cm["q90"]))
    assert b.source.count(f"{cm['q10']:+.1%} … {cm['q90']:+.1%}") == 1 and "widened" not in b.source
    assert "errors of GPU profiles fitted on other models" in b.source


def test_a_profile_checked_on_another_model_widens_that_models_band_to_its_error():
    # the bundled RTX PRO 6000 profile (fitted on Llama-3.1-8B TP 1) records Qwen3-32B TP 2 priced by it as an
    # out-of-sample check (benchmarks/build_gpu_profiles.py CHECKS): saturated, throughput +7.6%, TPOT −10.0% (its
    # all-reduces over PCIe at 0.35 of the link, tp_comm.py). A Qwen3-32B TP 2 figure's TPOT band must reach the real
    # TPOT at −10.0%: high end ≥ predicted / (1 − 0.100); the
    # Llama TP 1 figure (what it was fitted on) does not take the check in
    from kvledger.accounting.gpu_profile import bundled_gpu_profile, run_facts
    from kvledger.analyses.serving.prediction_bands import profile_facts
    from kvledger.ledgers.profile_band import profile_band

    prof = bundled_gpu_profile("NVIDIA RTX PRO 6000 Blackwell Server Edition")
    check, moe = prof.checks  # Qwen3-32B TP 2 (dense), then DeepSeek-V3.2-Exp-16L64E (FP8 MoE)
    assert check["model"] == "Qwen/Qwen3-32B" and check["tp"] == 2 and check["saturated"] is True
    assert check["tpot_mean"] == pytest.approx(-0.100, abs=0.001)
    facts = profile_facts(prof)
    qwen = profile_band("gpu/dense/vllm", "tpot_mean", facts, "Qwen/Qwen3-32B", 2)
    assert qwen.high >= 1 / (1 + check["tpot_mean"]) - 1e-9 and "checked on but not fitted on" in qwen.source
    llama = profile_band("gpu/dense/vllm", "tpot_mean", facts, prof.runs[0]["model"], 1)  # as a setup names it
    assert llama.high < qwen.high
    # the MoE check (saturated, throughput +13.9%: its routed experts priced by the fused-MoE kernel term, × the
    # default-config factor) widens an MoE figure's throughput band to it — low end ≤ predicted / 1.139 — and leaves a
    # dense model's alone
    assert (moe["moe"], check["moe"], moe["saturated"]) == (True, False, True)
    assert moe["throughput"] == pytest.approx(0.139, abs=0.001)
    mband = profile_band("gpu/moe/vllm", "throughput", facts, moe["model"], 1)
    assert mband.low <= 1 / (1 + moe["throughput"]) + 1e-9 and "DeepSeek-V3.2-Exp-16L64E TP 1: +13.9%" in mband.source
    dense = profile_band("gpu/dense/vllm", "throughput", facts, "Qwen/Qwen3-32B", 2)
    assert "DeepSeek" not in dense.source and dense.low > mband.low
    # calibrate records saturation as the sides whose queue kept growing: the measured side's is what judges a run
    assert run_facts({"model": "m", "tp": 1, "saturated": {"sides": ["measured", "simulated"]}})["saturated"] is True
    assert run_facts({"model": "m", "tp": 1, "saturated": {"sides": ["simulated"]}})["saturated"] is False
    assert run_facts({"model": "m", "tp": 1, "saturated": None})["saturated"] is None


def test_a_profile_fitted_on_saturated_runs_alone_has_the_uncalibrated_latency_bands_not_its_throughput():
    from kvledger.ledgers.profile_band import SATURATED_ONLY, latency_unmeasured

    # the bundled RTX 4090 profile's two runs are both saturated (their queue outlasted the load): only their
    # throughput was judged (_judged), so a TTFT or TPOT figure below saturation is no better known than the plain
    # roofline's; the throughput band keeps its own widening
    sat = _facts(_run(sat=True), _run(sat=True, model="M8b"))
    assert latency_unmeasured(sat.in_sample) and not latency_unmeasured(_facts(_run(sat=True), _run()).in_sample)
    assert not latency_unmeasured(_facts(_run(sat=None)).in_sample)  # a run that does not say: not claimed
    unc = error_band("uncalibrated/dense/vllm", "tpot_mean")
    b = profile_band(GPU, "tpot_mean", sat, "M8", 1)
    q10, q90 = _q(b)
    u10, u90 = _q(unc)
    assert q10 <= u10 + 1e-12 and q90 >= u90 - 1e-12  # at least the uncalibrated band, each side
    assert SATURATED_ONLY in b.source
    assert SATURATED_ONLY not in profile_band(GPU, "throughput", sat, "M8", 1).source
    assert SATURATED_ONLY not in profile_band(GPU, "tpot_mean", _facts(_run(sat=True), _run()), "M8", 1).source


def test_a_run_is_never_banded_by_its_own_out_of_sample_check():
    # validate on the DeepSeek-V3.2-Exp-16L64E run, priced by the bundled RTX PRO 6000 profile that records this very
    # run as a check (+13.9% throughput): the check is left out of its band (profile_facts' `judged`), so the band is
    # the dense cross-model one and the measured 2.62 req/s falls outside it; the same profile still carries the
    # check into the band of any other MoE figure (the test above)
    from pathlib import Path

    from kvledger.analyses.serving.sim_setup import SimRequestArgs
    from kvledger.calibration.validate import validate_file

    run = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "public-runs" / \
        "llmservingsim-rtxpro6000-deepseek-v32-16l64e"
    out = validate_file(str(run / "vllm"), SimRequestArgs(model=str(run / "model" / "config.json"),
                                                         gpu="RTX PRO 6000 Blackwell Server Edition", tp=None))
    b = out.bands["throughput"]
    assert "DeepSeek-V3.2-Exp-16L64E TP 1: +13.9%" not in b.source
    # the profile stores its check as measured when it was built (+13.9%); the run is priced today at +12.9% (the
    # fused-MoE refit of 2026-12-06 moved it): the band's top stays under the stored check either way
    assert b.errors()[1] < 0.139 and out.errors["throughput_rel_error"] == pytest.approx(0.129, abs=0.001)


def test_a_profile_that_saw_no_saturated_run_has_at_least_the_uncalibrated_capacity_band():
    # a fresh-user trial: a GPU profile fitted on two kubecon stages below saturation narrowed the capacity band's low
    # side to ×0.88 where the uncalibrated one is ×0.82. Nothing measured its capacity, so the throughput band takes
    # in the uncalibrated −10.7% … +22.6% (error_bands.json uncalibrated/dense/vllm throughput): the cross-model
    # −11.6% stays the low side, the top goes to +22.6%, so low = 1/1.2258 = 0.8158 ≤ the uncalibrated band's 0.8158
    from kvledger.ledgers.profile_band import capacity_unmeasured

    cm, unc = stored_bands()["cross_model"][GPU]["throughput"], error_band("uncalibrated/dense/vllm", "throughput")
    below = _facts(_run(), _run(model="M8b"))
    assert capacity_unmeasured(below.in_sample)
    b = profile_band(GPU, "throughput", below, "M70", 1)
    assert _q(b) == pytest.approx((cm["q10"], 1 / unc.low - 1))
    assert b.low <= unc.low + 1e-12 and b.high >= unc.high - 1e-12
    assert ("none of the profile's runs was saturated: nothing measured its capacity (saturation throughput), so "
            "widened, each side, to take in the uncalibrated band -10.7% … +22.6%: -11.6% … +22.6%") in b.source
    # an older file's null ("not said"): counted as not measured, and said so
    old = profile_band(GPU, "throughput", _facts(_run(sat=None), _run()), "M70", 1)
    assert "(1 of 2 do not say whether they were: counted as not)" in old.source and old.low == b.low
    # one saturated run measured it: the band is the cross-model one, as before
    one = profile_band(GPU, "throughput", _facts(_run(sat=True), _run()), "M70", 1)
    assert _q(one) == pytest.approx((cm["q10"], cm["q90"])) and "nothing measured its capacity" not in one.source
    # the latency bands of the below-saturation profile are untouched by the capacity rule
    assert "nothing measured its capacity" not in profile_band(GPU, "tpot_mean", below, "M70", 1).source


def test_the_calibrated_regimes_points_say_which_gpu_they_ran_on():
    # the gpu/dense/vllm throughput band's 2 points are two RTX 4090 deployments (error_bands.json gpu_ids
    # nvidia_rtx_4090), each predicted by the RTX 4090 profile fitted on the other: a profile fitted on the H100 must
    # not present them as its own, and says whose they are (a fresh-user trial could not tell)
    h100 = ProfileFacts("p", (("M8", 1),), (_run(sat=True),), gpu_id="nvidia_h100_sxm")
    src = profile_band(GPU, "throughput", h100, "M8", 1).source
    b = error_band(GPU, "throughput")
    q10, q90 = b.errors()
    # the band used is the cross-model one (2 points < 10), whose 15 runs include H100 ones (error_bands.json
    # cross_model gpu_ids): named first, the 2 RTX 4090 points after as what it replaces, with no "none measured on
    # H100" beside a band that was (a fresh-user trial read both in one explanation)
    assert ("the cross-model band -11.6% … +13.1% (15 runs priced by a GPU profile fitted on other models, from "
            "measured runs and load stages of 3 dense models on H100 and RTX PRO 6000" in src
            and f"in place of the regime's own {q10:+.1%} … {q90:+.1%} from 2 measured points on NVIDIA GeForce RTX "
            "4090" in src) and "none measured on" not in src and "(the profile's GPU)" not in src
    assert (f"{q10:+.1%}", f"{q90:+.1%}") == ("-3.2%", "+3.3%")  # the stored band the trial read
    rtx = ProfileFacts("p", (("M8", 1),), (_run(sat=True),), gpu_id="nvidia_rtx_4090")
    src = profile_band(GPU, "throughput", rtx, "M8", 1).source
    assert "from 2 measured points on NVIDIA GeForce RTX 4090" in src and "not on" not in src


def test_calibrate_records_whether_the_capacity_was_measured_for_a_gpu_profile_only():
    from kvledger.ledgers.profile_band import rows_fit_quality

    rows = [{"model": "m", "tp": 1, "saturated": False, "ttft_mean_rel_error": 0.01, "tpot_mean_rel_error": 0.0}]
    assert rows_fit_quality(rows, False, False)["capacity_unmeasured"] is True
    assert rows_fit_quality(rows, False, False, scope="model")["capacity_unmeasured"] is False  # not model_band's rule
    sat = [{**rows[0], "saturated": {"sides": ["measured"]}, "throughput_rel_error": 0.02}]
    assert rows_fit_quality(sat, False, False)["capacity_unmeasured"] is False
