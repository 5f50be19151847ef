"""An SGLang ``bench_serving`` JSONL file of several lines (one run per request rate, with ``--output-details``)
is read whole by validate and calibrate: ``--run N`` replays line N, the file (or ``--sweep``) is a sweep over the
lines, per-request or aggregate, and calibrate takes every line as a run. The server's record (``server_info``,
its version too) is read the same way whether a line keeps per-request arrays or only aggregates.

The fixture is synthetic (tests/fixtures/sglang_synthetic/README.md): three lines at 2, 4 and 8 req/s, 16 requests
each, durations 8.2, 4.2 and 2.2 s, server_info version 0.5.6 at TP 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvledger.analyses.serving.sim_setup import SimRequestArgs
from kvledger.calibration.run_record import recorded_settings
from kvledger.calibration.targets import load_targets, placed
from kvledger.calibration.validate import validate_file, validate_sweep
from kvledger.cli.main import app

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "sglang_synthetic" / "llama8b_tp2_rates.jsonl"
ARGS = SimRequestArgs(model=None, gpu="H100", tp=None)
_ARRAYS = ("input_lens", "output_lens", "ttfts", "itls", "errors")


def _lines() -> list[dict]:
    return [json.loads(x) for x in FIXTURE.read_text().splitlines()]


def _write(path: Path, lines: list[dict]) -> str:
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return str(path)


def test_each_per_request_line_is_a_run_of_its_own():
    ts = load_targets(str(FIXTURE))
    assert [t.run.label for t in ts] == [f"llama8b_tp2_rates @ {r} req/s" for r in (2, 4, 8)]
    assert [t.order for t in ts] == [0, 1, 2] and all(t.stage is None for t in ts)  # replayed request by request
    assert [len(t.run.requests) for t in ts] == [16, 16, 16]
    # placed on the sweep's axis by its own record: the rate the file states, the client's rate as the replay drew
    # it (no send times kept), and served 16 requests ÷ the stated duration: 16 / 8.2 = 1.9512 req/s at 2 req/s
    s = placed(ts)[0].placed
    assert (s.requested_rate, s.achieved_rate, s.count) == (2.0, 2.0, 16)
    assert s.requests_per_s == pytest.approx(16 / 8.2)


def test_run_n_replays_line_n_and_the_file_is_a_sweep_over_its_lines():
    one = validate_file(str(FIXTURE), ARGS, run=1)
    assert one.run == "llama8b_tp2_rates @ 4 req/s" and one.num_requests == 16
    sweep = validate_file(str(FIXTURE), ARGS)  # no --run: the lines are the stages of one sweep
    assert sweep.rates == [2.0, 4.0, 8.0]
    measured = [next(r.measured for r in x.comparison.rows if r.metric == "throughput") for x in sweep.runs]
    assert measured == pytest.approx([16 / 8.2, 16 / 4.2, 16 / 2.2])  # each line's 16 requests ÷ its duration


def test_the_lines_split_into_files_are_one_sweep(tmp_path):
    paths = [_write(tmp_path / f"rate{x['request_rate']}.jsonl", [x]) for x in _lines()]
    sweep = validate_sweep(paths, ARGS)
    assert sweep.rates == [2.0, 4.0, 8.0] and [r.run for r in sweep.runs] == ["rate2", "rate4", "rate8"]
    res = CliRunner().invoke(app, ["validate", *paths, "--gpu", "H100", "--sweep"])
    assert res.exit_code == 0, res.output
    assert "load sweep: 3 stages over request rates" in res.output


def test_aggregate_lines_are_a_sweep_and_keep_the_servers_version(tmp_path):
    agg = _write(tmp_path / "agg.jsonl", [{k: v for k, v in x.items() if k not in _ARRAYS} for x in _lines()])
    (a, *_), (p, *_) = load_targets(agg), load_targets(str(FIXTURE))
    assert a.stage is not None and p.stage is None  # the same line, aggregate and per-request
    # one reader of the record for both: server_info.version 0.5.6, TP 2, SGLang's scheduler
    for t in (a, p):
        rec = recorded_settings(t.run.measured.metadata.extra)
        assert (rec.engine_version, rec.flags["tp"], rec.flags["policy"]) == ("0.5.6", 2, "sglang")
    one = validate_file(agg, ARGS, run=2)
    assert any("engine_version 0.5.6" in n for n in one.notes)
    assert one.rate == 8.0 and validate_file(agg, ARGS).rates == [2.0, 4.0, 8.0]


def test_calibrate_takes_every_line_as_a_run():
    res = CliRunner().invoke(app, ["calibrate", str(FIXTURE), "--gpu", "H100", "--no-leave-one-out", "--json"])
    assert res.exit_code == 0, res.output
    runs = json.loads(res.output)["runs"]
    assert [r["label"] for r in runs] == [f"llama8b_tp2_rates @ {r} req/s" for r in (2, 4, 8)]
