"""A search candidate whose target is met only within its run's sampling noise even near idle (``idle_edge``: no
capacity you can bank on) is rejected for that, not for "SLO not met at any rate", and the answer's advice names
``--num-requests``, which shrinks the noise."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from typer.testing import CliRunner

from kvledger.analyses.search import Axes, SearchSpec, run_search
from kvledger.analyses.search.reasons import SLO_NOT_MET, SLO_WITHIN_NOISE
from kvledger.cli.main import app
from kvledger.report.search_answer import no_winner_line

# Llama-3.1-8B on one H100, flat GEMM efficiency, 100 requests, TTFT ≤ 60 ms with 25 ms of client latency added:
# 90 of the 100 requests meet it even near idle, 90 % ± √(0.9·0.1/100) = ±3.00 % against a 90 % target
ARGS = ["meta-llama/Llama-3.1-8B", "--gpu", "H100", "--tp", "1", "--slo", "ttft=60ms", "--num-requests", "100",
        "--client-latency", "25ms", "--gemm-efficiency", "flat", "--max-model-len", "8192", "--utilization", "0.5",
        "--exhaustive"]


@pytest.fixture(scope="module")
def edge_entry():
    spec = SearchSpec(model="meta-llama/Llama-3.1-8B", slo="ttft=60ms", num_requests=100, client_latency="25ms",
                      gemm_efficiency="flat", max_model_len=8192, utilization=0.5)
    (e,) = run_search(spec, Axes(gpus=("H100",), tps=(1,)), exhaustive=True).entries
    return e


def test_the_noise_rejection_has_its_own_reason(edge_entry):
    e = edge_entry
    assert (e["status"], e["reason"]) == ("rejected", "SLO met only within the run's noise") == ("rejected",
                                                                                                 SLO_WITHIN_NOISE)
    # near idle: the lowest rate probed ÷ IDLE_DIVISOR 16, 0.25 ÷ 16 = 0.015625 — 0.25 the low end of the bracket
    # [0.25, 0.5], probed since a low end is verified, not implied (sim_bracket; 0.3125 ÷ 16 = 0.01953 before)
    assert e["detail"].startswith("no SLO capacity you can bank on: even near idle (0.01562 req/s) only ≈90.00% of "
                                  "requests meet the SLO, at the edge of the 90% target (±3.00% sampling noise over "
                                  "100 requests, z = 1)")
    assert "--num-requests" in e["detail"] and e["capacity"]["probes"]


def test_the_search_answer_advises_more_requests():
    res = CliRunner().invoke(app, ["search", *ARGS])
    text = " ".join(res.output.split())
    assert res.exit_code == 1, res.output  # no winner: exit 1, after the answer
    assert ("no candidate meets the SLO beyond the run's noise: even near idle the target is met only within one "
            "standard error; see the reasons below (run more requests per probe with --num-requests to shrink the "
            "noise, lower --target or loosen the SLO)") in text
    assert "rejected: 1 of 1 — SLO met only within the run's noise: 1 (e.g. nvidia_h100_sxm:tp1:kv-auto)" in text
    assert SLO_NOT_MET not in text


def _result(*reasons: str) -> SimpleNamespace:
    return SimpleNamespace(entries=[{"id": f"c{i}", "status": "rejected", "reason": r} for i, r in enumerate(reasons)],
                           spec=SimpleNamespace(target=0.9))


def test_a_mix_keeps_the_slo_headline_and_adds_the_noise_advice():
    line = no_winner_line(_result(SLO_NOT_MET, SLO_WITHIN_NOISE, "max_model_len"))
    assert line == ("no candidate meets the SLO: see the reasons below (loosen the SLO, lower --target, add GPUs or "
                    "TP; for those met only within the run's noise, run more requests per probe with --num-requests "
                    "to shrink the noise, lower --target or loosen the SLO)")
    # a noise rejection was held to the SLO: not "no candidate was run against the SLO"
    assert no_winner_line(_result(SLO_WITHIN_NOISE, "no price row")).startswith(
        "no candidate meets the SLO beyond the run's noise")
    assert no_winner_line(_result(SLO_NOT_MET)) == ("no candidate meets the SLO: see the reasons below (loosen the "
                                                    "SLO, lower --target, add GPUs or TP)")


def test_a_noise_rejection_gets_no_tier_variants(edge_entry, monkeypatch):
    # a tier's rate search has no near-idle check: it would answer the rate the bisection settled on in the noise
    from kvledger.analyses.search import tier_entries
    from kvledger.analyses.search.offload_axis import offload_pass, parse_offload

    tried = []
    monkeypatch.setattr(tier_entries, "variant_entry", lambda spec, e, o, prices: tried.append(e["id"]) or {
        "status": "rejected"})
    missed = {**edge_entry, "id": "missed", "reason": SLO_NOT_MET}  # the same probes, rejected for a miss
    assert len(offload_pass(None, [edge_entry, missed], parse_offload("cpu:256GiB"), {})) == 1
    assert tried == ["missed"]
