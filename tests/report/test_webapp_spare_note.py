"""The web app's serving answer carries cost's "not priced: a spare replica" line, as ``kvledger cost`` and the report
print it (webapp_answer.headline_notes): the same inputs must not say less in one place than in another."""

from __future__ import annotations

from fastapi.testclient import TestClient

from kvledger.report.webapp import create_app


def test_serving_answer_shows_the_missing_spare_replica():
    client = TestClient(create_app(), base_url="http://127.0.0.1")
    r = client.post("/api/serving", json={"model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "gpu_provider": "RunPod",
                                          "slo": "ttft=500ms,tpot=50ms", "num_requests": 60, "monthly_tokens": 3e8})
    assert r.status_code == 200, r.text
    d = r.json()
    # 300M tokens a month is one replica of 1 H100; RunPod's $2.69/GPU-h × 730 h = $1,963.70 of rental, + 0.25
    # engineer-month × $20,000 = $6,963.70; a second replica adds another $1,963.70 → $8,927.40
    assert d["cost"]["decision"]["replicas"] == 1 and d["cost"]["decision"]["self_host_usd_per_month"] == 6963.70
    spare = [n for n in d["headline"]["notes"] if n.startswith("not priced: a spare replica")]
    assert len(spare) == 1 and "adds $1,963.70/month of rental → $8,927.40/month self-hosted" in spare[0]
    assert spare[0] in [h.strip() for h in d["cost"]["headline"]]  # cost's own line, word for word
