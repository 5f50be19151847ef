"""``cost --json``'s ``monthly`` spells ``decision``'s facts again (``monthly.requests`` is
``decision.requests_per_month``, ``monthly.cheaper`` is ``decision.verdict``, …): both keys stay (tests, the web UI and
docs read each), so ``monthly`` is read from the decision (``ledgers.monthly_section``), not kept as a second copy.
Before, ``CostReport.monthly`` was a field filled once at construction: a report whose decision was replaced kept the
old volume and verdict there."""

from __future__ import annotations

import dataclasses
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kvledger
from kvledger import strict_json
from kvledger.ledgers.cost_summary import CostReport
from kvledger.ledgers.monthly_section import MONTHLY_FROM_DECISION

# llmperf's leaderboard run of Llama-2-70B-chat on 4 H100s: 150 requests, mean 550 prompt / 146.95 output tokens
LLMPERF = "tests/evidence/data/llmperf/leaderboard_individual_anyscale_70b.json"
BASE = dict(slo="ttft=500ms,tpot=50ms", gpu="H100", num_gpus=4)


def _agree(d: dict) -> None:
    """Every ``monthly`` key equals the ``decision`` key it spells again, as the command prints them."""
    d = json.loads(strict_json.dumps(d))
    m, dec = d["monthly"], d["decision"]
    for key, name in MONTHLY_FROM_DECISION:
        if name is not None:
            assert m[key] == dec[name], key
    assert m["api"]["total_usd"] == dec["api_usd_per_month"]


def test_monthly_has_no_copy_of_its_own():
    assert "monthly" not in {f.name for f in dataclasses.fields(CostReport)}
    r = kvledger.cost(LLMPERF, api="OpenAI:gpt-4.1", gpu_provider="Nebius", monthly_tokens="3B", **BASE).report
    other = kvledger.cost(LLMPERF, api="OpenAI:gpt-4.1", gpu_provider="Nebius", monthly_tokens="300B", **BASE).report
    # 3B tokens a month at 550 + 146.95 tokens a request: 3e9 / 696.95 = 4,304,490 requests; 300B: 100 times that
    assert r.monthly["requests"] == r.decision.volume.requests == pytest.approx(3e9 / (550 + 22042 / 150))
    moved = dataclasses.replace(r, decision=other.decision)
    assert moved.monthly["requests"] == pytest.approx(100 * r.monthly["requests"])
    assert moved.monthly["cheaper"] == other.decision.verdict


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(volume=st.sampled_from(["monthly_tokens", "monthly_requests"]), amount=st.floats(1e5, 1e12),
       api=st.sampled_from(["OpenAI:gpt-4.1", "OpenAI:gpt-4.1-mini", "Anthropic:claude-sonnet-4.6"]),
       provider=st.sampled_from(["Nebius", "Lambda", "CoreWeave"]), max_utilization=st.floats(0.3, 1.0),
       peak_to_mean=st.floats(1.0, 4.0))
def test_monthly_and_decision_agree_over_inputs(volume, amount, api, provider, max_utilization, peak_to_mean):
    d = kvledger.cost(LLMPERF, api=api, gpu_provider=provider, max_utilization=max_utilization,
                      peak_to_mean=peak_to_mean, **{volume: amount}, **BASE).to_dict()
    _agree(d)
    # and they are the volume asked for: requests, or tokens split 550 : 146.95 as the run's requests
    m = d["monthly"]
    if volume == "monthly_requests":
        assert m["requests"] == pytest.approx(amount)
    else:
        assert m["input_tokens"] + m["output_tokens"] == pytest.approx(amount)
        assert m["requests"] == pytest.approx(amount / (550 + 22042 / 150))
