"""What the web app asks of a request before it does work: POST with JSON from its own page, the token when it is
exposed beyond this machine, and a free place in a bounded work queue.

A browser lets any page it shows send a POST to ``127.0.0.1`` (a "simple" cross-site form post) or load a GET; a
request that starts a simulation must therefore come from the app's own page. The checks, each answered in JSON: the
body is ``application/json`` (a cross-site form cannot send that without a CORS preflight, which this app never
grants: 415 otherwise); the ``Origin`` header, when the browser sends one, names this server and
``Sec-Fetch-Site`` is ``same-origin`` or ``none`` (403 otherwise); with a token (``kvledger ui --host`` other than
loopback) the ``X-Kvledger-Token`` header equals it (403). Work runs in a bounded queue: ``running`` at once and
``waiting`` more; a request beyond that is answered 503 with ``{"busy": true}`` and a ``Retry-After`` at once
instead of waiting behind others.
"""

from __future__ import annotations

import hmac
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

__all__ = ["Busy", "Refused", "WorkQueue", "check_request", "LOOPBACK"]

LOOPBACK = ("127.0.0.1", "::1", "localhost")


class Busy(Exception):
    """The work queue is full: answer 503 at once."""


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
        if not self._places.acquire(blocking=False):
            raise Busy(f"busy: {self.running} {self.name} computation(s) running and {self.waiting} waiting, the most "
                       "this server takes; try again in a few seconds")
        try:
            with self._run:
                yield
        finally:
            self._places.release()


def check_request(headers: Any, scheme: str, token: str | None) -> None:
    """Refused unless the request is JSON from this app's own page (and carries the token when one is set)."""
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
