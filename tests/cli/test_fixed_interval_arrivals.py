"""``--arrival-cv 0``: arrivals at a fixed interval of 1/rate (a benchmark client's fixed timer), on every command that
takes the flag; a negative CV stays a one-line error with exit status 2."""

from __future__ import annotations

import json
import sys

import pytest
from cli_run import MODEL
from cli_run import run_cli as _run

from kvledger.cli.main import run

_SYN = ("--prompt-lengths", "fixed:100", "--output-lengths", "fixed:10")


def test_simulate_takes_cv_zero_and_says_the_interval():
    out = _run("simulate", MODEL, "--gpu", "H100", "--num-requests", "8", "--rate", "4", "--arrival-cv", "0",
               *_SYN, "--json").stdout
    doc = json.loads(out)
    # 4 req/s at CV 0: one request every 1/4 = 0.25 s, nothing drawn for the gaps
    assert doc["workload"]["mode"] == "open loop (synthetic fixed-interval arrivals at 4 req/s, one every 0.25 s)"
    assert doc["workload"]["num_requests"] == 8 and doc["workload"]["offered_rate_req_per_s"] == 4.0


def test_goodput_simulate_takes_cv_zero():
    res = _run("goodput", "--simulate", MODEL, "--gpu", "H100", "--num-requests", "8", "--rate", "4",
               "--arrival-cv", "0", *_SYN, "--slo", "ttft=2s", "--json")
    assert res.exit_code == 0, res.stdout


def test_a_capacity_search_at_cv_zero_says_its_axis_is_the_fixed_interval_rate():
    # The probes' note on what the rate axis means: at CV 0 no Poisson/Gamma draw sets the gaps (one every 1/rate s)
    args = ("goodput", "--simulate", MODEL, "--gpu", "H100", "--num-requests", "50", *_SYN, "--slo", "ttft=2s",
            "--target", "0.9", "--json")
    notes = json.loads(_run(*args, "--arrival-cv", "0").stdout)["notes"]
    assert any(n.startswith("synthetic arrivals at a fixed interval (--arrival-cv 0): the axis value is the rate")
               for n in notes) and not any("Poisson" in n for n in notes)
    notes = json.loads(_run(*args).stdout)["notes"]
    assert any("nominal Poisson/Gamma rate" in n for n in notes)


def test_search_takes_cv_zero():
    res = _run("search", "meta-llama/Llama-3.2-3B", "--slo", "ttft=2s,tpot=100ms", "--tp", "1", "--gpus", "H100",
               "--max-model-len", "8K", "--num-requests", "50", "--utilization", "0.5", "--arrival-cv", "0", *_SYN,
               "--json")
    assert res.exit_code == 0, res.stdout
    assert json.loads(res.stdout)["spec"]["synthetic"] == {"prompt": "fixed:100", "output": "fixed:10", "cv": 0.0}


@pytest.mark.parametrize("command", [("simulate", MODEL, "--gpu", "H100", "--rate", "4"),
                                     ("search", MODEL, "--slo", "ttft=1s")])
def test_a_negative_cv_is_a_one_line_error_with_exit_2(monkeypatch, capsys, command):
    monkeypatch.setattr(sys, "argv", ["kvledger", *command, *_SYN, "--arrival-cv", "-0.5"])
    with pytest.raises(SystemExit) as exit_:
        run()
    out, err = capsys.readouterr()
    assert exit_.value.code == 2 and "Traceback" not in err
    assert "--arrival-cv -0.5 is out of range; allowed: [0, 100] (CV of the gaps: 0 = a fixed interval" in err
