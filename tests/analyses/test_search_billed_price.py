"""search names, as the winner's price, the row its bill rents, with that row's confidence, and prices the tokens on it
(a fresh-user trial: "winner's price: $3.5 per GPU-hour, Nebius gpu-h200-sxm 8gpu (… high confidence …)" above
"winner's bill: … at $3.59/GPU-h (RunPod:Secure Cloud pod)")."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvledger.cli.main import app


def test_the_price_named_is_the_row_billed():
    res = CliRunner().invoke(app, ["search", "meta-llama/Llama-3.1-70B", "--slo", "ttft=1s,tpot=60ms", "--gpus", "H200",
                                   "--tp", "2", "--monthly-tokens", "2B", "--json"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    w = next(e for e in d["candidates"] if e["status"] == "feasible")
    pr, s = w["price"], w["sizing"]
    # the cheapest row per GPU-hour is Nebius's 8-GPU instance at $3.50, but one TP-2 replica is cheapest on RunPod's
    # per-GPU pods: 2 GPUs × $3.59 = $7.18/h against 8 × $3.50 = $28/h; the bill and the price name the same row
    assert s["billed_rows"] == ["RunPod:Secure Cloud pod"]
    assert (pr["provider"], pr["instance_type"], pr["usd_per_gpu_hour"], pr["confidence"]) == (
        "RunPod", "Secure Cloud pod", 3.59, "medium")
    assert pr["usd_per_gpu_hour"] == s["instance_usd_per_gpu_hour"]
    # the tokens are priced on it: $/1k good requests at capacity = 2 GPUs × $3.59 × 1,000 ÷ (3600 × good req/s priced,
    # the capacity × its attainment)
    c = w["capacity"]
    good = c["slo_capacity_req_per_s"] * c["attainment"]
    assert w["cost"]["usd_per_1k_requests_at_capacity"] == pytest.approx(2 * 3.59 * 1000 / (3600 * good), rel=1e-9)
    text = CliRunner().invoke(app, ["search", "meta-llama/Llama-3.1-70B", "--slo", "ttft=1s,tpot=60ms", "--gpus",
                                    "H200", "--tp", "2", "--monthly-tokens", "2B"]).output
    text = " ".join(text.split())  # the console wraps at its width
    assert "winner's price: $3.59 per GPU-hour, RunPod Secure Cloud pod (on_demand, as of 2026-03, medium confidence" \
        in text


def test_the_headline_bill_says_it_is_gpu_rental_only():
    args = ["search", "meta-llama/Llama-3.1-70B", "--slo", "ttft=1s,tpot=60ms", "--gpus", "H200", "--tp", "2",
            "--monthly-tokens", "2B"]
    d = json.loads(CliRunner().invoke(app, [*args, "--json"]).stdout)
    assert d["winner"]["bill_covers"] == "GPU rental only (the people line is in cost)"
    text = " ".join(CliRunner().invoke(app, args).output.split())
    # 1 replica × 2 GPUs × 730 h × $3.59 = $5,241.40 a month: the GPUs alone (cost adds $5,000/month of people)
    assert ("winner: nvidia_h200_sxm:tp2:kv-auto — $5,241/month, GPU rental only (the people line is in cost), "
            "for 2 GPUs (1 replica × TP 2)") in text
