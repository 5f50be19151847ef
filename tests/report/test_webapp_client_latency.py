"""The web app's client latency field (``/api/serving``'s ``client_latency``): read as ``--client-latency`` is, refused
as a field error (400) before any work, added to every TTFT and E2E of the serving simulations, and said in the
headline with simulate's note."""

from __future__ import annotations

import pytest
from fastapi.testclient import TestClient

from kvledger.report.webapp import create_app

client = TestClient(create_app(), base_url="http://127.0.0.1")
BODY = {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "api": "OpenAI:gpt-4.1", "num_requests": 60}


def _serving(**over) -> dict:
    r = client.post("/api/serving", json={**BODY, **over})
    assert r.status_code == 200, r.text
    return r.json()


def test_the_latency_is_judged_as_the_engine_limit_less_it_and_said():
    # every client TTFT is the engine's + 30 ms, so ttft=100ms with 30 ms of latency is ttft=70ms on the engine: the
    # same probes and so the same boundary rate (7.9375 req/s, read off these runs of 60 requests: the H100's measured
    # matmul curve and layer kernels put a lone prompt's TTFT near 70 ms); below the boundary of ttft=100ms alone
    # (16 req/s: a TTFT-bound SLO; faster 60-request probes are too short to show their load, probe_length)
    client_side = _serving(slo="ttft=100ms", client_latency="30ms")
    engine_side = _serving(slo="ttft=70ms")
    alone = _serving(slo="ttft=100ms")
    probes = [[p["value"], p["attainment"]] for p in
              client_side["cost"]["simulation"]["capacity_search"]["boundary"]["points"]]
    assert probes == [[p["value"], p["attainment"]] for p in
                      engine_side["cost"]["simulation"]["capacity_search"]["boundary"]["points"]]
    h = client_side["headline"]
    assert h["sizing_req_per_s"] == engine_side["headline"]["sizing_req_per_s"]
    assert (h["sizing_req_per_s"], alone["headline"]["sizing_req_per_s"]) == (7.9375, 16.0)
    assert h["client_latency"].startswith("client latency 30 ms added to every request's TTFT and E2E (not TPOT/ITL): "
                                          "given: --client-latency 30 ms")
    assert client_side["request"]["client_latency"] == "30ms"
    assert alone["headline"]["client_latency"] is None and alone["request"]["client_latency"] is None
    # empty or zero is none: nothing added, nothing said
    assert _serving(slo="ttft=200ms", client_latency="0ms")["headline"]["client_latency"] is None


@pytest.mark.parametrize("value, words", [
    ("-5ms", "client_latency '-5ms' must be a finite, non-negative duration, got '-5ms'"),
    ("5", "client_latency '5' has no unit; write e.g. '5ms' or '5s', got '5'"),
    ("11s", "client_latency 11s is out of range; allowed: [0, 10] s, got '11s'"),
    ("profile:x", "client_latency takes a duration such as 21ms in the web app"),
])
def test_a_bad_latency_is_a_field_error(value, words, monkeypatch):
    import kvledger.report.webapp as webapp

    def no_work(*_a, **_k):
        raise AssertionError("a refused request must not simulate")

    monkeypatch.setattr(webapp, "serving_payload", no_work)
    r = client.post("/api/serving", json={**BODY, "slo": "ttft=200ms", "client_latency": value})
    assert r.status_code == 400 and r.json()["error"].startswith("invalid parameter: " + words), r.text


def test_the_page_has_the_field_and_the_note():
    html = client.get("/").text
    assert 'id="client_latency"' in html and 'id="client-latency-note"' in html
    assert '"client_latency"];' in html  # the serving request's fields end with it
