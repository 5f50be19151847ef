"""``kvledger cost`` with ``--api`` naming another model's row (the API a team pays today) against self-hosting an
open model: where the verdict is self-host but a catalog row serving the open model itself bills less than
self-hosting, the answer says so — that third option is the answer without --api (ledgers/same_model_note.py)."""

from __future__ import annotations

import json

from cli_run import run_cli

RUN = "tests/evidence/data/llmperf/leaderboard_individual_anyscale_70b.json"
BASE = ("cost", RUN, "--slo", "ttft=500ms,tpot=50ms", "--gpu", "H100", "--gpu-provider", "Nebius", "--num-gpus", "4",
        "--monthly-requests", "1e7", "--model", "meta-llama/Llama-3.1-70B-Instruct")


def _note(doc: dict) -> list[str]:
    return [h for h in doc["headline"] if "the same model bought as an API" in h]


def test_self_host_verdict_against_another_model_names_the_cheaper_same_model_row():
    doc = json.loads(run_cli(*BASE, "--api", "Anthropic:claude-opus-4.5", "--json").output)
    # 1e7 requests × 550 input tokens (every request of the run) = 5.5B in; 1.4695B out (mean 146.95 per request).
    # claude-opus-4.5 at $5 / $25 per Mtok: 5,500 × 5 + 1,469.5 × 25 ≈ $64,236.67 → more than self-hosting:
    # 4 replicas × 4 H100 × 730 h × $2.95 (Nebius) = $34,456 + 0.25 engineer-month × $20,000 = $39,456.00.
    assert doc["decision"]["verdict"] == "self-host"
    assert doc["decision"]["self_host_usd_per_month"] == 39456.00
    # DeepInfra's Llama-3.1-70B row at $0.10 / $0.28 per Mtok: 5,500 × 0.10 + 1,469.5 × 0.28 = $961.45, and
    # 39,456 ÷ 961.45 = 41.04× — the same model bought as an API is the cheapest of the three options.
    assert _note(doc) == [
        "  note: the same model bought as an API costs less than self-hosting it: "
        "DeepInfra:meta-llama/Meta-Llama-3.1-70B-Instruct-Turbo $961.45/month, medium confidence, against "
        "$39,456.00/month self-hosted (41.0× as much) — the answer is the API without --api, which compares the "
        "rows serving this model"]
    text = run_cli(*BASE, "--api", "Anthropic:claude-opus-4.5").output
    assert "DeepInfra:meta-llama/Meta-Llama-3.1-70B-Instruct-Turbo $961.45/month" in text.split("\n\n")[0]


def test_no_note_where_the_verdict_is_already_the_api_or_the_row_is_the_same_model():
    # gpt-4.1 at $2 / $8: 5,500 × 2 + 1,469.5 × 8 = $22,755.73 < $39,456.00 → the API: nothing to add
    doc = json.loads(run_cli(*BASE, "--api", "OpenAI:gpt-4.1", "--json").output)
    assert doc["decision"]["verdict"] == "API" and _note(doc) == []
    # the same-model row named: it is the comparison itself
    doc = json.loads(run_cli(*BASE, "--api", "Together:meta-llama/Meta-Llama-3.1-70B-Instruct-Turbo", "--json").output)
    assert _note(doc) == []
