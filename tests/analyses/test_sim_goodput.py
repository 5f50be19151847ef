"""``kvledger goodput --simulate``'s API (kvledger.analyses.serving.sim_goodput): its typed results and JSON lines."""

from __future__ import annotations

from kvledger.analyses.serving.sim_goodput import simulated_goodput, simulated_goodput_search
from kvledger.analyses.serving.sim_setup import SimRequestArgs
from kvledger.jsonable import to_jsonable
from kvledger.ledgers import parse_slo

ARGS = SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="H100", trace="azure-conv", num_requests=200)
SLO = parse_slo("ttft=200ms,tpot=30ms")


def test_one_run_line_is_its_goodput_then_the_simulation():
    run = simulated_goodput(ARGS, SLO)
    (line,) = [to_jsonable(x) for x in run.lines()]
    assert line == {**run.result.to_dict(), "simulation": run.sim.provenance().to_dict()}
    assert list(line)[-1] == "simulation"


def test_search_lines_are_one_per_probe_then_the_boundary_with_its_band_on_the_rate_axis():
    found = simulated_goodput_search(ARGS, SLO, 0.9, "rate")
    sb = found.search
    lines = [to_jsonable(x) for x in found.lines()]
    assert len(lines) == len(sb.probes) + 1
    for line, g, p in zip(lines, sb.goodputs, sb.probes):
        assert line == {**g.to_dict(), "probe": {"axis": "request_rate", "value": p.value, "order": p.order,
                                                 "phase": p.phase, "stopped_early": p.stopped_early}}
    last = lines[-1]
    # these short probes' capacity probe ended with its queue growing within the trace's bursts: its record follows
    # the band ("not_steady", as cost --json's capacity_search has it; left out when the probe held)
    assert list(last) == ["boundary", "probes", "simulation", "notes", "error_band", "seed_spread", "seed_boundaries",
                          "not_steady", "attainment_ceiling", "rejections", "idle_edge", "sized_error_band"]
    assert [last[k] for k in ("seed_spread", "seed_boundaries", "attainment_ceiling", "rejections", "idle_edge",
                              "sized_error_band")] == [None] * 6  # one seed, no warning, no bound capping: null
    assert last["not_steady"]["backlog_last"] > last["not_steady"]["backlog_expected"]
    # the bisection's keys first (its boundary_per_replica replaced in place by the search's), then the figures the
    # search adds, in this order
    added = ["boundary_per_replica", "boundary_per_gpu", "goodput_at_boundary_req_per_s",
             "goodput_at_boundary_req_per_s_per_gpu", "sustained_good_req_per_s_at_boundary", "sized_on_req_per_s",
             "capacity_bound_req_per_s", "num_requests_per_probe"]  # each always there (null: no bound binds)
    assert list(last["boundary"]) == list(dict.fromkeys(list(sb.boundary.to_dict()) + added))
    assert last["boundary"]["num_requests_per_probe"] == 200
    assert last["boundary"]["boundary_per_gpu"] == sb.boundary.boundary_value  # one replica of TP 1: ÷ 1 GPU
    assert last["error_band"] == sb.error_band.to_dict()
    band = sb.error_band
    assert band.value == sb.boundary.boundary_value and band.low <= band.value <= band.high
