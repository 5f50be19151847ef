"""The web app under real use, without a browser: work only by a JSON POST from its own page, a bounded queue that
answers "busy" at once, the token when exposed, answers that name their request, cards and figures that say
"does not fit" and respect max_model_len."""

from __future__ import annotations

import threading
import time

import pytest
from fastapi.testclient import TestClient

import kvledger.report.webapp as webapp
from kvledger.report.webapp import create_app
from kvledger.report.webapp_guard import Busy, WorkQueue

PLAN = {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100"}
SERVING = {**PLAN, "slo": "ttft=200ms", "api": "OpenAI:gpt-4.1", "num_requests": 50}
client = TestClient(create_app(), base_url="http://127.0.0.1")


def test_cross_origin_post_is_refused_and_same_origin_answers():
    r = client.post("/api/plan", json=PLAN, headers={"Origin": "http://evil.example"})
    assert r.status_code == 403 and "cross-origin request refused" in r.json()["error"]
    r = client.post("/api/plan", json=PLAN, headers={"Sec-Fetch-Site": "cross-site"})
    assert r.status_code == 403 and "Sec-Fetch-Site: cross-site" in r.json()["error"]
    r = client.post("/api/plan", json=PLAN, headers={"Origin": "http://127.0.0.1", "Sec-Fetch-Site": "same-origin"})
    assert r.status_code == 200


def test_work_is_never_started_by_a_get_or_a_form_post():
    assert client.get("/api/plan", params=PLAN).status_code == 405
    assert client.get("/api/serving", params=SERVING).status_code == 405
    # a cross-site HTML form can only send form encodings: refused before anything is parsed or run
    r = client.post("/api/plan", data=PLAN)
    assert r.status_code == 415 and "application/json" in r.json()["error"]


def test_each_answer_carries_the_request_it_answers():
    r = client.post("/api/plan", json={**PLAN, "max_model_len": "8K", "request_id": 41})
    d = r.json()
    req = d["request"]
    assert req["request_id"] == 41 and req["max_model_len"] == "8K" and req["model"] == PLAN["model"]
    # the 128K card at an 8K max_model_len: no request of 128K is accepted, so no figure (it read 0.24 before)
    assert d["headline"]["max_model_len"] == 8192 and d["headline"]["max_concurrency_128k"] is None
    assert d["headline"]["max_concurrency_8k"] is not None and d["headline"]["fits"] is True


def test_a_model_that_does_not_fit_says_so_in_its_figure():
    # Qwen3-Next-80B in bf16 on one H200: 148.41 GiB of weights against 139.8 GiB, no KV block
    d = client.post("/api/plan", json={"model": "Qwen/Qwen3-Next-80B-A3B-Instruct", "gpu": "H200"}).json()
    assert d["headline"]["fits"] is False and d["headline"]["num_gpu_blocks"] == 0
    svg = d["figures"]["concurrency_by_context"]["svg"]
    assert "does not fit" in svg and "−0.04" not in svg and "-0.04" not in svg


def test_a_pool_too_small_for_max_model_len_does_not_fit_though_it_has_blocks():
    # Llama-3.1-70B at TP 2 on H100 (vLLM 0.33 defaults): 969 blocks per GPU of 16 tokens × 80 layers × 2 (K, V) × 4
    # KV heads (8 ÷ TP 2) × 128 × 2 B = 2.5 MiB (2.37 GiB), and one 131,072-token request needs 8,192 blocks: plan's
    # verdict is "max_model_len does not fit" (vLLM refuses to start), so the headline does not fit while its pool
    # (the blocks card) still shows what the memory holds
    d = client.post("/api/plan", json={"model": "meta-llama/Llama-3.1-70B", "gpu": "H100", "tp": 2}).json()
    h = d["headline"]
    assert d["plan"]["advice"]["verdict"] == "max_model_len_does_not_fit"
    assert h["fits"] is False and h["pool"] is True and h["num_gpu_blocks"] == 969


def test_the_serving_default_is_the_clis():
    from kvledger.analyses.serving.decision_data import ReportRequest

    assert webapp.SERVING_NUM_REQUESTS == ReportRequest.__dataclass_fields__["num_requests"].default == 2000
    assert 'value="2000"' in client.get("/").text


def test_a_full_queue_answers_busy_at_once(monkeypatch):
    release = threading.Event()
    entered = threading.Semaphore(0)

    def slow(*args, **kwargs):
        entered.release()
        release.wait(30)
        return {"headline": {}, "cost": {}, "figures": {}}

    monkeypatch.setattr(webapp, "serving_payload", slow)
    app_client = TestClient(create_app(), base_url="http://127.0.0.1")
    codes: list[int] = []
    threads = [threading.Thread(target=lambda: codes.append(app_client.post("/api/serving", json=SERVING).status_code))
               for _ in range(3)]  # 1 running + 2 waiting: the serving queue's size
    for t in threads:
        t.start()
    assert entered.acquire(timeout=30)  # the first is running
    time.sleep(0.3)  # the other two are in line
    t0 = time.perf_counter()
    r = app_client.post("/api/serving", json=SERVING)
    assert r.status_code == 503 and r.json()["busy"] is True and r.headers["Retry-After"] == "5"
    assert time.perf_counter() - t0 < 5  # answered at once, not after the work ahead of it
    release.set()
    for t in threads:
        t.join(30)
    assert codes == [200, 200, 200]


def test_work_queue_bounds():
    q = WorkQueue("plan", running=1, waiting=0)
    with q.slot():
        with pytest.raises(Busy, match="busy: 1 plan computation"):
            with q.slot():
                pass
    with q.slot():  # the place is free again
        pass


def test_a_token_is_required_when_one_is_set():
    guarded = TestClient(create_app(token="s3cret"))
    assert guarded.get("/").status_code == 403
    page = guarded.get("/", params={"token": "s3cret"})
    assert page.status_code == 200 and '"s3cret"' in page.text  # the page sends it with each request
    assert guarded.post("/api/plan", json=PLAN).status_code == 403
    assert guarded.get("/api/choices").status_code == 403
    assert guarded.post("/api/plan", json=PLAN, headers={"X-Kvledger-Token": "s3cret"}).status_code == 200


def test_ui_on_a_non_loopback_host_warns_and_prints_a_token(monkeypatch):
    import uvicorn
    from typer.testing import CliRunner

    from kvledger.cli.main import app

    seen = {}
    monkeypatch.setattr(uvicorn, "run", lambda app_, host, port, log_level: seen.update(host=host, app=app_))
    monkeypatch.setattr("kvledger.cli.ui_cmd._check_free", lambda host, port: None)
    res = CliRunner().invoke(app, ["ui", "--host", "0.0.0.0", "--port", "8799"])
    assert res.exit_code == 0, res.output
    assert "warning: --host 0.0.0.0 exposes the app beyond this machine" in res.output
    assert "http://0.0.0.0:8799/?token=" in res.output and seen["host"] == "0.0.0.0"
    res = CliRunner().invoke(app, ["ui", "--port", "8799"])
    assert "warning" not in res.output and "?token=" not in res.output


def test_on_loopback_a_host_that_is_not_this_machine_is_refused():
    # DNS rebinding: a page on rebound.example whose name now resolves to 127.0.0.1 sends Host and Origin
    # rebound.example:8000, which agree with each other; only the Host check tells it from the app's own page
    rebound = TestClient(create_app(), base_url="http://rebound.example:8000")
    assert rebound.get("/").status_code == 400 and "is not this machine" in rebound.get("/").json()["error"]
    r = rebound.post("/api/plan", json=PLAN, headers={"Origin": "http://rebound.example:8000"})
    assert r.status_code == 400
    for name in ("http://localhost:8000", "http://[::1]:8000", "http://127.0.0.1:8000"):
        assert TestClient(create_app(), base_url=name).get("/api/choices").status_code == 200, name
    # with a token (kvledger ui --host beyond loopback) any name may reach it: the token guards it
    assert TestClient(create_app(token="t"), base_url="http://box.lan").get("/", params={"token": "t"}).status_code \
        == 200


def test_a_post_states_its_length_and_stays_small():
    from kvledger.report.webapp_guard import MAX_BODY_BYTES

    big = b'{"model": "' + b"x" * MAX_BODY_BYTES + b'"}'
    r = client.post("/api/plan", content=big, headers={"Content-Type": "application/json"})
    assert r.status_code == 413 and f"at most {MAX_BODY_BYTES:,} B" in r.json()["error"]

    def chunks():  # no Content-Length: a chunked body of unknown size
        yield b'{"model": "meta-llama/Llama-3.1-8B", "gpu": "H100"}'

    r = client.post("/api/plan", content=chunks(), headers={"Content-Type": "application/json"})
    assert r.status_code == 411 and "Content-Length" in r.json()["error"]


def test_host_names_are_read_with_ports_and_ipv6_brackets():
    from kvledger.report.webapp_guard import host_name

    assert [host_name(h) for h in ("[::1]:8765", "[::1]", "127.0.0.1:8765", "LocalHost:80", "::1", None, "[::1")] == \
        ["::1", "::1", "127.0.0.1", "localhost", "::1", "", ""]
