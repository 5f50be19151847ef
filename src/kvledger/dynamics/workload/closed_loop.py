"""Closed-loop load: N concurrent users, each sending its next request when the previous one finishes, as benchmark
clients with a concurrency limit do; paced, no request before its own arrival time, as a client with both a request
rate and a cap does."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kvledger.dynamics.engine.request import RequestSpec
from kvledger.errors import InputError

__all__ = ["ClosedLoop"]


@dataclass(frozen=True)
class ClosedLoop:
    """``num_users`` users working through ``requests`` in order.

    Like ``vllm bench serve --max-concurrency N`` (or aiperf / genai-perf "concurrency"
    mode): at ``start_s`` each user sends one request; whenever a request finishes (or is
    rejected), its user waits ``think_time_s`` and sends the next unsent request of the
    list. A request's ``arrival_s`` is replaced by the time it is sent.

    Paced (``paced``): a client with both a request rate and a cap on requests in flight — ``vllm bench serve
    --request-rate R --max-concurrency N`` (``benchmarks/serve.py``: each request's task is created at its arrival time
    and waits on an ``asyncio.Semaphore(N)`` before sending; the semaphore wakes its waiters first in, first out),
    inference-perf's workers (``load.worker_max_concurrency``) — sends each request at the later of its own
    ``arrival_s`` and the moment one of the N slots frees, in arrival order; the latencies are timed from that send.
    ``requests`` must then be in arrival order.

    Attributes:
        requests: the request shapes to send, in order (their ``arrival_s`` is ignored).
        num_users: concurrent users, count (≥ 1).
        think_time_s: pause between a finish and the user's next request, s (≥ 0).
        start_s: when the users start, s.
        paced: never send a request before its own ``arrival_s`` (above).
    """

    requests: Sequence[RequestSpec]
    num_users: int
    think_time_s: float = 0.0
    start_s: float = 0.0
    paced: bool = False

    def __post_init__(self) -> None:
        if isinstance(self.num_users, bool) or not isinstance(self.num_users, int) or self.num_users < 1:
            raise InputError(f"closed loop: num_users must be an integer ≥ 1, got {self.num_users!r}")
        if not (self.think_time_s >= 0.0) or self.think_time_s == float("inf"):
            raise InputError(f"closed loop: think_time_s must be a finite number ≥ 0, got {self.think_time_s!r}")
        if not (self.start_s >= 0.0) or self.start_s == float("inf"):
            raise InputError(f"closed loop: start_s must be a finite number ≥ 0, got {self.start_s!r}")
        if self.paced and any(a.arrival_s > b.arrival_s for a, b in zip(self.requests, self.requests[1:])):
            raise InputError("closed loop: a paced loop's requests must be in arrival order")
