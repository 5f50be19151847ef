"""inference-perf lifecycle reports that lack something: the run's config.yaml (TPOT then bounded with the output-length
quantiles), a latency field an SLO needs, or a run of its own (the pooled summary over every stage). Built in tmp_path
from the real kubecon reports in tests/evidence/data/inference-perf."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.errors import FormatError, InputError
from kvledger.evidence import read_run
from kvledger.ledgers.goodput import goodput
from kvledger.ledgers.slo import parse_slo
from kvledger.ledgers.tpot_derived import derived_tpot_bounds, tpot_derivation

IP = Path(__file__).parent / "data" / "inference-perf"
STAGE2 = "stage_2_lifecycle_metrics.json"
runner = CliRunner()


def _stage2(folder: Path, *, config: bool, drop: tuple[str, ...] = ()) -> Path:
    """The kubecon batch-size sweep's stage 2 (74.94 req/s, 4,496 requests) in ``folder``, with the client config
    beside it or not, and without the ``successes.latency`` fields in ``drop``."""
    folder.mkdir(parents=True, exist_ok=True)
    d = json.loads((IP / STAGE2).read_text())
    for key in drop:
        del d["successes"]["latency"][key]
    (folder / STAGE2).write_text(json.dumps(d))
    if config:
        shutil.copy(IP / "config.yaml", folder / "config.yaml")
    return folder / STAGE2


def test_without_config_yaml_tpot_is_bounded_by_the_output_length_quantiles(tmp_path):
    agg = read_run(_stage2(tmp_path / "run", config=False))
    d = tpot_derivation(agg)  # output_len: min, p0.1 … p99.9 (11 percentiles, the median among them), max
    assert d is not None and d["output_tokens"] == [9.0, 70.0] and len(d["output_points"]) == 13
    # n = 4,496; s = 30 ms. Lower bound, best split: output ≥ p1 = 39 tokens (at most ⌊0.01 × 4,495⌋ + 1 = 45 are
    # shorter) and TTFT ≥ its min 23.18 ms (none below): 0.03 × (39 − 1) + 0.02318 = 1.163 s ≥ E2E max 0.995 s, so
    # all 4,496 meet the E2E side: 4,496 − 0 − 45 = 4,451. (At output min 9, the old bound: 0.03 × 8 + TTFT max
    # 0.0766 = 0.317 s < E2E min 0.532 s: 0.) Upper bound: output > min 9 for at most 4,495, and a request at 9
    # tokens needs E2E ≤ 0.03 × 8 + TTFT ≤ 0.317 s, which none has (E2E min 0.532 s): at most 4,495.
    assert derived_tpot_bounds(agg, d, 0.030, 4496)[:2] == (4451, 4495)
    res = goodput(agg, parse_slo("ttft=200ms,tpot=30ms"))  # TTFT max 76.6 ms: every request meets it
    assert (res.num_good, res.num_good_upper) == (4451, 4495)
    # goodput = 4,451 ÷ (4,496 ÷ 74.2826 req/s) = 73.539 req/s
    assert res.goodput_req_per_s == pytest.approx(74.2825679935283 * 4451 / 4496, rel=1e-12)
    assert any("bounded from the E2E, TTFT and output-length percentiles" in n for n in res.notes)


def test_a_report_away_from_its_config_yaml_says_so_at_the_top(tmp_path):
    f = _stage2(tmp_path / "run", config=False)
    res = runner.invoke(app, ["goodput", str(f), "--slo", "ttft=200ms,tpot=30ms"], env={"COLUMNS": "1000"})
    assert res.exit_code == 0, res.output
    lines = res.output.splitlines()
    # 4,451 of 4,496 = 99.0% at least (hand derivation in the test above)
    assert lines[0] == "answer: ≥73.539 good req/s (≥99.0% of 4,496 requests within the SLO)"
    assert lines[1] == (
        "warning: no config.yaml (the run's client settings) beside this file or up to 2 folders above: the model is "
        "not named; whether every request was generated to one fixed length (ignore_eos) is unknown, so a TPOT "
        "divides by the file's re-tokenized output_len, which can under-count what the engine generated; keep the "
        "report in its run folder")
    assert res.output.count("no config.yaml") == 1  # not again among the run's notes
    beside = runner.invoke(app, ["goodput", str(_stage2(tmp_path / "kept", config=True)), "--slo", "tpot=30ms"])
    assert beside.exit_code == 0 and "warning" not in beside.output


def test_an_slo_on_a_latency_the_report_lacks_is_refused(tmp_path):
    f = _stage2(tmp_path / "run", config=True, drop=("time_to_first_token",))
    res = runner.invoke(app, ["goodput", str(f), "--slo", "ttft=200ms,tpot=50ms"])
    assert isinstance(res.exception, FormatError)
    assert str(res.exception) == (f"{f}: missing successes.latency.time_to_first_token: the SLO's ttft cannot be "
                                  "judged on this file; drop ttft from --slo, or give the run's report with that field")


def test_without_ttft_a_tpot_slo_is_bounded_with_ttft_at_least_zero(tmp_path):
    agg = read_run(_stage2(tmp_path / "run", config=True, drop=("time_to_first_token",)))
    res = goodput(agg, parse_slo("tpot=15ms"))
    # config.yaml: every request generated to 64 tokens (ignore_eos). TPOT ≤ E2E/(64 − 1) with TTFT ≥ 0: E2E ≤ 0.015 ×
    # 63 = 0.945 s holds up to p95 (0.883 s; p99 0.955 s is above), so at least ⌊0.95 × 4,495⌋ + 1 = 4,271; without
    # TTFT nothing bounds it from above: 4,496. (With TTFT ≥ its min 23.18 ms, 0.968 s reaches p99: 4,451.)
    assert (res.num_good, res.num_good_upper) == (4271, 4496)
    assert any("the file states no TTFT: each request's TTFT is taken as ≥ 0" in n for n in res.notes)
    assert not any(n.startswith("warning: ") for n in res.notes)  # the file's own TPOT field is not used


def test_without_e2e_tpot_on_the_files_own_field_is_a_warning(tmp_path):
    agg = read_run(_stage2(tmp_path / "run", config=True, drop=("request_latency",)))
    res = goodput(agg, parse_slo("tpot=15ms"))
    # time_per_output_token max 7.38 ms ≤ 15 ms: all 4,496, on the field the derived TPOT replaces elsewhere
    assert (res.num_good, res.num_good_upper) == (4496, 4496)
    assert res.notes[0].startswith("warning: TPOT is judged on the file's own TPOT field, as the file states no E2E")


def test_goodput_and_cost_refuse_the_pooled_summary_as_validate_does(tmp_path):
    summary = IP / "summary_lifecycle_metrics.json"
    for args in (["goodput", str(summary), "--slo", "ttft=200ms,tpot=50ms"],
                 ["cost", str(summary), "--slo", "ttft=200ms,tpot=50ms", "--monthly-tokens", "3e9"]):
        res = runner.invoke(app, args)
        assert isinstance(res.exception, FormatError), args
        text = str(res.exception)
        assert text.startswith(f"{summary}: This summary_lifecycle_metrics.json is inference-perf's summary over "
                               "every stage of the run: it pools all the load rates and records none, so its goodput "
                               "would average over every load, not measure any one; give kvledger " + args[0])
        assert "or the stage files alone (leave this summary out)" in text
    # among the stages, with --target: the summary is named, not a run label ("summary: the run states no finite
    # request_rate")
    files = sorted(str(p) for p in IP.glob("*_lifecycle_metrics.json"))
    res = runner.invoke(app, ["goodput", *files, "--slo", "ttft=200ms,tpot=50ms", "--target", "0.9"])
    assert str(res.exception).startswith(f"{summary}: This summary_lifecycle_metrics.json")
    # renamed, it is still known by its load_summary: a count and no rate, send time or achieved rate
    shutil.copy(summary, tmp_path / "all.json")
    with pytest.raises(FormatError, match="summary over every stage"):
        read_run(tmp_path / "all.json")


def test_a_run_with_no_rate_is_named_by_its_file(tmp_path):
    f = tmp_path / STAGE2
    d = json.loads((IP / STAGE2).read_text())
    del d["load_summary"]["requested_rate"]
    f.write_text(json.dumps(d))
    res = runner.invoke(app, ["goodput", str(f), str(IP / "stage_1_lifecycle_metrics.json"), "--slo", "tpot=50ms",
                              "--target", "0.9"])
    assert isinstance(res.exception, InputError)
    assert str(res.exception) == f"{STAGE2} [stage 2]: the run states no finite request_rate"
