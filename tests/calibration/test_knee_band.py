"""A run or sweep stage at or past its knee (kvledger.calibration.knee_growth) keeps no 80% band on its mean TTFT: there
the mean TTFT measures the queue, not the step-cost error the leave-one-deployment-out band was measured on
(kvledger.calibration.sweep_bands.knee_note). Its TPOT band stays. Before, validate printed the TTFT band of a flagged
run as if it held (the Llama-2-7B `general` stage at 20 req/s, bandwidth at 68%: "11.59–63.90 s ✗" beside a run the
same output called at its knee).

The bands of regime uncalibrated/dense/vllm (src/kvledger/ledgers/data/error_bands.json), as multipliers of a
simulated figure (low = 1/(1 + q90), high = 1/(1 + q10)):
  ttft_mean q10 -0.7114126846211342, q90 0.13928204280475986 (31 points, 13 deployments) → ×1/1.139282 =
    ×0.877746 … ×1/0.288587 = ×3.465156
  tpot_mean q10 -0.0634675885640601, q90 0.11751341474272681 (31 points, 13 deployments) → ×1/1.117513 =
    ×0.894844 … ×1/0.936532 = ×1.067769
"""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path
from types import SimpleNamespace

import pytest
from rich.console import Console
from typer.testing import CliRunner

from kvledger.calibration.compare import Comparison, MetricRow
from kvledger.calibration.knee_growth import at_knee
from kvledger.calibration.sweep_bands import knee_note, run_bands, sweep_bands
from kvledger.calibration.validate import RunValidation, SweepSide, SweepValidation
from kvledger.cli.main import app
from kvledger.dynamics.engine.config import EngineConfig
from kvledger.ledgers.error_band import METRICS, error_band
from kvledger.records import RequestRecord, RunMetadata, RunRecords
from kvledger.report.calibration_view import render_validation

RUNS = Path(__file__).resolve().parents[3] / "shared" / "data" / "measured-runs"
GENERAL = RUNS / "inference-sim-training" / "default_args" / "20260217-231439-llama-2-7b-tp1-general" / "results"
needs_runs = pytest.mark.skipif(not GENERAL.is_dir(), reason="../shared/data/measured-runs not beside the clone")
BANDS = {m: error_band("uncalibrated/dense/vllm", m) for m in METRICS}


def _run(waits: tuple[float, float, float, float]) -> RunRecords:
    """40 requests, one every 0.25 s (10 per quarter of the arrivals), each quarter's TTFT ``waits[k]`` s."""
    recs = [RequestRecord(f"r{i}", 0.25 * i, 100, 10, 0.25 * i + waits[i // 10], 0.25 * i + waits[i // 10] + 1.0)
            for i in range(40)]
    return RunRecords(recs, RunMetadata("t", "t"))


# quarters 0.5, 0.6, 0.8, 1.25 s: 1.25 / 0.5 = 2.5 × the first ≥ 2 → at its knee; 0.95 / 0.5 = 1.9 < 2 → below
KNEE = at_knee(_run((0.5, 0.55, 0.6, 0.95)), _run((0.5, 0.6, 0.8, 1.25)))


def _validation(knee, ttft=0.79, rate=None) -> RunValidation:
    """A run with simulated mean TTFT ``ttft`` s (measured 0.5 s) and TPOT 19 ms (measured 20 ms), its regime's
    bands, below saturation."""
    rows = [MetricRow("TTFT mean", "s", 0.5, ttft, ttft / 0.5 - 1), MetricRow("TPOT mean", "s", 0.02, 0.019, -0.05),
            MetricRow("throughput", "req/s", 4.0, 3.98, -0.005)]
    return RunValidation("r", "f.jsonl", 40, 0, "m", "g", 1, "uncalibrated", {"name": "roofline", "source": "s"},
                         EngineConfig(num_gpu_blocks=100, max_model_len=512), rate, Comparison("r", rows, 40, 40), {},
                         None, [], bands=BANDS, at_knee=knee)


def _text(r) -> str:
    """The rendered view, its runs of spaces cut to one."""
    con = Console(record=True, width=400)
    render_validation(r, con)
    return " ".join(con.export_text().split())


def test_a_run_at_its_knee_keeps_its_tpot_band_and_no_ttft_band():
    b = run_bands(_validation(KNEE), None)
    assert b.ttft_mean is None and b.latency_note is None
    assert b.ttft_note == knee_note(_validation(KNEE))
    assert b.ttft_note.startswith("at or past its knee (the simulated run's waits for a first token grew through it)")
    # TPOT 19 ms × 1/(1 + 0.117513) = ×0.894844 = 17.002 ms … × 1/(1 − 0.063468) = ×1.067769 = 20.288 ms
    # (error_bands.json, uncalibrated/dense/vllm TPOT q90 and q10)
    assert (b.tpot_mean.low, b.tpot_mean.high) == pytest.approx((0.0170020, 0.0202876), abs=1e-7)
    assert b.saturation_throughput is None  # below saturation: the throughput is the offered load, as without a knee
    # the same run below its knee: TTFT 0.79 s × 1/(1 + 0.139282) = ×0.877746 … × 1/(1 − 0.711413) = ×3.465156
    below = run_bands(_validation(None), None)
    assert (below.ttft_mean.low, below.ttft_mean.high) == pytest.approx((0.693419, 2.737473), abs=1e-6)
    assert below.ttft_note is None
    d = json.loads(json.dumps(b.to_dict()))
    assert list(d) == ["regime", "ttft_mean", "ttft_note", "tpot_mean", "latency_note", "saturation_throughput",
                       "throughput_note"]
    assert d["ttft_mean"] is None and d["ttft_note"].startswith("at or past its knee")


def test_both_sides_at_the_knee_say_so():
    grew = _run((0.5, 0.6, 0.8, 1.25))
    assert knee_note(SimpleNamespace(at_knee=at_knee(grew, grew))).startswith("at or past its knee (both runs' waits")
    assert knee_note(SimpleNamespace(at_knee=None)) is None


def test_the_single_run_view_shows_no_ttft_band_for_a_run_at_its_knee():
    run = _validation(KNEE)
    text = _text(replace(run, error_bands=run_bands(run, None)))
    assert "│ TTFT mean │ 500.0 ms │ 790.0 ms │ +58.0% ↗ │ — │" in text
    assert "693.4" not in text  # the band around 0.79 s (× 0.877746 = 693.4 ms …), not shown
    # TPOT 19 ms × 0.894844 = 17.0 ms … × 1.067769 = 20.3 ms; the measured 20.0 ms lies inside (its error −5.0% is
    # between q10 −6.3% and q90 +11.8%): marked inside
    assert "│ TPOT mean │ 20.0 ms │ 19.0 ms │ -5.0% │ 17.0–20.3 ms ✓ │" in text
    assert "no TTFT mean band: at or past its knee (the simulated run's waits for a first token grew" in text
    below = _validation(None)  # the control: the same run below its knee prints its band, 790 ms × 0.877746 …
    assert "│ TTFT mean │ 500.0 ms │ 790.0 ms │ +58.0% │ 693.4–2,737.5 ms ✗ │" in \
           _text(replace(below, error_bands=run_bands(below, None)))


def _stage(rate: float) -> SimpleNamespace:
    return SimpleNamespace(requested_rate=rate, achieved_rate=rate, requests_per_s=rate)  # below saturation


def test_a_sweep_stage_at_its_knee_has_no_ttft_band():
    # 2 req/s below its knee: TTFT 200 ms × 0.877746 = 175.5 ms … × 3.465156 = 693.0 ms; 4 req/s at its knee: TTFT
    # 790 ms (no band); both TPOT 19 ms × 0.894844 … × 1.067769 → 17.0–20.3 ms, the measured 20.0 ms inside it
    runs = [_validation(None, 0.2, rate=2.0), _validation(KNEE, rate=4.0)]
    b = sweep_bands(runs, [_stage(2.0), _stage(4.0)], 3.98)
    assert b.ttft_mean[1] is None and b.ttft_notes == [None, knee_note(runs[1])] and b.stage_notes == [None, None]
    assert (b.ttft_mean[0].low, b.ttft_mean[0].high) == pytest.approx((0.1755492, 0.6930312), abs=1e-7)
    assert (b.tpot_mean[1].low, b.tpot_mean[1].high) == pytest.approx((0.0170020, 0.0202876), abs=1e-7)
    side = SweepSide(None, 2.5, [0.5, 0.5], 4.0)
    text = _text(SweepValidation([2.0, 4.0], side, side, "rule", runs, [], b))
    # 500 ms inside 175.5–693.0 ms, 20.0 ms inside 17.0–20.3 ms: each marked ✓
    # each measured mean beside the simulated one (pred.): TTFT 200 and 790 ms, TPOT 19 ms
    assert ("│ 2.000 │ 500.0 ms │ 200.0 ms │ -60.0% │ 175.5–693.0 ms ✓ │ 20.0 ms │ 19.0 ms │ -5.0% │ 17.0–20.3 ms ✓ │"
            in text)
    assert "│ 4.000 │ 500.0 ms │ 790.0 ms │ +58.0% ↗ │ — │ 20.0 ms │ 19.0 ms │ -5.0% │ 17.0–20.3 ms ✓ │" in text
    assert "693.4" not in text  # the 4 req/s stage's TTFT band (0.79 s × 0.877746 …), withheld
    assert "no TTFT band at 4.000 req/s: at or past its knee (the simulated run's waits" in text
    d = json.loads(json.dumps(b.to_dict()))
    assert d["ttft_mean"][1] is None and d["ttft_notes"][0] is None and d["ttft_notes"][1].startswith("at or past")


@needs_runs
def test_a_real_sweep_withholds_the_ttft_band_of_its_stage_at_the_knee():
    # the Llama-2-7B `general` stages at 8 and 20 req/s, bandwidth at 68% of peak, matmuls flat (the scenario read
    # off that pricing): the 20 req/s replay's mean TTFT grew 3.6× through the stage (its 10.765 s would have had the
    # band × 0.877746 … × 3.465156 = 9.45–37.30 s); the
    # 8 req/s stage stays below its knee and keeps both bands; TPOT's low end = predicted × 1/(1 + q90) (module doc)
    stages = [str(GENERAL / f"stage_{k}_lifecycle_metrics.json") for k in (0, 1)]
    argv = ["validate", *stages, "--sweep", "--gpu", "h100-sxm", "--gpu-profile", "none",
            "--achievable-bandwidth-fraction", "0.68", "--gemm-efficiency", "flat"]
    text, js = CliRunner().invoke(app, argv, env={"COLUMNS": "250"}), CliRunner().invoke(app, [*argv, "--json"])
    assert text.exit_code == 0 and js.exit_code == 0, text.output + js.output
    d, out = json.loads(js.output), " ".join(text.output.split())
    b = d["error_bands"]
    assert d["at_knee_rates"] == [20.0] and b["stage_notes"] == [None, None]
    assert b["ttft_mean"][0] is not None and b["ttft_mean"][1] is None
    assert b["ttft_notes"][0] is None and b["ttft_notes"][1].startswith("at or past its knee (the simulated run's")
    tpot = next(r["predicted"] for r in d["runs"][1]["comparison"]["rows"] if r["metric"] == "TPOT mean")
    assert b["tpot_mean"][1]["low"] == pytest.approx(tpot / (1 + 0.11751341474272681), rel=1e-12)
    assert "9.45" not in out and "37.30" not in out
    assert "│ 20.00 │ 51.9 ms │" in out and "↗ │ — │ 16.6 ms │" in out
    assert "no TTFT band at 20.00 req/s: at or past its knee" in out
