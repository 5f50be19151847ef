"""The SLO capacity's 80% band and the not-steady warning in report's text, HTML tables and the web app's headline;
the probe table formatted as goodput prints it."""

from __future__ import annotations

import pytest

from kvledger.analyses.serving.sim_capacity import search_capacity
from kvledger.analyses.serving.sim_setup import SimRequestArgs
from kvledger.ledgers.slo import parse_slo
from kvledger.report.decision_view import capacity_band_clause, not_steady_lines, report_answer_lines
from kvledger.report.figures_serving import _load_share, _probe_share

# the throughput errors of regime uncalibrated/dense/vllm in ledgers/data/error_bands.json: the nine deployments driven
# past saturation (below it a run's throughput is its offered load, no capacity error), too few for conformal ranks, so
# a t prediction interval on ln(1 + e), never inside the smallest … largest error (conformal.few_groups_interval): the
# nine errors of docs/calibration/validation-latency.md (+16.5, −7.1, −8.3, +22.3, −1.1, +1.7, −4.2, +12.7, +14.1%,
# rounded to 0.1%; the RTX 4090's two −7.1, −8.3% since its layer-kernel floor) give mean 0.0453, s 0.1074,
# t(0.9, 8 df) 1.397, half-width 1.397 × 0.1074 × √(1 + 1/9) = 0.1581 → q10 = e^(0.0453 − 0.1581) − 1 = −0.1067
# (−0.10653 from the unrounded errors); the top, e^(0.0453 + 0.1581) − 1 = +0.2256 (+0.22576 unrounded), lies past
# the largest error, Qwen3-32B's +22.32%, so it stands: q90 = +0.2258; a capacity C stands for a real one in
# [C / 1.2258, C / 0.8935]
Q10, Q90 = -0.10653252752212694, 0.2257610123633852


@pytest.fixture(scope="module")
def short():
    args = SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="H100", trace="azure-conv", num_requests=300, seed=0,
                          gemm_efficiency="flat")  # the flat roofline these probes were read off
    return search_capacity(args, parse_slo("ttft=200ms,tpot=50ms"), 0.9)


def test_the_capacity_band_is_the_throughput_band_around_the_boundary(short):
    b = short.to_dict()["error_band"]
    assert short.rate_req_per_s == 20.0
    assert b["low"] == pytest.approx(20 / (1 + Q90)) and b["high"] == pytest.approx(20 / (1 + Q10))
    # 20 / 1.22576 = 16.316, 20 / 0.89347 = 22.385
    assert f"{b['low']:.4g}–{b['high']:.4g}" == "16.32–22.38"


def test_a_short_probe_whose_queue_still_grows_is_flagged(short):
    # 300 requests: from 20.25 to 22 req/s 91–97% met the SLO, but more than half of each probe's requests were still
    # in the system at its last arrival (probe_length): too short to show the load, counted as misses, and said so. At
    # 20 req/s the backlog grew from 77 (median arrival) to 150 (last arrival) against 116.09 expected from the
    # arrivals' rate change (150 < 1.5 × 116.09 = 174, but 33.9 past it is more than 5 % of the arrivals in between:
    # queue_growth's rule), yet within 3 × the bursts' swing, 45.7 (probe_queue_grew): it still meets, and the run
    # ended before its queue cost the SLO — the warning says so; 2,000 requests per probe give 19.75 req/s.
    cs = short.to_dict()
    cut = [p["value"] for p in cs["probes"] if p.get("too_short")]
    assert cut == [22.0, 21.0, 20.5, 20.25] and not any(p.get("queue_grew") for p in cs["probes"])
    assert all(p["attainment"] >= 0.9 and not p["meets_target"] for p in cs["probes"] if p.get("too_short"))
    assert any(n.startswith("too short to tell: 20.25, 20.5, 21, 22 (request_rate) met the attainment target")
               for n in cs["notes"])
    assert cs["not_steady"]["backlog_mid"] == 77 and cs["not_steady"]["backlog_last"] == 150
    assert cs["not_steady"]["backlog_expected"] == pytest.approx(116.09, abs=0.01)
    # its drain-tail note ("the capacity priced is conservative") is not printed beside it: a probe whose queue grew
    # did not sustain the good rate that note compares with
    assert not any(n.startswith("the run at the boundary took") for n in cs["notes"])
    # two warnings: the boundary probe was not steady, and the first 300 azure-conv requests are no sample of the
    # trace (probe_sample: prompt mean 900 against the whole trace's 1,155, −22%; output 256 against 211, +21%)
    warns = not_steady_lines(cs)
    assert len(warns) == 2 and warns[0].startswith("warning: the probe at the capacity (20 req/s, 300 requests) "
                                                   "ended with its queue still growing")
    assert warns[1].startswith("warning: unrepresentative sample: each probe replays the trace's first 300 requests, "
                               "prompt mean 900 and output mean 256 tokens, against 1,155 and 211 over 19,366")
    # the overload record's own note gives the capacity search's advice, not simulate's rate flags, which report and
    # cost do not have
    note = cs["not_steady"]["note"]
    assert note.endswith("rerun with more requests per probe (--num-requests)") and "--rate" not in note


def test_answer_lines_carry_the_band_and_the_warning(short):
    cost = {"headline": ["answer: x"], "inputs": {"num_gpus": 1},
            "simulation": {"capacity_search": short.to_dict()}}
    lines = report_answer_lines(cost)
    assert lines[1].startswith("SLO capacity: 20 req/s (80% band 16.32–22.38 req/s, uncalibrated roofline) per "
                               "deployment unit (1 GPU)")
    assert lines[2].startswith("warning: ") and lines[3].startswith("warning: ") and len(lines) == 4
    assert capacity_band_clause({}) == "" and not_steady_lines({"notes": []}) == []
    # a unit of 4 GPUs (Qwen3-235B-A22B at TP 4 on H200s, as `report` printed it) reads "4 GPUs", not "4 GPU"
    cost["inputs"]["num_gpus"] = 4
    assert "per deployment unit (4 GPUs), " in report_answer_lines(cost)[1]


def test_probe_and_load_cells_match_goodput():
    # an early-stopped probe prints its two bounds as goodput does; 20 req/s with 80.45% finished-good and
    # (2000 − 206) / 2000 = 89.7% at most; both ends rounded down (a range never prints reversed), so 80.45% → 80.4%
    assert _probe_share({"attainment": 0.8045, "stopped_early": {"attainment_upper": 0.897}}) == "80.4%–89.7%*"
    assert _probe_share({"attainment": 0.908, "stopped_early": None}) == "90.8%"
    # 9.875 req/s is 50% of 19.75 and, over the band 19.75 / 1.22576 = 16.11 to 19.75 / 0.89347 = 22.10,
    # 9.875 / 22.10 = 44.7% (45%) to 9.875 / 16.11 = 61.3% (61%)
    cs = {"slo_capacity_req_per_s": 19.75, "error_band": {"low": 19.75 / (1 + Q90), "high": 19.75 / (1 + Q10)}}
    assert _load_share(9.875, cs) == "50% (45–61%)"
    assert _load_share(9.875, {"slo_capacity_req_per_s": 19.75}) == "50%"
