"""The web app's /api/serving takes the monthly volume (issue 21): no --api, no utilization, and the answer leads with
both monthly bills against the API rows serving the same model."""

from __future__ import annotations

from fastapi.testclient import TestClient

from kvledger.report.webapp import create_app


def test_serving_with_a_volume_answers_with_both_bills():
    client = TestClient(create_app(), base_url="http://127.0.0.1")
    r = client.post(  # work is a JSON POST from the page (webapp_guard)
        "/api/serving",
        json={
            "model": "meta-llama/Llama-3.1-8B",
            "gpu": "H100",
            "slo": "ttft=500ms,tpot=50ms",
            "num_requests": 60,
            "monthly_tokens": 3e8,  # a JSON number, as the page sends it (a string is refused: webapp_requests)
        },
    )
    assert r.status_code == 200, r.text
    d = r.json()
    h, dec = d["headline"], d["cost"]["decision"]
    assert h["answer"].startswith("answer: the API — $") and "/month self-hosted, for 300M tokens/month" in h["answer"]
    assert dec["verdict"] == "API" and {a["same_model"] for a in dec["api_options"]} == {True}
    assert d["cost"]["inputs"]["utilization_how"] == "the volume's realized utilization"
    # the capacity card carries the capacity's 80% band (the search's error_band)
    cs = d["cost"]["simulation"]["capacity_search"]
    assert h["sizing_req_per_s_range"] == [cs["error_band"]["low"], cs["error_band"]["high"]]
    assert h["sizing_req_per_s_range"][0] < h["sizing_req_per_s"] == cs["slo_capacity_req_per_s"]
    assert h["capacity_band"] == cs["error_band"]["text"]
    # and its warnings: 60 requests per probe replay a sample unlike azure-conv (722 / 122 mean tokens against 1,155 /
    # 211 over the whole trace: probe_sample), said whether or not the boundary probe was steady
    assert h["capacity_warning"].startswith("warning: unrepresentative sample: each probe replays the trace's first "
                                            "60 requests")
    assert ("ended with its queue still growing" in h["capacity_warning"]) == (cs["not_steady"] is not None)
