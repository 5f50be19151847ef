"""Work the page abandoned (it aborts its earlier request when a field changes) does not hold the places its latest
request needs: a request in line whose client has gone leaves the line, a running one stops at its next stage."""

from __future__ import annotations

import asyncio
import json
import socket
import threading
import time

import httpx
import pytest

import kvledger.report.webapp as webapp
from kvledger.report.webapp_guard import Busy, Gone, WorkQueue

SERVING = {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "slo": "ttft=200ms,tpot=50ms"}


def test_a_request_whose_client_left_gives_its_place_back():
    async def scenario() -> list[str]:
        q = WorkQueue("serving", running=1, waiting=1)
        left, seen = asyncio.Event(), []

        async def gone() -> bool:
            return left.is_set()

        async def running() -> None:
            async with q.wanted_slot(gone):
                await asyncio.sleep(0.5)
                seen.append("first done")

        async def waiting() -> None:
            try:
                async with q.wanted_slot(gone):
                    seen.append("abandoned one ran")
            except Gone:
                seen.append("abandoned one left the line")

        first = asyncio.create_task(running())
        await asyncio.sleep(0.05)
        second = asyncio.create_task(waiting())
        await asyncio.sleep(0.05)
        with pytest.raises(Busy):  # 1 running + 1 waiting: full
            async with q.wanted_slot(gone):
                pass
        left.set()  # the waiting request's client aborts
        await second
        left.clear()
        async with q.wanted_slot(gone):  # its place is free again: in line behind the first, not refused
            seen.append("latest ran")
        await first
        return seen

    assert asyncio.run(scenario()) == ["abandoned one left the line", "first done", "latest ran"]


def test_serving_stops_before_simulating_once_its_client_has_gone():
    t0 = time.perf_counter()
    with pytest.raises(Gone):
        webapp.serving_payload(SERVING["model"], SERVING["gpu"], SERVING["slo"], None, stopped=lambda: True)
    assert time.perf_counter() - t0 < 5  # at the first stage (the memory plan), long before a capacity search ends


def test_aborted_requests_on_a_real_server_leave_room_for_the_latest(monkeypatch):
    """Through uvicorn (a client's disconnect is seen only there): three aborted requests, then the page's latest is
    answered instead of 503 busy (1 running + 2 waiting is the serving queue's size)."""
    import uvicorn

    started = []

    def slow(*args, stopped=None, **kwargs):
        started.append(time.perf_counter())
        for _ in range(50):  # about 5 s unless stopped: a stage boundary every 0.1 s
            if stopped is not None and stopped():
                raise Gone()
            time.sleep(0.1)
        return {"headline": {}, "cost": {}, "figures": {}}

    monkeypatch.setattr(webapp, "serving_payload", slow)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(webapp.create_app(), host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    url, headers = f"http://127.0.0.1:{port}/api/serving", {"Content-Type": "application/json"}
    try:
        for _ in range(100):
            if server.started:
                break
            time.sleep(0.05)
        for i in range(3):
            with pytest.raises(httpx.TimeoutException):
                httpx.post(url, content=json.dumps({**SERVING, "request_id": i}), headers=headers, timeout=0.3)
        t0 = time.perf_counter()
        r = httpx.post(url, content=json.dumps({**SERVING, "request_id": 9}), headers=headers, timeout=60)
        assert r.status_code == 200 and r.json()["request"]["request_id"] == 9
        # the abandoned ones stopped (each within about 0.3 s of its client leaving), so the latest started at once,
        # not behind another run of about 5 s (the bounds leave room for a loaded two-core machine)
        assert time.perf_counter() - t0 < 30 and started[-1] - t0 < 4
    finally:
        server.should_exit = True
        thread.join(10)
