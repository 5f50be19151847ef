"""`kvledger experiment budget --json`: ``throughput_output_tok_per_s`` means what it means in `simulate` (output
tokens of finished requests per second), and the prompt + output figure is ``total_throughput_tok_per_s``, simulate's
name for it. The budget table once put the total under the output figure's name: 76× simulate's figure on azure-code,
whose prompts are long and outputs short."""

from __future__ import annotations

import pytest

from kvledger.analyses.serving.experiments import run_experiment
from kvledger.dynamics.workload.traces import load_trace


def test_budget_rows_name_output_and_total_throughput_as_simulate_does():
    r = run_experiment("budget", quick=True)
    # --quick: azure-code's first 800 requests at 3× its rate: 1,717,738 prompt and 22,871 output tokens, every one
    # finished in every row, so total / output = (1,717,738 + 22,871) / 22,871 = 76.1055 in every row.
    reqs = load_trace("azure-code", num_requests=800, rate_scale=3.0)
    prompt = sum(q.num_prompt_tokens for q in reqs)
    output = sum(q.num_output_tokens for q in reqs)
    assert (prompt, output) == (1_717_738, 22_871)
    assert r.columns[-2:] == ["throughput_output_tok_per_s", "total_throughput_tok_per_s"]
    for row in r.rows:
        ratio = row["total_throughput_tok_per_s"] / row["throughput_output_tok_per_s"]
        assert ratio == pytest.approx(76.1055, abs=1e-4)
    first = r.rows[0]
    assert first["max_num_batched_tokens"] == 512
    # output tok/s is in the hundreds, not the ~15,000 tok/s of prompt + output
    assert first["throughput_output_tok_per_s"] == pytest.approx(196.6, rel=0.01)
    assert first["total_throughput_tok_per_s"] == pytest.approx(14_963, rel=0.01)


def test_budget_reports_itl_mean_and_p90_and_says_when_the_median_flips_modes():
    # a user trial: itl_p50_s 0.016 → 0.027 → 0.049 → 0.095 → 0.186 → 0.0169 at 16,384 beside "smaller budgets give
    # better ITL": at 16,384 most gaps are decode-only steps (~17 ms) while the steps carrying a whole 16K-token chunk
    # (~0.39 s at p90) pull the mean to 0.17 s — the median sits in the short mode
    r = run_experiment("budget", quick=True)
    assert r.columns[3:7] == ["itl_mean_s", "itl_p50_s", "itl_p90_s", "itl_p99_s"]
    means = [row["itl_mean_s"] for row in r.rows]
    assert means == sorted(means)  # the mean rises with the budget at every step
    last = r.rows[-1]
    assert last["max_num_batched_tokens"] == 16384 and last["itl_p50_s"] < r.rows[-2]["itl_p50_s"]  # the p50 flip
    assert abs(last["itl_p50_s"] - last["itl_mean_s"]) > 0.25 * last["itl_mean_s"]  # BIMODAL_GAP
    assert r.notes[0].startswith("measured: ITL mean 15.2, 24.2, 39.6, 64.5, 107.4, 170.1 ms at budgets 512,")
    assert r.notes[0].endswith("rises with the budget: smaller budgets give better ITL here, as published")
    flagged = [n.split(":")[0] for n in r.notes[1:]]
    assert flagged == ["budget 4,096", "budget 8,192", "budget 16,384"]  # p50 94.6 vs mean 64.5 ms is 47 % off too
    assert "ITL p50 16.9 ms against a mean of 170.1 ms (p90 387.4 ms): the pooled gaps are bimodal" in r.notes[-1]
    assert "notes" not in run_experiment("kv-waste", quick=True).to_dict()  # the other experiments' JSON unchanged
