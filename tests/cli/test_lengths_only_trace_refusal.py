"""A trace of lengths only (arxiv) under report and cost --simulate, whose SLO-capacity search scales a trace's own
arrivals: the refusal says what works there (a trace with arrival times, listed as the web app lists them; cost
--simulate also --at-offered-load with a load), not --rate, which report lacks and the search refuses."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.dynamics.workload.traces import list_traces, require_arrivals
from kvledger.errors import InputError

runner = CliRunner()
# the bundled traces with arrival times, in the registry's order (arxiv and the others of lengths only are not)
TIMED = "azure-conv, azure-code, mooncake, mooncake-synthetic"


def test_timed_traces_are_the_registrys():
    assert ", ".join(t.name for t in list_traces() if t.has_arrivals) == TIMED


def test_require_arrivals_passes_a_timed_trace_and_words_the_refusal():
    require_arrivals("azure-conv", "x")
    with pytest.raises(InputError) as e:
        require_arrivals("arxiv", "the search needs them", "; or else")
    assert str(e.value) == ("trace 'arxiv' has request lengths but no arrival times, and the search needs them; pick "
                            f"one with arrival times: {TIMED}; or else")


def _err(*args: str) -> str:
    res = runner.invoke(app, list(args), env={"COLUMNS": "300"})
    assert isinstance(res.exception, InputError)  # the entry point prints it as "error: …"
    return str(res.exception)


def test_report_refuses_with_what_works_there(tmp_path):
    out = _err("report", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--slo", "ttft=1s,tpot=50ms", "--num-requests",
               "300", "--monthly-tokens", "2B", "--trace", "arxiv", "-o", str(tmp_path / "x.html"))
    assert ("trace 'arxiv' has request lengths but no arrival times, and the report's SLO-capacity search replays a "
            f"trace's own arrivals at scaled rates; pick one with arrival times: {TIMED}") in out
    assert "--rate" not in out and not (tmp_path / "x.html").exists()


@pytest.mark.parametrize("extra", [(), ("--rate", "2")])
def test_cost_simulate_refuses_with_the_trace_list_and_the_offered_load_route(extra):
    out = _err("cost", "--simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--slo", "ttft=1s,tpot=50ms",
               "--num-requests", "100", "--trace", "arxiv", *extra)
    assert (f"cost --simulate's SLO-capacity search replays a trace's own arrivals at scaled rates; pick one with "
            f"arrival times: {TIMED}; or price this trace at a load you give: --at-offered-load with --rate R (and "
            "--seed S) or --concurrency N") in out
