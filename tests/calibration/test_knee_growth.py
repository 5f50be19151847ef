"""validate flags a replay at or past its knee: its waits for a first token grew through the run, short of the
saturation tests (kvledger.calibration.knee_growth). A user trial replayed inference-sim/training's Llama-2-7B
`general` stage at 20 req/s with a step cost a few percent slow: mean TTFT thousands of percent above the measured one,
the simulated queue growing to seconds, and no saturation warning (backlog under 5% of 12,000 requests)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from kvledger.calibration.compare import Comparison, MetricRow
from kvledger.calibration.knee_growth import KNEE_GROWTH, at_knee, quarter_growth, stage_quarter_bound
from kvledger.calibration.validate import RunValidation, SweepSide, SweepValidation
from kvledger.cli.main import app
from kvledger.dynamics.engine.config import EngineConfig
from kvledger.records import RequestRecord, RunMetadata, RunRecords
from kvledger.report.calibration_view import render_validation

RUNS = Path(__file__).resolve().parents[3] / "shared" / "data" / "measured-runs"
GENERAL = RUNS / "inference-sim-training" / "default_args" / "20260217-231439-llama-2-7b-tp1-general" / "results"
needs_runs = pytest.mark.skipif(not GENERAL.is_dir(), reason="../shared/data/measured-runs not beside the clone")


def _run(waits: tuple[float, float, float, float]) -> RunRecords:
    """40 requests, one every 0.25 s (10 per quarter of the arrivals), each quarter's TTFT ``waits[k]`` s."""
    recs = []
    for i in range(40):
        t, w = 0.25 * i, waits[i // 10]
        recs.append(RequestRecord(f"r{i}", t, 100, 10, t + w, t + w + 1.0))
    return RunRecords(recs, RunMetadata("t", "t"))


# quarters 0.5, 0.6, 0.8, 1.25 s: the fourth is 1.25 / 0.5 = 2.5 × the first, ≥ 2 → at its knee
GREW = _run((0.5, 0.6, 0.8, 1.25))
# quarters 0.5, 0.55, 0.6, 0.95 s: at most 0.95 / 0.5 = 1.9 × the first, under 2 → below its knee
SETTLED = _run((0.5, 0.55, 0.6, 0.95))
# a queue that rose in the third quarter and drained: 0.2 → 0.9 s (4.5 ×), the fourth back at 0.25 s
EXCURSION = _run((0.2, 0.3, 0.9, 0.25))


def test_quarters_of_the_arrivals_and_the_rule():
    g = quarter_growth(GREW)
    assert g["quarter_ttft_mean_s"] == pytest.approx([0.5, 0.6, 0.8, 1.25])
    assert (g["first_s"], g["peak_s"], g["peak_quarter"]) == pytest.approx((0.5, 1.25, 4))
    assert g["ratio"] == pytest.approx(2.5) and g["grew"] is True
    s = quarter_growth(SETTLED)
    assert s["ratio"] == pytest.approx(1.9) and s["grew"] is False and KNEE_GROWTH == 2.0
    e = quarter_growth(EXCURSION)  # the peak quarter, not the last: an excursion that drained is a knee too
    assert (e["peak_quarter"], e["ratio"], e["grew"]) == (3, pytest.approx(4.5), True)
    assert quarter_growth(RunRecords(GREW.records[:19], GREW.metadata)) is None  # 19 requests: under 5 a quarter


def test_at_knee_names_the_side_that_grew():
    assert at_knee(SETTLED, SETTLED) is None  # below the knee: no flag
    k = at_knee(SETTLED, GREW)
    assert k["sides"] == ["simulated"] and k["measured"]["grew"] is False and k["simulated"]["ratio"] == 2.5
    assert at_knee(GREW, GREW)["sides"] == ["measured", "simulated"]
    assert at_knee(None, SETTLED) is None


def test_a_stage_known_by_aggregates_bounds_every_quarter():
    # the 20 req/s stage's TTFT mean 0.05185435933243328 s and median 0.05109161208383739 s: the quarter between the
    # median and p75 took ≥ the median each, so no quarter averaged more than 4 × 0.0518544 − 0.0510916 = 0.1563258 s
    stats = {"ttft": {"mean": 0.05185435933243328, "p50": 0.05109161208383739}}
    assert stage_quarter_bound(stats)["quarter_ttft_mean_max_s"] == pytest.approx(0.15632582524589573)
    assert stage_quarter_bound({"ttft": {"mean": None, "p50": 0.05}})["quarter_ttft_mean_max_s"] is None

    class Stage:
        pass

    st = Stage()
    st.stats = stats
    k = at_knee(None, GREW, st)  # 0.156 s < the simulated peak 1.25 s: the measured engine did not queue so
    assert k["measured"]["below_simulated_peak"] is True and k["sides"] == ["simulated"]
    st.stats = {"ttft": {"mean": 0.5, "p50": 0.4}}  # bound 1.6 s ≥ 1.25 s: cannot tell
    assert at_knee(None, GREW, st)["measured"]["below_simulated_peak"] is False


def _validation(knee, saturated=None, rate=None) -> RunValidation:
    rows = [MetricRow("TTFT mean", "s", 0.5, 0.79, 0.58), MetricRow("TPOT mean", "s", 0.02, 0.021, 0.05),
            MetricRow("E2E mean", "s", 1.5, 1.79, 0.19), MetricRow("throughput", "req/s", 4.0, 3.98, -0.005)]
    return RunValidation("r", "f.jsonl", 40, 0, "m", "g", 1, "uncalibrated", {"name": "roofline", "source": "s"},
                         EngineConfig(num_gpu_blocks=100, max_model_len=512), rate, Comparison("r", rows, 40, 40), {},
                         saturated, [], at_knee=knee)


def _text(r) -> list[str]:
    con = Console(record=True, width=400)
    render_validation(r, con)
    return con.export_text().splitlines()


def test_single_run_view_flags_the_knee_with_both_sides_figures():
    lines = _text(_validation(at_knee(SETTLED, GREW)))
    assert next(x for x in lines if "TTFT mean" in x).rstrip(" │").endswith("+58.0% ↗")
    assert next(x for x in lines if "E2E mean" in x).rstrip(" │").endswith("+19.0% ↗")
    assert "↗" not in next(x for x in lines if "TPOT mean" in x)
    text = "\n".join(lines)
    assert "WARNING: the simulated run is at or past its knee" in text
    assert "not a step-cost error" in text and "saturation throughput" in text
    assert "simulated: its mean TTFT grew from 500.0 ms in the first quarter of its arrivals to 1,250.0 ms in the " \
           "fourth (2.5×)" in text
    assert "measured: its mean TTFT went from 500.0 ms in the first quarter of its arrivals to at most 950.0 ms in " \
           "a later one (1.9×, under 2×)" in text
    assert "knee" not in "\n".join(_text(_validation(None)))  # below the knee: no flag


def test_the_knee_is_not_said_again_for_a_side_already_saturated():
    saturated = {"sides": ["simulated"], "notes": ["simulated: its queue kept growing"]}  # saturation()'s shape
    text = "\n".join(_text(_validation(at_knee(SETTLED, GREW), saturated)))
    assert "saturated" in text and "at or past" not in text and "↗" not in text


def test_json_carries_the_figures_and_a_sweep_lists_its_stages_at_the_knee():
    d = json.loads(json.dumps(_validation(at_knee(SETTLED, GREW)).to_dict()))
    assert d["at_knee"]["simulated"]["quarter_ttft_mean_s"] == pytest.approx([0.5, 0.6, 0.8, 1.25])
    assert d["at_knee"]["sides"] == ["simulated"] and d["at_knee"]["growth_factor"] == 2.0
    assert json.loads(json.dumps(_validation(None).to_dict()))["at_knee"] is None
    side = SweepSide(None, 2.5, [0.5, 0.5], 4.0)
    sw = SweepValidation([2.0, 4.0], side, side, "rule", [_validation(None, rate=2.0),
                                                         _validation(at_knee(SETTLED, GREW), rate=4.0)], [])
    assert sw.to_dict()["at_knee_rates"] == [4.0]
    lines = _text(sw)
    assert "↗" in next(x for x in lines if x.startswith("│      4.000 "))
    assert "↗" not in next(x for x in lines if x.startswith("│      2.000 "))
    text = "\n".join(lines)
    assert "WARNING: stages marked ↗ (4.000 req/s) are at or past their knee" in text
    assert "4.000 req/s, simulated: its mean TTFT grew from 500.0 ms" in text


def _validate(*flags: str) -> tuple[str, dict]:
    # priced flat (the matmuls at one FLOP fraction, 0.7): the replays below were read off that pricing
    argv = ["validate", str(GENERAL / "stage_1_lifecycle_metrics.json"), "--gpu", "h100-sxm", "--gpu-profile", "none",
            "--gemm-efficiency", "flat", *flags]
    text = CliRunner().invoke(app, argv, env={"COLUMNS": "200"})  # the table's rows unwrapped
    js = CliRunner().invoke(app, [*argv, "--json"])
    assert text.exit_code == 0 and js.exit_code == 0, text.output + js.output
    return " ".join(text.output.split()), json.loads(js.output)


@needs_runs
def test_a_real_replay_just_past_its_knee_is_flagged_though_not_saturated():
    # a step cost ~15% slow on decode (bandwidth at 68% of peak instead of 80%): 12,000 requests at 20 req/s
    text, d = _validate("--achievable-bandwidth-fraction", "0.68")
    assert d["saturated"] is None  # the saturation tests are missed ...
    thr = next(r for r in d["comparison"]["rows"] if r["metric"] == "throughput")
    assert thr["predicted"] > 0.95 * 20.0  # ... the engine served over 95% of the rate
    k = d["at_knee"]
    sim = k["simulated"]
    assert k["sides"] == ["simulated"] and sim["grew"] and sim["ratio"] == pytest.approx(sim["peak_s"] / sim["first_s"])
    assert sim["ratio"] >= 2.0 and sim["peak_s"] > 10.0  # the waits grew to seconds
    # 12,000 requests split into four quarters of 3,000: the quarters' means average to the run's mean TTFT
    ttft = next(r for r in d["comparison"]["rows"] if r["metric"] == "TTFT mean")
    assert sum(sim["quarter_ttft_mean_s"]) / 4 == pytest.approx(ttft["predicted"], rel=1e-9)
    assert k["measured"]["quarter_ttft_mean_max_s"] == pytest.approx(0.15632582524589573)  # derived above
    assert k["measured"]["below_simulated_peak"] is True
    assert "the simulated run is at or past its knee" in text and "the simulated side grew" in text
    # its TTFT band withheld (tests/calibration/test_knee_band.py): the simulated 9.094 s × 1/(1 + q90) = 1/(1 + 0.1393)
    # = ×0.877746 → 7.98 s … × 1/(1 + q10) = 1/(1 − 0.7114) = ×3.465156 → 31.51 s (uncalibrated/dense/vllm TTFT, 31
    # points) would print as a band that holds; the TPOT band stays: low = predicted × 1/(1 + q90) = 1/(1 + 0.1175)
    b = d["error_bands"]
    assert b["ttft_mean"] is None and b["ttft_note"].startswith("at or past its knee (the simulated run's waits")
    assert "7.98–31.51 s" not in text and "+17437.2% ↗ │ — │" in text
    tpot = next(r["predicted"] for r in d["comparison"]["rows"] if r["metric"] == "TPOT mean")
    assert b["tpot_mean"]["low"] == pytest.approx(tpot / (1 + 0.11751341474272681), rel=1e-12)


@needs_runs
def test_the_same_stage_below_its_knee_is_not_flagged():
    text, d = _validate()  # the roofline's own 80% bandwidth: TTFT within tens of percent, no queue
    assert d["at_knee"] is None and d["saturated"] is None and "knee" not in text
    assert d["error_bands"]["ttft_mean"] is not None and d["error_bands"]["ttft_note"] is None  # its band shown
