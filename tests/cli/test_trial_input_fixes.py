"""What a new-user trial found in the input paths: impossible inference-perf aggregates refused alike by validate,
calibrate and goodput; a TPOT SLO on an inference-perf stage judged on (E2E − TTFT)/(output − 1), not the file's own
field, and validate's note saying which TPOT is which; user text never rendered as an emoji; ``profile:FILE.json``
for a user's own fitted front-end latency; a stopped probe's range never printed reversed."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvledger.analyses.serving.client_latency import client_latency_of
from kvledger.analyses.serving.sim_capacity import stopped_share_text
from kvledger.calibration.stage_notes import tpot_note
from kvledger.calibration.sweep import read_stage
from kvledger.cli.main import app
from kvledger.errors import FormatError, InputError

runner = CliRunner()
IP = Path(__file__).resolve().parents[1] / "evidence" / "data" / "inference-perf"
H100_PROFILE = Path(__file__).resolve().parents[2] / "src/kvledger/accounting/data/gpu_profiles/h100-sxm.json"
VAL = ["--gpu", "H100-SXM", "--model", "meta-llama/Llama-3.1-8B-Instruct"]


def _damaged(tmp_path: Path, edit) -> str:
    d = json.loads((IP / "stage_0_lifecycle_metrics.json").read_text())
    edit(d["successes"]["latency"])
    f = tmp_path / "stage_0_lifecycle_metrics.json"
    f.write_text(json.dumps(d))
    return str(f)


@pytest.fixture
def err_of(cli_entry, monkeypatch):
    """stderr of the command run through the console entry point (kvledger.cli.main.run, in this process, on a
    400-column console): the error line is main's, exit 2, no traceback."""
    monkeypatch.setenv("COLUMNS", "400")

    def call(args: list[str]) -> str:
        code, _, err = cli_entry(*args)
        assert code == 2 and "Traceback" not in err, err
        return " ".join(err.split())

    return call


@pytest.mark.parametrize("edit, words", [
    (lambda lat: lat["time_to_first_token"].__setitem__("mean", -0.0298),
     "successes.latency.time_to_first_token.mean: negative latency -0.0298"),
    # the stage's TTFT median 32.9 ms raised above its p75 (about 35 ms): quantiles cannot fall as p rises
    (lambda lat: lat["time_to_first_token"].__setitem__("median", 0.09),
     "successes.latency.time_to_first_token: median 0.09 s is above p75"),
    # a mean of 2 s over latencies whose max is 0.494 s
    (lambda lat: lat["request_latency"].__setitem__("mean", 2.0),
     "successes.latency.request_latency: mean 2 s lies outside min"),
])
def test_impossible_aggregates_refused_alike_by_goodput_validate_and_calibrate(tmp_path, edit, words, err_of):
    f = _damaged(tmp_path, edit)
    msgs = [err_of(["goodput", f, "--slo", "ttft=1s"]), err_of(["validate", f, *VAL]),
            err_of(["calibrate", f, *VAL, "--out", str(tmp_path / "p.json")])]
    assert all(words in m for m in msgs) and len(set(msgs)) == 1, msgs
    assert not (tmp_path / "p.json").exists()
    with pytest.raises(FormatError, match="damaged file|cannot be negative"):
        read_stage(f)


def test_stage_tpot_slo_is_judged_on_the_derived_tpot():
    # stage 1 (2,278 requests; config.yaml beside it: 64 tokens under ignore_eos). The file's time_per_output_token
    # max is 4.7 ms, so on it tpot ≤ 6 ms held for all. Derived: a request meets 6 ms only if E2E − TTFT ≤ 6 ms × 63 =
    # 378 ms, i.e. E2E ≤ 378 + TTFT ≤ 378 + 70.1 (TTFT max) = 448.1 ms; the E2E min is 492.0 ms: none can.
    res = runner.invoke(app, ["goodput", str(IP / "stage_1_lifecycle_metrics.json"), "--slo", "tpot=6ms", "--json"])
    d = json.loads(res.output)
    assert (d["num_good"], d["num_good_upper"], d["attainment"]) == (0, 0, 0.0)
    note = next(n for n in d["notes"] if n.startswith("tpot ≤"))
    # derived mean (E2E mean − TTFT mean)/63, the same as validate's "TPOT mean"; the file's 4.05 ms shown only
    assert "TPOT judged as (E2E − TTFT)/(output − 1)" in note and "every request generated to 64 tokens" in note
    assert "is shown only" in note


def test_validate_explains_the_two_tpot_rows_once():
    res = runner.invoke(app, ["validate", str(IP / "stage_0_lifecycle_metrics.json"), *VAL], env={"COLUMNS": "400"})
    assert res.exit_code == 0, res.output
    note = tpot_note(read_stage(str(IP / "stage_0_lifecycle_metrics.json")))
    assert "TPOT (file's field) mean" in res.output and res.output.count(f"note: {note}") == 1
    # the note quotes this stage's own figures, no other dataset's: the fixture's time_per_output_token mean 3.48 ms,
    # and (E2E mean − TTFT mean)/(64 − 1) = 7.14 ms (its config.yaml's fixed 64 output tokens)
    assert note.endswith("(this stage: the field's mean 3.48 ms against 7.14 ms so derived)")


def _own_profile(tmp_path: Path, frontend_s: float | None) -> str:
    d = json.loads(H100_PROFILE.read_text())  # as `calibrate --scope gpu --fit-frontend` writes it: no named set-up
    d["fit"].pop("set_up_frontend_s")
    d["fit"].pop("frontend_s")
    if frontend_s is not None:
        d["fit"]["frontend_s"] = frontend_s
    f = tmp_path / "mine.json"
    f.write_text(json.dumps(d))
    return str(f)


def test_user_text_is_not_rendered_as_an_emoji_and_the_error_says_what_to_pass(tmp_path, err_of):
    mine = _own_profile(tmp_path, 0.0123)
    out = err_of(["validate", str(IP / "stage_0_lifecycle_metrics.json"), *VAL, "--gpu-profile", mine,
                "--client-latency", "profile:x"])
    assert "profile:x:" in out and "❌" not in out  # rich read ":x:" as an emoji
    assert f"its own fitted latency (fit.frontend_s, 12.3 ms) is read with --client-latency profile:{mine}" in out


def test_profile_file_takes_its_own_fitted_frontend_latency(tmp_path):
    got = client_latency_of(f"profile:{_own_profile(tmp_path, 0.0123)}", None, "NVIDIA H100 80GB SXM5")
    assert got is not None and got.seconds == 0.0123 and "fit.frontend_s of" in got.source
    with pytest.raises(InputError, match=r"fitted no client latency \(no fit.frontend_s: it was calibrated without "
                                         r"--fit-frontend\)"):
        client_latency_of(f"profile:{_own_profile(tmp_path, None)}")
    with pytest.raises(FormatError, match="not a kvledger GPU profile"):
        client_latency_of(f"profile:{IP / 'stage_0_lifecycle_metrics.json'}")


def test_a_stopped_probe_range_never_prints_reversed():
    # 0.8946 rounded to nearest read 89.5 % while the upper bound 0.8949 rounded down reads 89.4 %: both ends are now
    # rounded down, and equal ends print once
    assert stopped_share_text(0.8946, 0.8949) == "89.4%*"
    assert stopped_share_text(0.881, 0.8949) == "88.1%–89.4%*"
    assert stopped_share_text(0.111, 0.882) == "11.1%–88.2%*"
    for lo in range(0, 1000, 7):
        for hi in range(lo, 1000, 13):
            text = stopped_share_text(lo / 1000 + 0.0004, hi / 1000 + 0.0006).rstrip("%*").split("%–")
            assert float(text[0]) <= float(text[-1])


def test_simulate_takes_a_profile_files_fitted_latency(tmp_path):
    # simulate read every --client-latency as a duration at the option check, so profile:FILE.json was refused there
    # ("cannot read 'profile:…' as a duration") though validate, search and report take it: the file's fit.frontend_s
    # (12.3 ms here) is now added to every request's TTFT and E2E, and the note names where it came from
    mine = _own_profile(tmp_path, 0.0123)
    res = runner.invoke(app, ["simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--num-requests", "20",
                              "--client-latency", f"profile:{mine}", "--json"])
    assert res.exit_code == 0, res.output
    assert any(n.startswith("client latency 12.3 ms added to every request's TTFT and E2E") and "fit.frontend_s of" in n
               for n in json.loads(res.output)["notes"])
