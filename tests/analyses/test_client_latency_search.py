"""``search --client-latency`` and ``report --client-latency``: the configuration search judges TTFT and E2E SLOs on
the client's figures (engine + the latency), TPOT not at all differently; the outputs say what was added and whence.

One candidate (Llama-3.1-8B on one H100), fixed 512-token prompts and 64 output tokens, 100 requests per probe: each
search runs in about a second. The relation checked throughout: every request's client TTFT and E2E are its engine
TTFT and E2E + d exactly (``analyses/serving/client_latency.py``), so a client limit L is met exactly when the
engine's value is ≤ L − d; the probes, their attainments and the boundary of (L, +d) are those of (L − d, +0).
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.errors import InputError

runner = CliRunner()
# priced flat (0.7 of peak FLOP/s for every matmul): the figures below were read off runs priced that way
SEARCH = ["search", "meta-llama/Llama-3.1-8B", "--gpus", "H100", "--tp", "1", "--gemm-efficiency", "flat",
          "--prompt-lengths", "fixed:512", "--output-lengths", "fixed:64", "--num-requests", "100", "--utilization",
          "0.5"]
NOTE = "client latency 30 ms added to every request's TTFT and E2E (not TPOT/ITL): given: --client-latency 30 ms"


def _search(*extra: str) -> dict:
    res = runner.invoke(app, [*SEARCH, *extra, "--json"])
    # 1: no candidate meets the SLO (the JSON still whole on stdout), as goodput --target and cost end
    assert res.exit_code in (0, 1), (res.output, res.exception)
    doc = json.loads(res.stdout)
    assert res.exit_code == (0 if doc["winner"] else 1)
    return doc


def _one(doc: dict) -> dict:
    (e,) = [c for c in doc["candidates"] if c["id"] == "nvidia_h100_sxm:tp1:kv-auto"]
    return e


def _span_grown(goodput: float, good: int, d: float) -> float:
    """A run's goodput is good requests ÷ (first arrival → last finish); moving every arrival d earlier makes that
    span d longer: good ÷ (good ÷ goodput + d)."""
    return good / (good / goodput + d)


def test_a_ttft_slo_lowers_the_capacity_as_the_engine_limit_less_the_latency():
    # ttft=60ms with 30 ms of client latency is ttft=30ms on the engine: the same probes, attainments and boundary;
    # the capacity falls from that of ttft=60ms alone. The boundary run's goodput differs from the engine-only search
    # at 30 ms only by its span, 30 ms longer (94 of 100 requests good at the 24 req/s boundary: read off the probes).
    alone, client, engine = (_one(_search(*a)) for a in (["--slo", "ttft=60ms"],
                                                         ["--slo", "ttft=60ms", "--client-latency", "30ms"],
                                                         ["--slo", "ttft=30ms"]))
    c, e = client["capacity"], engine["capacity"]
    assert c["probes"] == e["probes"] and c["slo_capacity_req_per_s"] == e["slo_capacity_req_per_s"]
    assert c["slo_capacity_req_per_s"] < alone["capacity"]["slo_capacity_req_per_s"]
    assert c["goodput_req_per_s"] < alone["capacity"]["goodput_req_per_s"]
    good = round(e["attainment"] * 100)
    assert c["goodput_at_boundary_req_per_s"] == pytest.approx(
        _span_grown(e["goodput_at_boundary_req_per_s"], good, 0.030), rel=1e-9)


def test_a_ttft_slo_met_engine_side_is_missed_by_every_request_with_the_latency():
    # a lone 512-token prompt's engine TTFT on an H100 is about 10 ms (simulate: p50 10.4 ms at 1 req/s), so 20 ms is
    # met at light load (the analytic TTFT bound lets every request meet it: attainment bound 1.0). With 30 ms of client
    # latency every TTFT is ≥ 30 ms > 20 ms: no request meets it at any rate. By bound (TTFT bound + 30 ms > 20 ms for
    # all 100 requests: attainment bound 0.0) the candidate is rejected unsimulated; simulated, every probe has 0.0.
    fits = _one(_search("--slo", "ttft=20ms"))
    assert fits["status"] == "feasible" and fits["bounds"]["attainment"] == 1.0
    bound = _one(_search("--slo", "ttft=20ms", "--client-latency", "30ms"))
    assert (bound["status"], bound["reason"]) == ("rejected", "SLO not met at any rate")
    assert bound["bounds"]["attainment"] == 0.0 and bound["decided_by_bound"]["attainment_upper"] == 0.0
    simulated = _one(_search("--slo", "ttft=20ms", "--client-latency", "30ms", "--exhaustive"))
    assert simulated["status"] == "rejected" and {a for _, a in simulated["capacity"]["probes"]} == {0.0}


def test_tpot_slo_is_judged_as_before_and_e2e_as_the_engine_limit_less_the_latency():
    # TPOT does not move with the arrivals: the same probes and boundary; the goodput only sees the 30 ms longer span
    tpot, tpot_d = (_one(_search("--slo", "tpot=20ms", *x)) for x in ([], ["--client-latency", "30ms"]))
    a, b = tpot["capacity"], tpot_d["capacity"]
    assert a["probes"] == b["probes"] and a["slo_capacity_req_per_s"] == b["slo_capacity_req_per_s"]
    assert a["tpot_p50_s"] == b["tpot_p50_s"] and tpot["bounds"] == tpot_d["bounds"]
    good = round(a["attainment"] * 100)
    # a TPOT-only SLO sets no latency budget a probe can run out of: by attainment alone the 100-request probes meet
    # it up to 96 req/s, above the 74.72 req/s the H100 can compute them at (work_bounds); from 74 req/s up more than
    # half of each probe's requests are still in the system at its last arrival (probe_length, counted at the
    # engine's last arrival with or without the latency), so the capacity found is 73 req/s, under the bound, and
    # sized on as found; the goodput sees the 30 ms longer span
    assert a["slo_capacity_req_per_s"] == 73.0 and a["sized_on_req_per_s"] is None
    assert a["too_short_req_per_s"] == b["too_short_req_per_s"] == [74.0, 76.0, 80.0, 96.0]
    assert good == 100 and b["goodput_at_boundary_req_per_s"] == pytest.approx(
        _span_grown(a["goodput_at_boundary_req_per_s"], good, 0.030), rel=1e-9)
    # e2e=430ms with 30 ms is e2e=400ms on the engine
    e2e, e2e_d = (_one(_search(*x)) for x in (["--slo", "e2e=400ms"],
                                                ["--slo", "e2e=430ms", "--client-latency", "30ms"]))
    assert e2e["capacity"]["probes"] == e2e_d["capacity"]["probes"]


def test_disaggregated_units_get_the_latency_too():
    # the prefill/decode unit runs through pd_disagg.run_deployment, not simulate_run: its records are shifted too
    args = ["--disagg", "--disagg-splits", "1:1"]
    client = _search("--slo", "ttft=60ms", "--client-latency", "30ms", *args)
    engine = _search("--slo", "ttft=30ms", *args)
    (c,), (e,) = ([x for x in d["candidates"] if x["id"] == "nvidia_h100_sxm:p1xtp1+d1xtp1:kv-auto"]
                  for d in (client, engine))
    assert c["capacity"]["probes"] == e["capacity"]["probes"]


def test_outputs_say_what_was_added_and_the_default_is_unchanged():
    d = _search("--slo", "ttft=60ms", "--client-latency", "30ms")
    assert d["client_latency"]["seconds"] == 0.03 and d["spec"]["client_latency"] == "30ms"
    assert any(n.startswith(NOTE) for n in d["notes"])
    plain = _search("--slo", "ttft=60ms")
    # no key at all without it: a ledger written before the option (its spec) still resumes
    assert "client_latency" not in plain and "client_latency" not in plain["spec"]
    assert not any("client latency" in n for n in plain["notes"])
    res = runner.invoke(app, [*SEARCH, "--slo", "ttft=60ms", "--client-latency", "30ms"])
    assert res.exit_code == 0 and NOTE in " ".join(res.output.split())


@pytest.mark.parametrize("value, words", [("-1ms", "non-negative"), ("5", "has no unit"), ("11s", "out of range"),
                                          ("abc", "as a duration")])
def test_search_refuses_a_bad_latency_in_one_line(value, words):
    res = runner.invoke(app, [*SEARCH, "--slo", "ttft=1s", f"--client-latency={value}"])
    assert isinstance(res.exception, InputError), res.output
    assert str(res.exception).startswith("--client-latency") and words in str(res.exception)
    assert "\n" not in str(res.exception)


def test_search_console_entry_exits_2_without_a_traceback():
    p = subprocess.run([sys.executable, "-m", "kvledger.cli.main", *SEARCH, "--slo", "ttft=1s", "--client-latency",
                        "-5ms"], capture_output=True, text=True)
    assert p.returncode == 2 and p.stderr.strip() == "error: --client-latency: '-5ms' must be a finite, non-negative " \
                                                     "duration", p.stderr


def test_python_api_reads_a_profile_set_up_once_for_every_gpu():
    from kvledger.analyses.search import SearchSpec
    from kvledger.analyses.search.latency import latency_arg, search_latency
    from kvledger.units import parse_duration_s

    # the bundled H100 profile's fit.set_up_frontend_s: {"inference-sim/training inference-perf client": 0.00577}
    name = "profile:inference-sim/training inference-perf client"
    spec = SearchSpec(model="meta-llama/Llama-3.1-8B", slo="ttft=1s", utilization=0.5, client_latency=name,
                      gpu_profile="bundled:h100-sxm")
    got = search_latency(spec)
    assert got.seconds == 0.00577 and got.source.startswith("fitted: set-up")
    assert parse_duration_s(latency_arg(spec), what="x") == 0.00577  # every candidate's simulation: the same float
    with pytest.raises(InputError, match="name it with --gpu-profile"):
        SearchSpec(model="meta-llama/Llama-3.1-8B", slo="ttft=1s", utilization=0.5, client_latency=name).check()


def test_report_adds_it_to_every_simulation_and_says_so(tmp_path):
    # the report's capacity is `goodput --simulate --target` with the same flags (its commands list them): with the
    # latency that command gives the same boundary as the report, and a TTFT-bound capacity below the one without it
    # target 80 %: with 30 ms added, 90 of the 100 requests meet ttft ≤ 60 ms even near idle, within sampling noise of
    # a 90 % target (90 % − 2·√(0.9·0.1/100) = 84 %), which has no SLO capacity you can bank on (idle_edge)
    base = ["report", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--gemm-efficiency", "flat", "--slo", "ttft=60ms",
            "--num-requests", "100", "--target", "0.8", "--force"]
    with_it = runner.invoke(app, [*base, "--client-latency", "30ms", "--out", str(tmp_path / "a.html"), "--json"])
    without = runner.invoke(app, [*base, "--out", str(tmp_path / "b.html"), "--json"])
    assert with_it.exit_code == 0 and without.exit_code == 0, (with_it.output, without.output)
    d, b = json.loads(with_it.stdout), json.loads(without.stdout)
    assert any(n.startswith(NOTE) for n in d["cost"]["simulation"]["notes"])
    assert not any("client latency" in n for n in b["cost"]["simulation"]["notes"])
    assert "client latency 30 ms added" in (tmp_path / "a.html").read_text()
    cap, cap0 = d["cost"]["simulation"]["capacity_search"], b["cost"]["simulation"]["capacity_search"]
    assert cap["slo_capacity_req_per_s"] < cap0["slo_capacity_req_per_s"]
    cmd = d["commands"]["capacity"].split()
    assert "--client-latency" in cmd and cmd[cmd.index("--client-latency") + 1] == "30ms"
    gp = runner.invoke(app, [*cmd[1:]])
    assert gp.exit_code == 0, gp.output
    assert json.loads(gp.stdout)["boundary"]["boundary_value"] == cap["slo_capacity_req_per_s"]
    text = runner.invoke(app, [*base, "--client-latency", "30ms", "--out", str(tmp_path / "a.html")])
    assert text.exit_code == 0 and f"note: {NOTE}" in text.output
    bad = runner.invoke(app, [*base, "--client-latency", "-5ms", "--out", str(tmp_path / "c.html")])
    assert isinstance(bad.exception, InputError) and not (tmp_path / "c.html").exists()
