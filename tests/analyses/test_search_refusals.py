"""A search whose workload the engine partly refuses (prompts ≥ max_model_len): when the refused share alone keeps
every load under the target, each candidate is rejected before any simulation and the answer names max_model_len,
not the SLO (trial L: a 32K-context search simulated 48 candidates × 30 probes for 151 s, then said "loosen the
SLO")."""

from __future__ import annotations

import pytest
from typer.testing import CliRunner

from kvledger.analyses.search import Axes, SearchSpec, run_search
from kvledger.cli.main import app


def _trace(tmp_path, long_prompts: int) -> str:
    """50 requests a second apart, 500 prompt + 64 output tokens, the first ``long_prompts`` of them with 4,000-token
    prompts (past a max_model_len of 2,048)."""
    rows = ["arrival_s,num_prompt_tokens,num_output_tokens"]
    rows += [f"{i}.0,{4000 if i < long_prompts else 500},64" for i in range(50)]
    path = tmp_path / f"trace{long_prompts}.csv"
    path.write_text("\n".join(rows) + "\n")
    return str(path)


def _spec(trace: str) -> SearchSpec:
    return SearchSpec(model="meta-llama/Llama-3.2-3B", slo="ttft=2s,tpot=100ms", trace=trace, num_requests=50,
                      max_model_len=2048, rate_req_per_s=1.0)


def test_refused_requests_past_the_target_reject_every_candidate_unsimulated(tmp_path):
    res = run_search(_spec(_trace(tmp_path, 10)), Axes(gpus=("H100", "L40S"), tps=(1,)))
    assert [e["status"] for e in res.entries] == ["rejected", "rejected"]
    for e in res.entries:
        assert e["reason"] == "SLO not met at any rate" and "capacity" not in e  # no probe was simulated
        r = e["refused_requests"]
        # vLLM V1 refuses a prompt ≥ max_model_len: the ten 4,000-token prompts of 50, so attainment ≤ 40/50 = 0.8,
        # 0.1 below the 0.9 target; the least max_model_len refusing none is the longest prompt + 1 = 4,001, and one
        # serving each request whole 4,000 + 64 = 4,064
        assert (r["num_rejected"], r["num_requests"], r["max_model_len"]) == (10, 50, 2048)
        assert (r["least_max_model_len"], r["longest_request_tokens"]) == (4001, 4064)
        assert e["decided_by_bound"]["attainment_upper"] == pytest.approx(0.8)
        assert e["decided_by_bound"]["margin"] == pytest.approx(0.1)
        assert e["detail"].startswith("decided before simulating: 10 of the 50 requests per probe (20.0%)")
    assert res.to_dict()["screening"]["simulated"] == 0


def test_the_answer_names_max_model_len_and_its_fix_not_the_slo(tmp_path):
    out = CliRunner().invoke(app, ["search", "meta-llama/Llama-3.2-3B", "--slo", "ttft=2s,tpot=100ms", "--trace",
                                   _trace(tmp_path, 10), "--num-requests", "50", "--max-model-len", "2048", "--rate",
                                   "1", "--gpus", "H100", "--tp", "1"])
    assert out.exit_code == 1, out.output  # no winner: exit 1, after the answer
    text = " ".join(out.output.split())  # the console wraps long lines
    head = text[text.index("no candidate meets the SLO"):]
    assert head.startswith("no candidate meets the SLO: 10 of the 50 requests per probe (20.0%) are rejected")
    assert "attainment is at most 80.0% at any load" in head and "raise --max-model-len to at least 4,064" in head
    assert "loosen the SLO" not in text


def test_the_simulated_rejection_of_an_exhaustive_search_names_it_too(tmp_path):
    (e,) = run_search(_spec(_trace(tmp_path, 10)), Axes(gpus=("H100",), tps=(1,)), exhaustive=True).entries
    assert e["reason"] == "SLO not met at any rate" and e["capacity"]["probes"]  # simulated this time
    assert e["refused_requests"]["num_rejected"] == 10


def test_refusals_within_the_target_leave_the_candidate_to_its_simulation(tmp_path):
    # five refused of 50: attainment can still reach 45/50 = 0.9, the target itself, so it is not decided beforehand
    (e,) = run_search(_spec(_trace(tmp_path, 5)), Axes(gpus=("H100",), tps=(1,))).entries
    assert "refused_requests" not in e and "capacity" in e
