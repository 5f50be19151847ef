"""Single-run validate prints the 80% bands of its regime on the figures the run is judged on, as validate --sweep
does (fresh-user trial: `validate FILE` computed the bands but printed none, while docs/calibration/guide.md said every
simulated TTFT, TPOT and throughput carries one).

Kubecon's `vllm` stages (uncalibrated roofline, dense, vLLM: regime uncalibrated/dense/vllm of
src/kvledger/ledgers/data/error_bands.json, each deployment weighted once), as multipliers of a simulated figure (low
= 1/(1 + q90), high = 1/(1 + q10)):
  ttft_mean  q10 -0.7114126846211342, q90 0.13928204280475986 (31 points, 13 deployments) → ×1/1.139282 = ×0.87775
             … ×1/0.288587 = ×3.46516
  tpot_mean  q10 -0.0634675885640601, q90 0.11751341474272681 (31 points, 13 deployments) → ×1/1.117513 =
             ×0.89484 … ×1/0.936532 = ×1.06777
  throughput q10 -0.10653252752212694, q90 0.2257610123633852 (9 points, 9 deployments driven past saturation; a
             t prediction interval) → ×1/1.225761 = ×0.81582 … ×1/0.893467 = ×1.11923
(the roofline as commands price it by default: the H100's measured matmul curve at FLOP fraction 1.0 and its layer
kernels, bandwidth 0.8)
LLMServingSim's RTX 4090 run, priced by the bundled GPU profile fitted on it (regime gpu/dense/vllm: throughput
q10 -0.0321, q90 +0.0327 on 2 points, fewer than 10, so widened each side to error_bands.json's cross_model band):
throughput q10 min(-0.0321, -0.11585787174613248) = -0.11586, q90 max(0.0327, 0.13103987248627713) = 0.13104 (15
runs, 7 deployments) → ×1/1.13104 = ×0.88414 … ×1/0.88414 = ×1.13104.
"""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from kvledger.calibration.compare import MetricRow
from kvledger.calibration.sweep_bands import run_bands
from kvledger.cli.main import app
from kvledger.ledgers.error_band import error_band

RUNS = Path(__file__).resolve().parents[3] / "shared" / "data" / "measured-runs"
KUBECON = RUNS / "inference-perf-kubecon-na-2025" / "vllm" / "results"
RTX4090 = RUNS / "llmservingsim" / "bench" / "examples" / "RTX4090" / "Llama-3.1-8B" / "vllm"
ARGS = ["--gpu", "H100", "--model", "meta-llama/Llama-3.1-8B"]
TPUT = (-0.10653252752212694, 0.2257610123633852)
KEYS = {"regime", "ttft_mean", "ttft_note", "tpot_mean", "latency_note", "saturation_throughput", "throughput_note"}
needs_runs = pytest.mark.skipif(not KUBECON.is_dir(), reason="../shared/data/measured-runs not beside the clone")


def _refuse(constant: str) -> None:
    raise ValueError(f"not strict JSON: {constant}")


def _validate(path: Path, args: list[str]) -> tuple[str, dict]:
    text = CliRunner().invoke(app, ["validate", str(path), *args], env={"COLUMNS": "100"})
    js = CliRunner().invoke(app, ["validate", str(path), *args, "--json"])
    assert text.exit_code == 0 and js.exit_code == 0, text.output + js.output
    return " ".join(text.output.split()), json.loads(js.output, parse_constant=_refuse)


@pytest.fixture(scope="module")
def stage0() -> tuple[str, dict]:
    return _validate(KUBECON / "stage_0_lifecycle_metrics.json", ARGS)


@pytest.fixture(scope="module")
def stage6() -> tuple[str, dict]:
    return _validate(KUBECON / "stage_6_lifecycle_metrics.json", ARGS)


@needs_runs
def test_a_run_below_saturation_prints_its_latency_bands(stage0):
    out, d = stage0
    # 1 req/s: simulated TTFT 9.888 ms → ×1/(1 + 0.13928) = ×0.87775 = 8.679 ms … ×1/(1 − 0.71141) = ×3.46516 =
    # 34.263 ms (measured 31.1 ms inside); simulated TPOT 6.799 ms → ×1/(1 + 0.11751) = ×0.89484 = 6.084 ms …
    # ×1/(1 − 0.06347) = ×1.06777 = 7.260 ms (measured 7.1 ms inside); q10/q90 of error_bands.json
    assert "│ TTFT mean │ 31.1 ms │ 9.9 ms │ -68.2% │ 8.7–34.3 ms ✓ │" in out
    assert "│ TPOT mean │ 7.1 ms │ 6.8 ms │ -4.7% │ 6.1–7.3 ms ✓ │" in out
    assert "│ throughput │ 1.02 req/s │ 1.02 req/s │ +0.1% │ — │" in out  # kept up: the offered load
    assert "│ TTFT p90 │ 35.4 ms │ 13.3 ms │ -62.6% │ │" in out  # never validated: no band
    assert ("bands: where a real engine's figure fell, given the simulated one, on 80% of the points behind them — "
            "TTFT mean, TPOT mean: leave-one-deployment-out errors at 31 measured points") in out
    assert "(kvledger.ledgers.error_band; regime uncalibrated/dense/vllm)" in out
    assert "no throughput band: the run was below saturation: its throughput is the offered load" in out
    assert " ✗ │" not in out  # no cell outside; the legend says both marks, the band column showing
    assert "✓: the measured figure lies inside its 80% band; ✗: outside it" in out
    b = d["error_bands"]
    assert (b["ttft_mean"]["predicted"], b["ttft_mean"]["low"], b["ttft_mean"]["high"]) == pytest.approx(
        (9.888e-3, 8.679e-3, 34.263e-3), abs=2e-6)
    assert (b["tpot_mean"]["low"], b["tpot_mean"]["high"]) == pytest.approx((6.084e-3, 7.260e-3), abs=2e-6)
    assert b["tpot_mean"]["low"] == pytest.approx(b["tpot_mean"]["predicted"] / (1 + 0.11751341474272681), rel=1e-12)


@needs_runs
def test_a_measured_mean_outside_its_band_is_marked():
    root = KUBECON.parent.parent
    out, d = _validate(root / "vllm+chunking_and_prefix_caching" / "results" / "stage_3_lifecycle_metrics.json", ARGS)
    # kubecon's chunking_and_prefix_caching configuration at its fourth rate: simulated TPOT 9.170 ms → ×1/(1 + 0.11751)
    # = 8.205 ms … ×1/(1 − 0.06347) = 9.791 ms; measured 10.1 ms (error −8.9%, below q10 −6.3%) above it
    assert "│ TPOT mean │ 10.1 ms │ 9.2 ms │ -8.9% │ 8.2–9.8 ms ✗ │" in out
    assert "│ TTFT mean │ 32.2 ms │ 13.8 ms │ -57.2% │ 12.1–47.8 ms ✓ │" in out  # 13.784 ms × 0.87775 … × 3.46516
    assert "✗: outside it (the simulator erred more there" in out
    b = d["error_bands"]["tpot_mean"]
    assert (b["low"], b["high"]) == pytest.approx((8.205e-3, 9.791e-3), abs=2e-6)


@needs_runs
def test_a_measured_mean_on_an_end_of_its_band_is_inside():
    # kubecon's batch_size configuration at 1 req/s: its TTFT error, −71.141%, is the stored band's q10 (this stage
    # is among the runs the band was built from), so the band's top, 9.615 ms × 1/(1 − 0.71141) = 33.319 ms, is its
    # measured 33.3 ms up to float rounding (6.9e-18 s past it): on the end, inside, no ✗
    out, d = _validate(KUBECON.parent.parent / "vllm+batch_size" / "results" / "stage_0_lifecycle_metrics.json", ARGS)
    assert "│ TTFT mean │ 33.3 ms │ 9.6 ms │ -71.1% │ 8.4–33.3 ms ✓ │" in out and " ✗ │" not in out
    b = d["error_bands"]["ttft_mean"]
    assert (b["low"], b["high"]) == pytest.approx((8.440e-3, 33.319e-3), abs=2e-6)


@needs_runs
def test_a_saturated_stage_prints_the_throughput_band_and_no_latency_band(stage6):
    out, d = stage6
    # 183.38 req/s requested, the client achieved 106.5 (< 95%): at saturation, replayed paced under its 440 slots.
    # Simulated throughput 101.092 req/s → /1.225761 = 82.473 … /0.893467 = 113.146 req/s; measured 103.08 inside
    assert "│ throughput │ 103.08 req/s │ 101.09 req/s │ -1.9% │ 82.47–113.15" in out  # (unit wraps at 100 columns)
    # ⚠ on every latency: the measured stage is judged saturated on its rates, as calibrate's rows judge it
    assert "│ TTFT mean │ 2,943.2 ms │ 2,985.2 ms │ +1.4% ⚠ │ — │" in out
    assert "│ TPOT mean │ 19.0 ms │ 19.5 ms │ +2.2% ⚠ │ — │" in out
    assert d["saturated"]["sides"] == ["measured"]
    assert "— saturation throughput: leave-one-deployment-out errors at 9 measured points" in out
    assert ("no TTFT or TPOT mean band: the measured stage was at saturation (client achieved 106.5 and engine served "
            "103.1 of 183.4 req/s requested") in out
    b = d["error_bands"]
    assert b["ttft_mean"] is None and b["tpot_mean"] is None and b["throughput_note"] is None
    sat = b["saturation_throughput"]
    assert sat["predicted"] == next(r["predicted"] for r in d["comparison"]["rows"] if r["metric"] == "throughput")
    assert sat["low"] == pytest.approx(sat["predicted"] / (1 + TPUT[1]), rel=1e-12)
    assert sat["high"] == pytest.approx(sat["predicted"] / (1 + TPUT[0]), rel=1e-12)
    assert (sat["low"], sat["high"]) == pytest.approx((82.47, 113.15), abs=0.005) and sat["num_runs"] == 9


@needs_runs
def test_a_saturated_per_request_run_prints_the_throughput_band():
    out, d = _validate(RTX4090, ["--gpu", "RTX4090"])
    # both queues grew (last quarter waited 120.66 s vs 1.20 s); simulated 1.6440 req/s → /(1 + q90) = /1.13104 =
    # 1.454 … /(1 + q10) = /0.88414 = 1.859 req/s (the cross-model band, −11.59 … +13.10% over 15 values, the
    # calibrated regime having 2 points); measured 1.63 inside
    assert "│ throughput │ 1.63 req/s │ 1.64 req/s │ +0.6% │ 1.45–1.86 req/s ✓ │" in out
    assert "│ TTFT mean │ 65.46 s │ 66.12 s │ +1.0% ⚠ │ — │" in out
    assert "no TTFT or TPOT mean band: the measured run was saturated (its queue grew)" in out
    sat = d["error_bands"]["saturation_throughput"]
    want = (sat["predicted"] / (1 + 0.13103987248627713), sat["predicted"] / (1 - 0.11585787174613248))
    assert (sat["low"], sat["high"]) == pytest.approx(want, rel=1e-9)
    assert d["error_bands"]["regime"] == "gpu/dense/vllm"


@needs_runs
def test_json_keys_are_the_sweeps_for_one_run(stage0, stage6):
    for _, d in (stage0, stage6):
        assert set(d["error_bands"]) == KEYS
        assert list(d)[-2:] == ["error_bands", "notes"]
    assert stage0[1]["error_bands"]["saturation_throughput"] is None
    assert stage0[1]["error_bands"]["latency_note"] is None
    assert stage0[1]["error_bands"]["ttft_note"] is None  # 1 req/s: not at its knee, its TTFT band shown
    for band in (stage0[1]["error_bands"]["ttft_mean"], stage6[1]["error_bands"]["saturation_throughput"]):
        assert set(band) == {"predicted", "low", "high", "regime", "num_runs", "source", "measured", "covers"}
        assert band["covers"] is (band["low"] <= band["measured"] <= band["high"])  # inside: True, as the ✓ says
    # a sweep judges its stages together (its own error_bands): its runs carry none
    stages = sorted(str(p) for p in KUBECON.glob("stage_[01]_lifecycle_metrics.json"))
    sweep = json.loads(CliRunner().invoke(app, ["validate", *stages, *ARGS, "--json"]).output)
    assert "error_bands" in sweep and all("error_bands" not in r for r in sweep["runs"])


def test_the_simulated_queue_growing_moves_the_band_to_throughput():
    # a per-request run whose measured queue kept up but whose simulated one grew: no latency band (the simulated
    # latency measures its queue), the throughput band around the simulated 4.0 req/s: /1.225761 = 3.263 …
    # /0.893467 = 4.477 req/s
    bands = {m: error_band("uncalibrated/dense/vllm", m) for m in ("ttft_mean", "tpot_mean", "throughput")}
    rows = [MetricRow("TTFT mean", "s", 0.1, 0.5, 4.0), MetricRow("throughput", "req/s", 5.0, 4.0, -0.2)]
    run = SimpleNamespace(saturated={"sides": ["simulated"]}, bands=bands, comparison=SimpleNamespace(rows=rows))
    b = run_bands(run, None)
    assert b.ttft_mean is None and b.latency_note.startswith("the simulated queue grew")
    assert (b.saturation_throughput.low, b.saturation_throughput.high) == pytest.approx((3.263, 4.477), abs=5e-4)
    kept_up = run_bands(SimpleNamespace(saturated=None, bands=bands, comparison=SimpleNamespace(rows=rows)), None)
    # 0.5 s × 0.87775 = 0.439 s … × 3.46516 = 1.733 s; throughput: the offered load, no band
    assert (kept_up.ttft_mean.low, kept_up.ttft_mean.high) == pytest.approx((0.439, 1.733), abs=5e-4)
    assert kept_up.saturation_throughput is None and kept_up.throughput_note.startswith("the run was below")


@needs_runs
def test_a_band_around_its_prediction_adds_no_read_the_band_line(stage0):
    # kubecon stage 0: simulated TTFT 9.9 ms, band 8.7–34.3 ms (the uncalibrated regime's TTFT errors, each
    # deployment weighted once, reach +13.9%: the band holds the point), measured 31.1 ms inside at −68.2%
    out, _ = stage0
    assert "read the band, not the point" not in out


def test_a_band_wholly_above_its_prediction_says_read_the_band():
    # the band validate prints for kubecon stage 0 when its regime's errors were all negative (before deployments were
    # weighted once, q10 −70.33%, q90 −14.02%): 9.888 ms → 11.500 … 33.323 ms, both ends above the point, so the point
    # is under-predicted; TPOT's 6.332 … 7.210 ms holds its 6.799 ms and is not named
    from kvledger.analyses.serving.prediction_bands import PredictionBand
    from kvledger.report.validation_figures import biased_line

    line = biased_line({"TTFT mean": PredictionBand(9.888e-3, 11.500e-3, 33.323e-3, "uncalibrated/dense/vllm", 31, ""),
                        "TPOT mean": PredictionBand(6.799e-3, 6.332e-3, 7.210e-3, "uncalibrated/dense/vllm", 31, "")})
    assert line == ("read the band, not the point: TTFT mean under-predicted (the 80% band lies wholly on one side: "
                    "the simulator erred that way on this regime's measured points, so a large error inside the band "
                    "is the usual one)")
