"""`kvledger experiment budget --json`: ``throughput_tok_per_s`` means what it means in `simulate` (output tokens of
finished requests per second), and the prompt + output figure is ``total_throughput_tok_per_s``, simulate's name for
it. The budget table once put the total under ``throughput_tok_per_s``: 76× simulate's figure on azure-code, whose
prompts are long and outputs short."""

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
    assert r.columns[-2:] == ["throughput_tok_per_s", "total_throughput_tok_per_s"]
    for row in r.rows:
        assert row["total_throughput_tok_per_s"] / row["throughput_tok_per_s"] == pytest.approx(76.1055, abs=1e-4)
    first = r.rows[0]
    assert first["max_num_batched_tokens"] == 512
    # output tok/s is in the hundreds, not the ~15,000 tok/s of prompt + output
    assert first["throughput_tok_per_s"] == pytest.approx(196.6, rel=0.01)
    assert first["total_throughput_tok_per_s"] == pytest.approx(14_963, rel=0.01)
