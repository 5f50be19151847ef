"""``kvledger.cost(...)`` evaluated in a notebook cell shows the answer, not an empty ``CostResult()``."""

from __future__ import annotations

import kvledger

LLMPERF = "tests/evidence/data/llmperf/leaderboard_individual_anyscale_70b.json"


def test_cost_result_repr_is_the_answer_line():
    r = kvledger.cost(LLMPERF, slo="ttft=500ms,tpot=50ms", api="OpenAI:gpt-4.1", gpu="H100", gpu_provider="Nebius",
                      num_gpus=4, monthly_requests=1e7)
    # 1e7 requests × 550 in / 146.95 out tokens: 5.5B in, 1.47B out, 6.97B in all; gpt-4.1 at $2 / $8 per Mtok:
    # 5,500 × 2 + 1,469.5 × 8 = $22,755.73; self-hosted 4 replicas × 4 H100 × 730 h × $2.95 (Nebius) = $34,456
    # + 0.25 engineer-month × $20,000 = $39,456.00 → the API
    assert repr(r) == ("CostResult('answer: the API — $22,755.73/month on the API vs $39,456.00/month self-hosted, "
                       "for 6.97B tokens/month (5.5B in, 1.47B out)')")
    assert repr(r) == f"CostResult({r.to_dict()['headline'][0]!r})"
