"""What the web app asks of a request before it does work: POST with JSON from its own page, the token when it is
exposed beyond this machine, and a free place in a bounded work queue.

A browser lets any page it shows send a POST to ``127.0.0.1`` (a "simple" cross-site form post) or load a GET; a
request that starts a simulation must therefore come from the app's own page. The checks, each answered in JSON: the
body is ``application/json`` (a cross-site form cannot send that without a CORS preflight, which this app never
grants: 415 otherwise); the ``Origin`` header, when the browser sends one, names this server and
``Sec-Fetch-Site`` is ``same-origin`` or ``none`` (403 otherwise); with a token (``kvledger ui --host`` other than
loopback) the ``X-Kvledger-Token`` header equals it (403). Work runs in a bounded queue: ``running`` at once and
``waiting`` more; a request beyond that is answered 503 with ``{"busy": true}`` and a ``Retry-After`` at once
instead of waiting behind others. Served on loopback without a token, every request's ``Host`` must name this machine
(``127.0.0.1``, ``localhost``, ``::1``, bracketed with a port or not; ``HostGuard``, 400 otherwise; read here, not
by Starlette's ``TrustedHostMiddleware``, whose older releases cut ``[::1]:port`` at its first colon): a page on
another site whose name an attacker points at 127.0.0.1 (DNS rebinding) sends its own name as ``Host`` and
``Origin``, which agree with each other and would pass the origin check alone. A POST states its body's length
(411 otherwise) and stays under ``MAX_BODY_BYTES`` (413): the page's requests are a few hundred bytes. A request
whose client has gone (the page aborts its earlier request when a field changes) leaves the line instead of running,
and a running one stops at its next stage (``Gone``): abandoned work must not hold the places the page's latest
request needs.
"""

from __future__ import annotations

import asyncio
import hmac
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Any

__all__ = ["Busy", "Gone", "HostGuard", "PostGuard", "Refused", "WorkQueue", "check_request", "host_name",
           "run_while_wanted", "stop_if", "LOOPBACK", "LOOPBACK_HOSTS", "MAX_BODY_BYTES"]

POLL_S = 0.05  # how often a request in line looks for a free place and for its client's departure

LOOPBACK = ("127.0.0.1", "::1", "localhost")
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "::1")  # Host header names of this machine (host_name strips the rest)
MAX_BODY_BYTES = 64 * 1024  # a POST's body at most, B: the page's JSON requests are a few hundred bytes


class Busy(Exception):
    """The work queue is full: answer 503 at once."""


class Gone(Exception):
    """The client that asked has gone (the page aborted the request for a newer one): its work is not done."""

    def __init__(self) -> None:
        super().__init__("the client abandoned this request (the page sent a newer one); its work was stopped")


class Refused(Exception):
    """The request may not start work (cross-origin, no JSON, wrong token): ``status`` and the reason."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class WorkQueue:
    """At most ``running`` computations at once and ``waiting`` more in line; beyond that, Busy."""

    def __init__(self, name: str, running: int, waiting: int) -> None:
        self.name, self.running, self.waiting = name, running, waiting
        self._places = threading.BoundedSemaphore(running + waiting)
        self._run = threading.BoundedSemaphore(running)

    @contextmanager
    def slot(self) -> Iterator[None]:
        """A place in the queue for one computation (raises Busy when there is none)."""
        self._enter()
        try:
            with self._run:
                yield
        finally:
            self._places.release()

    @asynccontextmanager
    async def wanted_slot(self, gone: Callable[[], Awaitable[bool]]) -> AsyncIterator[None]:
        """``slot`` for an async endpoint: while in line it checks ``gone()`` (the client disconnected) every
        ``POLL_S`` and raises Gone, giving its place back, instead of running work nobody will read."""
        self._enter()
        try:
            while not self._run.acquire(blocking=False):
                if await gone():
                    raise Gone()
                await asyncio.sleep(POLL_S)
            try:
                if await gone():  # left while in line, between two looks
                    raise Gone()
                yield
            finally:
                self._run.release()
        finally:
            self._places.release()

    def _enter(self) -> None:
        """Take a place in line, or Busy at once."""
        if not self._places.acquire(blocking=False):
            raise Busy(f"busy: {self.running} {self.name} computation(s) running and {self.waiting} waiting, the most "
                       "this server takes; try again in a few seconds")


def stop_if(stopped: Callable[[], bool] | None) -> None:
    """Raise Gone when ``stopped()`` is true: work calls it between its stages (a thread cannot be stopped from
    outside, so a stage already begun runs to its end)."""
    if stopped is not None and stopped():
        raise Gone()


async def run_while_wanted(gone: Callable[[], Awaitable[bool]], work: Callable[[Callable[[], bool]], Any]) -> Any:
    """``work(stopped)`` in a worker thread, ``stopped()`` turning true once ``gone()`` does (looked at every 0.2 s):
    work that checks it between its stages (raising Gone) stops when its client has left."""
    from starlette.concurrency import run_in_threadpool

    left = threading.Event()

    async def watch() -> None:
        while not await gone():
            await asyncio.sleep(0.2)
        left.set()

    watcher = asyncio.create_task(watch())
    try:
        return await run_in_threadpool(work, left.is_set)
    finally:
        watcher.cancel()


def check_request(headers: Any, scheme: str, token: str | None) -> None:
    """Refused unless the request is JSON from this app's own page (and carries the token when one is set)."""
    length = headers.get("content-length")
    if length is None or not length.strip().isdigit():
        raise Refused(411, "a request that starts work states its body's length (Content-Length)")
    if int(length) > MAX_BODY_BYTES:
        raise Refused(413, f"request body of {int(length):,} B refused: at most {MAX_BODY_BYTES:,} B")
    ctype = (headers.get("content-type") or "").split(";")[0].strip().lower()
    if ctype != "application/json":
        raise Refused(415, "work is started only by a JSON POST from the kvledger page "
                           "(Content-Type: application/json)")
    site = headers.get("sec-fetch-site")
    if site is not None and site not in ("same-origin", "none"):
        raise Refused(403, f"cross-origin request refused (Sec-Fetch-Site: {site}); use the kvledger page itself")
    origin, host = headers.get("origin"), headers.get("host")
    if origin is not None and origin != f"{scheme}://{host}":
        raise Refused(403, f"cross-origin request refused (Origin {origin} is not this server, {scheme}://{host})")
    if token is not None and not hmac.compare_digest(headers.get("x-kvledger-token") or "", token):
        raise Refused(403, "this server needs its token (printed by `kvledger ui` at start-up): open the URL it "
                           "printed")


class PostGuard:
    """ASGI middleware: every POST passes ``check_request`` before its body is read, or is answered with the refusal
    in JSON. Plain ASGI (not Starlette's BaseHTTPMiddleware, under which ``request.is_disconnected()`` never turns
    true) so that the endpoints see their client leave."""

    def __init__(self, app: Any, token: str | None) -> None:
        self.app, self.token = app, token

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "http" and scope["method"] == "POST":
            from starlette.datastructures import Headers
            from starlette.responses import JSONResponse

            try:
                check_request(Headers(scope=scope), scope.get("scheme", "http"), self.token)
            except Refused as err:
                await JSONResponse({"error": str(err), "refused": True}, status_code=err.status)(scope, receive, send)
                return
        await self.app(scope, receive, send)


def host_name(header: str | None) -> str:
    """The host of a ``Host`` header, lower case, without its port or an IPv6 literal's brackets ("[::1]:8765" →
    "::1", "LocalHost:80" → "localhost"); "" when absent."""
    h = (header or "").strip().lower()
    if h.startswith("["):
        return h[1:h.find("]")] if "]" in h else ""
    return h.rsplit(":", 1)[0] if h.count(":") == 1 else h


class HostGuard:
    """ASGI middleware on a loopback server without a token: a request whose ``Host`` does not name this machine
    (``LOOPBACK_HOSTS``) is answered 400 in JSON (module docstring: DNS rebinding)."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] in ("http", "websocket"):
            from starlette.datastructures import Headers
            from starlette.responses import JSONResponse

            host = Headers(scope=scope).get("host")
            if host_name(host) not in LOOPBACK_HOSTS:
                await JSONResponse({"error": f"Host {host!r} is not this machine: the app serves only 127.0.0.1, "
                                             "localhost and ::1 (a page on another site re-pointed at this machine "
                                             "is refused)", "refused": True}, status_code=400)(scope, receive, send)
                return
        await self.app(scope, receive, send)
