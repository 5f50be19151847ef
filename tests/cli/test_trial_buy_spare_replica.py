"""``kvledger cost`` at a volume one replica carries says the bill has no spare for failover, prices one on the same
rental row and says whether the verdict survives it (ledgers/spare_note.py): a head of engineering deciding build or
buy read "self-host, $12,854.80/month" for a service that one pod failure would stop."""

from __future__ import annotations

import json

from cli_run import run_cli

RUN = "tests/evidence/data/llmperf/leaderboard_individual_anyscale_70b.json"
BASE = ("cost", RUN, "--slo", "ttft=500ms,tpot=50ms", "--api", "Anthropic:claude-opus-4.5", "--gpu", "H100",
        "--num-gpus", "4", "--json")
TAIL = "network egress, storage, evaluation and staging are priced on neither side"


def _spare(doc: dict) -> list[str]:
    return [h for h in doc["headline"] if h.startswith("  not priced: a spare replica")]


def test_one_replica_self_host_verdict_flips_with_a_spare():
    doc = json.loads(run_cli(*BASE, "--gpu-provider", "RunPod", "--monthly-requests", "2.5e6").output)
    # 2.5e6 ÷ (730 × 3600 s) = 0.9513 req/s ≤ 1.403 good req/s × 80 % → 1 replica of 4 GPUs on RunPod at $2.69/GPU-h:
    # 4 × 2.69 × 730 = $7,854.80 + 0.25 × $20,000 = $12,854.80. claude-opus-4.5 at $5 / $25 per Mtok: 2.5e6 × 550 in
    # = 1,375 Mtok × 5 = $6,875 + 2.5e6 × 146.95 out = 367.4 Mtok × 25 = $9,184.17 → $16,059.17: self-host.
    # A second replica on the same per-GPU row: + $7,854.80 → $20,709.60 > $16,059.17: the API.
    assert doc["decision"]["verdict"] == "self-host" and doc["decision"]["replicas"] == 1
    assert _spare(doc) == [
        "  not priced: a spare replica — the bill is one replica, so a GPU or host failure or an upgrade stops the "
        "service; a second for failover adds $7,854.80/month of rental → $20,709.60/month self-hosted against "
        f"$16,059.17: the API is cheaper; {TAIL}"]


def test_spare_on_idle_gpus_of_the_billed_instance_costs_nothing_and_several_replicas_get_no_note():
    # Nebius bills H100s 8 to an instance: one 4-GPU replica already pays 8 × $2.95 × 730 = $17,228, so a second
    # replica fits the 4 idle GPUs at no extra rental
    doc = json.loads(run_cli(*BASE, "--gpu-provider", "Nebius", "--monthly-requests", "2e6").output)
    assert doc["decision"]["replicas"] == 1 and doc["decision"]["self_host_usd_per_month"] == 22228.00
    assert _spare(doc)[0].endswith(f"; a second for failover fits the billed instance's idle GPUs at no extra rental; "
                                   f"{TAIL}")
    # 1e7 requests: 3.805 req/s ÷ (1.403 × 0.8) → 4 replicas: losing one leaves three, no note
    doc = json.loads(run_cli(*BASE, "--gpu-provider", "RunPod", "--monthly-requests", "1e7").output)
    assert doc["decision"]["replicas"] == 4 and _spare(doc) == []
