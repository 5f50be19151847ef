"""``--client-latency``: the client's and front end's latency added to every simulated TTFT and E2E (not TPOT/ITL),
applied to the records after the run (``analyses/serving/client_latency.py``), in simulate, goodput --simulate and
validate; bad values refused in one line with exit 2."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
from typer.testing import CliRunner

from kvledger.analyses.serving.client_latency import client_latency_of
from kvledger.cli.main import app
from kvledger.errors import InputError
from kvledger.ledgers.goodput import goodput
from kvledger.ledgers.slo import parse_slo
from kvledger.record_columns import with_arrivals_earlier
from kvledger.records import RequestRecord, RunMetadata, RunRecords

runner = CliRunner()
# priced flat (0.7 of peak FLOP/s for every matmul): the TTFTs quoted below were read off runs priced that way
SIM = ["meta-llama/Llama-3.1-8B", "--gpu", "H100", "--gemm-efficiency", "flat", "--prompt-lengths", "fixed:512",
       "--output-lengths", "fixed:64", "--rate", "1", "--num-requests", "5"]


def _ok(args: list[str]) -> str:
    res = runner.invoke(app, args)
    assert res.exit_code == 0, (res.output, res.exception)
    return res.output


def test_shifted_records_by_hand():
    # one request: sent at 1.0 s, first token at 1.1 s, five tokens, finished at 1.5 s (tokens at 1.1, 1.2, ..., 1.5)
    # TTFT = 1.1 − 1.0 = 100 ms, E2E = 500 ms, TPOT = (1.5 − 1.1)/4 = 100 ms, ITL 100 ms each.
    # With 21 ms of client latency the arrival is 0.979 s: TTFT 121 ms, E2E 521 ms, TPOT and ITL unchanged.
    rec = RequestRecord("r0", 1.0, 10, 5, 1.1, 1.5, np.array([1.1, 1.2, 1.3, 1.4, 1.5]))
    run = RunRecords([rec], RunMetadata(source="test", source_format="test"))
    got = with_arrivals_earlier(run, 0.021).records[0]
    assert got.ttft_s == pytest.approx(0.121, abs=1e-12) and got.e2e_s == pytest.approx(0.521, abs=1e-12)
    assert got.tpot_s == pytest.approx(rec.tpot_s, abs=1e-15) and np.allclose(got.itls_s, rec.itls_s, atol=1e-15)
    # a TTFT SLO of 110 ms: met engine-side (100 ms), missed by the client (121 ms)
    slo = parse_slo("ttft=110ms")
    assert goodput(run, slo).attainment == 1.0
    assert goodput(with_arrivals_earlier(run, 0.021), slo).attainment == 0.0


def test_parse_and_refuse():
    got = client_latency_of("21ms")
    assert got.seconds == pytest.approx(0.021) and got.source.startswith("given: --client-latency 21 ms; the client")
    assert client_latency_of("0ms") is None and client_latency_of(None) is None  # default 0: nothing added or said
    for bad in ("-5ms", "nan", "infs", "11s", "21", "abc"):
        with pytest.raises(InputError):
            client_latency_of(bad)


def test_simulate_adds_exactly_the_latency_to_ttft_and_e2e_only():
    # the same simulation with and without 21 ms: every TTFT and E2E statistic (mean and percentiles, as each request
    # grows by the same 21 ms) is 21 ms larger; TPOT and ITL are identical; the JSON says what was added and why.
    base = json.loads(_ok(["simulate", *SIM, "--json"]))
    more = json.loads(_ok(["simulate", *SIM, "--client-latency", "21ms", "--json"]))
    for metric in ("ttft_s", "e2e_s"):
        for stat in ("mean", "p50", "p90", "p99"):
            assert more["summary"][metric][stat] - base["summary"][metric][stat] == pytest.approx(0.021, abs=1e-12)
    assert more["summary"]["tpot_s"] == base["summary"]["tpot_s"] and more["summary"]["itl_s"] == base["summary"][
        "itl_s"]
    assert base["client_latency"] is None and more["client_latency"]["seconds"] == 0.021
    assert "given: --client-latency 21 ms; the client's and front end's latency, not the engine's; fit it with " \
           "kvledger calibrate --scope gpu --fit-frontend" in more["client_latency"]["source"]
    text = _ok(["simulate", *SIM, "--client-latency", "21ms"])
    assert "client latency 21 ms added to every request's TTFT and E2E" in text


def test_goodput_simulate_flips_under_a_ttft_slo():
    # engine-side these five TTFTs have p50 10.4 ms and p99 25.8 ms (simulate --json): all meet 30 ms; with 21 ms the
    # median and every longer one reach ≥ 31.4 ms, so at most 2 of 5 meet it (read off the run, not assumed)
    base = json.loads(_ok(["simulate", *SIM, "--json"]))["summary"]["ttft_s"]
    assert base["p99"] < 0.030 < base["p50"] + 0.021  # all met without; the median one missed with it
    without = json.loads(_ok(["goodput", "--simulate", *SIM, "--slo", "ttft=30ms", "--json"]))
    with_it = json.loads(_ok(["goodput", "--simulate", *SIM, "--slo", "ttft=30ms", "--client-latency", "21ms",
                              "--json"]))
    assert without["attainment"] == 1.0 and with_it["attainment"] <= 0.4
    assert any("client latency 21 ms" in n for n in with_it["simulation"]["notes"])


@pytest.mark.parametrize("value", ["-1ms", "nan", "11s", "5"])
def test_cli_refuses_bad_values_in_one_line(value):
    res = runner.invoke(app, ["goodput", "--simulate", *SIM, "--slo", "ttft=1s", f"--client-latency={value}"])
    assert isinstance(res.exception, InputError), res.output
    assert str(res.exception).startswith("--client-latency") and "\n" not in str(res.exception)


def test_the_console_entry_exits_2_without_a_traceback():
    p = subprocess.run([sys.executable, "-m", "kvledger.cli.main", "simulate", *SIM, "--client-latency", "11s"],
                       capture_output=True, text=True)
    assert p.returncode == 2 and "Traceback" not in p.stderr, p.stderr
    assert p.stderr.strip() == "error: --client-latency 11s is out of range; allowed: [0, 10] s"


def test_early_stop_rule_judges_engine_side_values_against_the_slo_less_the_latency():
    from kvledger.analyses.serving.sim_prober import SimProber
    from kvledger.analyses.serving.sim_setup import SimRequestArgs

    args = SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="H100", client_latency="21ms")
    rule = SimProber(args, None, "request_rate", parse_slo("ttft=200ms,e2e=10ms,tpot=50ms"), 0.9)._miss_rule()
    # 200 − 21 = 179 ms engine-side; an E2E limit below the latency is missed by every request (0); TPOT unchanged
    assert rule.ttft_s == pytest.approx(0.179) and rule.e2e_s == 0.0 and rule.tpot_s == pytest.approx(0.05)


@pytest.fixture(scope="module")
def three_requests(tmp_path_factory):
    # the three-request run of tests/cli/test_calibrate_cli.py (TTFT 100 ms, E2E 200 ms each, 300-token prompts)
    d = tmp_path_factory.mktemp("run")
    reqs = [{"request_id": f"r{i}", "input_toks": 300, "output_toks": 4, "queued_ts": 1.0 + i,
             "first_token_ts": 1.1 + i, "last_token_ts": 1.2 + i} for i in range(3)]
    (d / "requests.jsonl").write_text("".join(json.dumps(r) + "\n" for r in reqs))
    (d / "meta.json").write_text(json.dumps({"model": "meta-llama/Llama-3.1-8B", "vllm_version": "0.19.0"}))
    return str(d / "requests.jsonl")


def _predicted(doc: dict, metric: str) -> float:
    return next(r["predicted"] for r in doc["comparison"]["rows"] if r["metric"] == metric)


def test_validate_adds_it_and_reads_a_profile_set_up(three_requests):
    base = json.loads(_ok(["validate", three_requests, "--gpu", "H100", "--gpu-profile", "bundled:h100-sxm", "--json"]))
    given = json.loads(_ok(["validate", three_requests, "--gpu", "H100", "--gpu-profile", "bundled:h100-sxm",
                            "--client-latency", "21ms", "--json"]))
    assert _predicted(given, "TTFT mean") - _predicted(base, "TTFT mean") == pytest.approx(0.021, abs=1e-12)
    assert _predicted(given, "E2E mean") - _predicted(base, "E2E mean") == pytest.approx(0.021, abs=1e-12)
    assert _predicted(given, "TPOT mean") == _predicted(base, "TPOT mean") and "client_latency" not in base
    # the bundled H100 profile's fit.set_up_frontend_s: {"inference-sim/training inference-perf client": 0.00577}
    name = "inference-sim/training inference-perf client"
    fitted = json.loads(_ok(["validate", three_requests, "--gpu", "H100", "--gpu-profile", "bundled:h100-sxm",
                             "--client-latency", f"profile:{name}", "--json"]))
    assert fitted["client_latency"]["seconds"] == 0.00577 and "fitted: set-up" in fitted["client_latency"]["source"]
    assert _predicted(fitted, "TTFT mean") - _predicted(base, "TTFT mean") == pytest.approx(0.00577, abs=1e-12)
    res = runner.invoke(app, ["validate", three_requests, "--gpu", "H100", "--gpu-profile", "bundled:h100-sxm",
                              "--client-latency", "profile:mine"])
    assert isinstance(res.exception, InputError) and str(res.exception).endswith(f"its set-ups: '{name}'")


def test_validate_refuses_it_on_top_of_a_model_scope_profiles_own_latency(three_requests, tmp_path):
    # a model-scope profile fitted with --fit-frontend adds its own fitted latency in the replay (LinearStepCost
    # .frontend_s); --client-latency on top would count the client twice: one-line refusal, exit 2
    from kvledger.errors import KvLedgerError

    prof = tmp_path / "m.json"
    _ok(["calibrate", three_requests, "--gpu", "H100", "--model", "meta-llama/Llama-3.1-8B", "--fit-frontend", "--out",
         str(prof)])
    assert json.loads(prof.read_text())["step_cost"]["frontend_s"] > 0  # 100 ms TTFTs, a few ms of prefill
    res = runner.invoke(app, ["validate", three_requests, "--gpu", "H100", "--step-cost", str(prof),
                              "--client-latency", "5ms"])
    assert isinstance(res.exception, KvLedgerError) and "counted twice" in str(res.exception)


def test_a_fitted_latency_is_said_to_four_significant_figures(tmp_path):
    # a profile written by calibrate keeps the fit's full float (9.23761 ms here); the outputs say it as 9.238 ms
    # (4 significant figures), the seconds in the JSON stay exact
    from importlib import resources

    prof = json.loads((resources.files("kvledger.accounting") / "data" / "gpu_profiles" / "h100-sxm.json").read_text())
    prof["fit"]["frontend_s"] = 0.00923761
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(prof))
    got = client_latency_of(f"profile:{path}")
    assert got.seconds == 0.00923761 and got.to_dict()["seconds"] == 0.00923761
    assert got.note().startswith("client latency 9.238 ms added") and f"of {path} (9.238 ms)" in got.source
    assert "9.23761" not in got.note()
    # a given duration keeps its own short form
    assert client_latency_of("21ms").note().startswith("client latency 21 ms added")
    # the step cost's CPU overhead is said the same way (analyses/serving/roofline_choice.py)
    out = json.loads(_ok(["simulate", *SIM, "--cpu-overhead", "9.23761ms", "--json"]))
    assert "(CPU overhead 9.238 ms)" in out["step_cost"]["source"]
