"""validate warns next to latency errors when a compared run was saturated (its queue kept growing): worked on the
hand-checked backlogs of tests/analyses/test_queue_growth.py."""

from __future__ import annotations

from rich.console import Console

from kvledger.calibration.compare import Comparison, MetricRow
from kvledger.calibration.saturation import saturation
from kvledger.calibration.validate import RunValidation
from kvledger.dynamics.engine.config import EngineConfig
from kvledger.records import RequestRecord, RunMetadata, RunRecords
from kvledger.report.calibration_view import render_validation

ARRIVALS = [0.1 * i for i in range(100)]  # 10 req/s for 9.9 s


def _run(finishes):
    recs = [RequestRecord(f"r{i}", a, 10, 5, first_token_s=f, finish_s=f) for i, (a, f) in enumerate(zip(ARRIVALS,
                                                                                                       finishes))]
    return RunRecords(recs, RunMetadata(source="test", source_format="test"))


# kept up: every request takes 0.5 s, backlog 5 at the median and at the last arrival
STEADY = _run([a + 0.5 for a in ARRIVALS])
# did not keep up: one finish every 0.2 s from t = 1 s, backlog 30 at t = 5.0 s → 55 at t = 9.9 s (5 req/s served)
BEHIND = _run([1 + 0.2 * i for i in range(100)])


def test_saturation_names_the_side_whose_queue_grew():
    assert saturation(STEADY, STEADY) is None
    assert saturation(STEADY, BEHIND)["sides"] == ["simulated"]
    assert saturation(BEHIND, BEHIND)["sides"] == ["measured", "simulated"]
    assert saturation(None, STEADY) is None  # a stage known by aggregates: only the replay is checked


def test_validate_prints_the_warning_next_to_latency_rows_only():
    rows = [MetricRow("TTFT mean", "s", 0.2, 2.0, 9.0), MetricRow("throughput", "req/s", 10.0, 4.9, -0.51)]
    r = RunValidation("r", "f.jsonl", 100, 0, "m", "g", 1, "uncalibrated", {"name": "roofline", "source": "s"},
                      EngineConfig(num_gpu_blocks=100, max_model_len=512), None, Comparison("r", rows, 100, 100), {},
                      saturation(STEADY, BEHIND), [])
    con = Console(record=True, width=300)
    render_validation(r, con)
    lines = con.export_text().splitlines()
    assert "+900.0% ⚠" in next(x for x in lines if "TTFT mean" in x)  # the warning below says what ⚠ means
    assert "⚠" not in next(x for x in lines if "│ throughput" in x)
    text = " ".join(lines)
    # only the replay queued: the prediction's miss, not a queue to discount (the measured run kept up)
    assert "the simulated run is saturated where the measured run is not" in text
    assert "its capacity is underestimated" in text and "throughput is the figure to compare" not in text


def test_calibrate_marks_saturated_runs_in_its_error_table():
    from kvledger.report.calibration_view import error_table, saturated_runs_warning

    runs = [{"label": "steady", "ttft_mean_rel_error": 0.1, "throughput_rel_error": 0.0,
             "saturated": saturation(STEADY, STEADY)},
            {"label": "behind", "ttft_mean_rel_error": 9.0, "throughput_rel_error": -0.51,
             "saturated": saturation(STEADY, BEHIND)}]
    con = Console(record=True, width=300)
    con.print(error_table("errors", runs, "label"))
    saturated_runs_warning(runs, con)
    lines = con.export_text().splitlines()
    assert "⚠" not in next(x for x in lines if "steady" in x)
    behind = next(x for x in lines if "│ behind" in x)
    assert "+900.0% ⚠" in behind and "-51.0% ⚠" not in behind
    # "behind" queued in the replay only: a real miss of the prediction, not a saturated run
    assert ("WARNING: the prediction saturates where the measured run did not (⚠), for run(s): behind; the fitted "
            "profile predicts a queue that the measured run did not have: its capacity is underestimated, and these "
            "latency errors are a real miss, not a queue to discount.") in " ".join(lines)
    assert "saturated run(s)" not in " ".join(lines)
    both = [{"label": "both", "ttft_mean_rel_error": 0.1, "saturated": saturation(BEHIND, BEHIND)}]
    con = Console(record=True, width=300)
    saturated_runs_warning(both, con)
    assert con.export_text().startswith("WARNING: saturated run(s) (⚠: a queue that kept growing")


def test_the_warning_agrees_with_how_many_runs_grew_and_gives_each_note_its_line():
    from kvledger.report.calibration_view import saturation_warning

    one = saturation_warning(saturation(STEADY, BEHIND))
    assert one.startswith("WARNING: the simulated run is saturated where the measured run is not (why, below): the "
                          "prediction has a queue that the measured run did not have, so its capacity is "
                          "underestimated; its latency errors (⚠) are a real miss, not a queue to discount.")
    both = saturation_warning(saturation(BEHIND, BEHIND)).splitlines()
    assert both[0].startswith("WARNING: the measured and the simulated runs are saturated (why, below):")
    # one line per side's note, measured first (sorted), after the warning
    assert [x.split(":")[0] for x in both[1:]] == ["  measured", "  simulated"]


def test_a_run_too_short_for_the_backlog_test_is_saturated_when_its_waits_outlast_the_arrivals():
    # LLMServingSim's RTX 4090 runs (fresh-user trial): 300 requests over 29.1 s, first finish so late that the backlog
    # test cannot read them, TTFT 65 s mean — validate said nothing. Here 40 requests over 9.75 s (one every 0.25 s):
    # the first ten wait 1.0 s for a first token, the last ten 30 s (median 30 ≥ 10 × 1.0 and ≥ the 9.75 s span):
    # saturated. Waits of 1.0 s then 9.0 s (9×, under the 10× of WAIT_GROWTH) are not.
    from kvledger.calibration.saturation import saturation, waits_grew
    from kvledger.records import RequestRecord, RunMetadata, RunRecords

    def run(last_wait):
        recs = []
        for i in range(40):
            t = 0.25 * i
            wait = 1.0 if i < 10 else (last_wait if i >= 30 else 5.0)
            recs.append(RequestRecord(f"r{i}", t, 100, 10, t + wait, t + wait + 0.5))
        return RunRecords(recs, RunMetadata("t", "t"))

    grew = run(30.0)
    assert "waited 30.00 s for a first token (median) against the first quarter's 1.00 s" in waits_grew(grew)
    assert saturation(grew, None)["sides"] == ["measured"]
    assert waits_grew(run(9.0)) is None  # 9× the first quarter's wait: under WAIT_GROWTH
