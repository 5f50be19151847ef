"""``kvledger cost`` end to end on a measured run: a cache-write share at Anthropic is said as the premium it is, and
a realized utilization under 10 % keeps its decimal in the deciding factors (see tests/ledgers/test_api_pricing_words.py
for the words themselves)."""

from __future__ import annotations

import json

import pytest
from cli_run import run_cli

RUN = "tests/evidence/data/llmperf/leaderboard_individual_anyscale_70b.json"


def test_cost_says_cache_write_premium_and_small_utilization():
    args = ("cost", RUN, "--slo", "ttft=500ms,tpot=50ms", "--api", "Anthropic:claude-haiku-4.5", "--gpu", "H100",
            "--gpu-provider", "Nebius", "--num-gpus", "4", "--monthly-requests", "1e5", "--cache-write-rate", "0.3")
    doc = json.loads(run_cli(*args, "--json").output)
    # 1e5 requests × 550 in / 146.9 out tokens: 55 Mtok in, 14.69 Mtok out; input 0.7 × 55 × $1 + 0.3 × 55 × $1.25
    # = $59.125 (above the $55 list), output 14.69 × $5 = $73.47: $132.60
    tokens_out = doc["monthly"]["output_tokens"] / 1e6
    # a monthly bill is written to the cent (strict_json.MONTHLY)
    assert doc["monthly"]["api"]["total_usd"] == pytest.approx(55 * (0.7 + 0.3 * 1.25) + 5 * tokens_out, abs=0.005)
    assert doc["monthly"]["api"]["total_usd"] == 132.60
    assert doc["headline"][2] == ("  API: Anthropic:claude-haiku-4.5 (high confidence), at list price, plus the "
                                  "cache-write premium ($1.25 per Mtok written vs $1 input)")
    # 1e5 ÷ (730 × 3600 s) = 0.03805 req/s ÷ 1.403 good req/s = 2.7 % (was "3% of billed hours")
    assert doc["factors"][0]["value"].startswith("2.7% of billed hours; ")
