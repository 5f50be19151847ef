"""cost --simulate of a model no catalog API row serves, without --api, is refused before the capacity search (a
fresh-user trial: Qwen3-30B-A3B on an H100 simulated its whole search, then said "no API row to compare with")."""

from __future__ import annotations

from typer.testing import CliRunner

import kvledger.cli.cost_cmd as cost_cmd
from kvledger.cli.main import app
from kvledger.errors import InputError


def test_no_api_row_is_refused_before_simulating(monkeypatch):
    def no_simulation(*a, **k):
        raise AssertionError("simulated before refusing")

    monkeypatch.setattr(cost_cmd, "sim_run", no_simulation)
    res = CliRunner().invoke(app, ["cost", "--simulate", "Qwen/Qwen3-30B-A3B", "--gpu", "H100", "--slo",
                                   "ttft=1s,tpot=60ms", "--monthly-tokens", "2B", "--gpu-provider", "Nebius"])
    assert isinstance(res.exception, InputError)
    assert str(res.exception) == ("no API row to compare with: no catalog row serves Qwen/Qwen3-30B-A3B; name one with "
                                  "--api (kvledger prices --kind api lists them); refused before simulating")


def test_report_refuses_it_before_simulating_too(monkeypatch):
    # report compares with an API as cost does: the same refusal, before its capacity search and sweep (a review trial
    # timed 3.4 s of simulation before it)
    import kvledger.cli.report_cmd as report_cmd

    def no_build(*a, **k):
        raise AssertionError("simulated before refusing")

    monkeypatch.setattr(report_cmd, "_build", no_build)
    res = CliRunner().invoke(app, ["report", "Qwen/Qwen3-30B-A3B", "--gpu", "H100", "--slo", "ttft=1s,tpot=60ms",
                                   "--monthly-tokens", "1B", "--json"])
    assert isinstance(res.exception, InputError)
    assert str(res.exception).startswith("no API row to compare with: no catalog row serves Qwen/Qwen3-30B-A3B")
