"""``cost --simulate`` (and ``report``, through the same ``cost_payload``) size on the SLO capacity found, but never
above the deployment's capacity bound (``kvledger.analyses.serving.work_bounds``), as ``search`` does: a probe short
against the SLO's latency budget meets the target at rates no replica sustains. Where the bound does not bind, nothing
changes.
"""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from kvledger.analyses.serving.work_bounds import SHADE, busy_floor_s, capped
from kvledger.cli.main import app

runner = CliRunner()
# 60 identical requests of 1,000 prompt tokens and 1 output token on one L4: each is one prefill, so the bound is a
# sum the hand can check (below)
# --gemm-efficiency flat: the flat roofline worked by hand here (no layer-kernel floors, which a GPU without
# measured tables now carries by default: accounting/carried_kernels.py)
CMD = ["cost", "--simulate", "meta-llama/Llama-3.1-8B", "--gpu", "L4", "--prompt-lengths", "fixed:1000",
       "--output-lengths", "fixed:1", "--num-requests", "60", "--max-model-len", "8192", "--monthly-tokens", "3B",
       "--gemm-efficiency", "flat"]

# The capacity bound by hand (work_bounds docstring, w at n = 1 output token: no decode, the prompt's KV written once):
#   matmul params: 8,030,261,248 (Llama-3.1-8B) − 2 × 4,096 × 128,256 (embedding and untied head) = 6,979,588,096;
#   head FLOPs per sequence: 2 × 4,096 × 128,256 = 1,050,673,152; KV 2 × 32 layers × 8 heads × 128 × 2 B = 131,072 B
#   per token; L4: 121 TFLOP/s bf16 × 0.7 = 84.7e12 FLOP/s, 300 GB/s × 0.8 = 240e9 B/s; TP 1 (no all-reduce).
#   w = (2 × 6,979,588,096 × 1,000 + 1,050,673,152) / 84.7e12 + 131,072 × 1,000 / 240e9
#     = 13,960,226,865,152 / 84.7e12 + 5.4613e-4 = 0.1648197 + 0.0005461 = 0.1653658 s
#   all 60 alike, so k = ⌈0.9 × 60⌉ = 54 of them take ≥ 54 w: bound = 54 ÷ (54 w) = 1 / w = 6.0472 req/s
W_S = (2 * 6_979_588_096 * 1000 + 1_050_673_152) / (121e12 * 0.7) + 131_072 * 1000 / (300e9 * 0.8)
BOUND = 1 / W_S


def _cost(slo: str) -> dict:
    res = runner.invoke(app, [*CMD, "--slo", slo, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def test_the_bound_by_hand():
    assert W_S == pytest.approx(0.1653658, rel=1e-6) and BOUND == pytest.approx(6.04720, rel=1e-5)


def test_cost_sizes_on_the_bound_where_a_short_probe_overshoots_it():
    # ttft ≤ 10 s: 60 one-token requests all finish within 10 s of arrival up to 12 req/s (the search's boundary,
    # its queue still growing but within the bursts it allows, and at most half the 60 in the system at the last
    # arrival: probe_length), about 2× what the L4 can compute (6.047 req/s)
    d = _cost("ttft=10s")
    cs = d["simulation"]["capacity_search"]
    assert cs["slo_capacity_req_per_s"] == 12  # the capacity found, kept as found
    assert cs["sized_on_req_per_s"] == cs["capacity_bound_req_per_s"] == pytest.approx(BOUND, rel=2 * SHADE + 1e-12)
    # cost's capacity: the SLO capacity as found, beside the bound that caps it, which the ledger sizes and prices on
    assert d["capacity"]["slo_capacity_req_per_s"] == 12
    assert d["capacity"]["sized_on_req_per_s"] == d["capacity"]["sizing_req_per_s"] == cs["sized_on_req_per_s"]
    assert cs["error_band"]["value"] == cs["sized_on_req_per_s"]
    # 3B tokens a month ÷ 1,001 tokens per request = 2,997,003 requests ÷ (730 × 3600 s) = 1.1404 req/s offered:
    # ⌈1.1404 ÷ (6.047 × 0.8)⌉ = 1 replica at 1.1404 ÷ 6.047 = 18.86% (at 12 req/s it read 9.5%)
    rate = 3e9 / 1001 / (730 * 3600)
    dec = d["decision"]
    assert dec["replicas"] == 1 and dec["realized_utilization"] == pytest.approx(rate / BOUND, rel=1e-8)
    assert "(6.047 req/s capacity bound (below the 12 req/s SLO capacity found) × 80%)" in dec["sizing"]
    note = next(n for n in cs["notes"] if n.startswith("sized on "))
    assert "sized on 6.047 req/s, the capacity bound, not on the 12 req/s SLO capacity found" in note
    assert "more --num-requests gives a longer probe" in note
    assert d["capacity_basis"]["notes"][0] == note
    assert "sized on 6.047 req/s, the deployment's capacity bound, below the 12 req/s found" in \
        d["capacity_basis"]["text"]
    from kvledger.report.decision_view import report_answer_lines  # what `report` prints from the same JSON

    lines = report_answer_lines(d)
    # 6.0472 req/s in the JSON, printed to 4 significant digits as the sizing text prints it
    assert lines[1].startswith("SLO capacity: 6.047 req/s") and f"warning: {note}" in lines


def test_the_printed_cost_says_so():
    res = runner.invoke(app, [*CMD, "--slo", "ttft=10s"])
    assert res.exit_code == 0, res.output
    flat = " ".join(res.output.split())
    assert "warning: sized on 6.047 req/s, the capacity bound, not on the 12 req/s SLO capacity found" in flat
    # every GPU-second is prefill here (one output token each): the sticker line says there is no multiplier rather
    # than formatting None (it raised a TypeError before)
    assert "no effective-cost multiplier (no GPU time charged to output tokens)" in flat


def test_nothing_changes_where_the_bound_does_not_bind(monkeypatch):
    # ttft ≤ 500 ms: the search finds 3.90625 req/s, below the same 6.047 req/s bound: the JSON is the one without any
    # bound (byte for byte) but for the bound itself, sized on what was found
    d = _cost("ttft=500ms")
    cs = d["simulation"]["capacity_search"]
    assert cs["slo_capacity_req_per_s"] == 3.90625 < BOUND
    assert cs["sized_on_req_per_s"] is None and d["capacity"]["sized_on_req_per_s"] is None  # null: B does not bind
    assert cs["capacity_bound_req_per_s"] == pytest.approx(BOUND, rel=2 * SHADE + 1e-12)  # the bound, said anyway
    assert d["capacity"]["slo_capacity_req_per_s"] == d["capacity"]["sizing_req_per_s"] == 3.90625
    assert not any(n.startswith("sized on ") for n in cs["notes"])
    import kvledger.analyses.serving.sim_capacity as sc

    monkeypatch.setattr(sc, "capacity_bound_req_per_s", lambda *a: None)
    cs["capacity_bound_req_per_s"] = None  # no bound proven: null, and nothing else differs
    assert _cost("ttft=500ms") == d


def test_busy_floor_by_hand():
    # The made-up roofline of test_search_prune (matmul 1e9 params, head 1e8 FLOPs, 5e14 FLOP/s and 5e11 B/s achieved,
    # 1e5 KV bytes per token, TP 1). Requests (P, n): (100, 11) → 6.712e-4 s (worked there);
    #   (100, 1): (2e9 × 100 + 1e8) / 5e14 + 1e5 × 100 / 5e11 = 4.002e-4 + 2e-5 = 4.202e-4 s;
    #   (300, 1): (2e9 × 300 + 1e8) / 5e14 + 1e5 × 300 / 5e11 = 1.2002e-3 + 6e-5 = 1.2602e-3 s.
    # Target 0.6 of 3: k = ⌈1.8⌉ = 2, the two smallest: 4.202e-4 + 6.712e-4 = 1.0914e-3 s → bound 2 ÷ that = 1,832.5
    cost = SimpleNamespace(matmul_params=1e9, head_flops_per_seq=1e8, peak_flops=1e15, flops_fraction=0.5,
                           growing_read_bytes=1e5, bw=1e12, bandwidth_fraction=0.5, num_allreduce_layers=0,
                           peak_matmul_efficiency=lambda: 1.0)  # flat: no GEMM curve
    k, busy = busy_floor_s(cost, [100, 100, 300], [11, 1, 1], 0.6)
    assert k == 2 and busy == pytest.approx(1.0914e-3 * (1 - SHADE), rel=1e-12)
    assert capped(4096.0, k / busy) == pytest.approx(1832.5, abs=0.1)
    assert capped(1000.0, k / busy) == 1000.0 and capped(4096.0, None) == 4096.0


def test_search_sizes_on_the_same_bound_with_the_same_note():
    from kvledger.analyses.search.evaluate import sizing_capacity

    pr = SimpleNamespace(boundary=17.5, notes=[])
    assert sizing_capacity(pr, BOUND) == BOUND
    assert pr.notes[0].startswith("sized on 6.047 req/s, the capacity bound, not on the 17.5 req/s SLO capacity")
    pr = SimpleNamespace(boundary=3.90625, notes=[])
    assert sizing_capacity(pr, BOUND) == 3.90625 and pr.notes == []
