"""Routing requests across replicas: round robin, least loaded, and prefix-aware, as small policies in a dict.

* ``round_robin``: the i-th request goes to replica ``i mod K`` (Vidur's, llm-d's default).
* ``least_loaded``: the replica with the fewest outstanding (waiting + running) requests,
  lowest index on ties (Vidur "least outstanding requests").
* ``prefix_aware``: SGLang router's cache-aware rule (``sgl-router`` cache_aware policy,
  paraphrased): if the load is imbalanced (max − min outstanding > 32 and max > 1.0001 ×
  min) go to the least loaded replica; otherwise go to the replica whose cache holds the
  longest prefix of the prompt if that prefix is ≥ 50 % of it, else to the least loaded.
  The router here reads each replica's real cache (an oracle); a real router keeps an
  approximate tree of what it sent where.
"""

from __future__ import annotations

from collections.abc import Callable

from kvledger.dynamics.request_state import SimRequest

__all__ = ["ROUTERS", "make_router", "BALANCE_ABS_THRESHOLD", "BALANCE_REL_THRESHOLD", "CACHE_THRESHOLD"]

BALANCE_ABS_THRESHOLD = 32  # sgl-router default balance_abs_threshold, requests
BALANCE_REL_THRESHOLD = 1.0001  # sgl-router default balance_rel_threshold
CACHE_THRESHOLD = 0.5  # sgl-router default cache_threshold, fraction of the prompt

Router = Callable[[list, SimRequest], int]


def _least_loaded(replicas: list, req: SimRequest) -> int:
    loads = [r.num_outstanding for r in replicas]
    return loads.index(min(loads))


def _round_robin() -> Router:
    count = [0]

    def route(replicas: list, req: SimRequest) -> int:
        i = count[0] % len(replicas)
        count[0] += 1
        return i

    return route


def _prefix_aware() -> Router:
    def route(replicas: list, req: SimRequest) -> int:
        loads = [r.num_outstanding for r in replicas]
        lo, hi = min(loads), max(loads)
        if hi - lo > BALANCE_ABS_THRESHOLD and hi > BALANCE_REL_THRESHOLD * lo:
            return loads.index(lo)
        matches = [r.kv.match_tokens(req) if r.kv.enable_caching else 0 for r in replicas]
        best = max(matches)
        if best > 0 and best >= CACHE_THRESHOLD * req.num_prompt_tokens:
            cands = [i for i, m in enumerate(matches) if m == best]
            return min(cands, key=lambda i: (loads[i], i))
        return loads.index(lo)

    return route


ROUTERS: dict[str, Callable[[], Router]] = {
    "round_robin": _round_robin,
    "least_loaded": lambda: _least_loaded,
    "prefix_aware": _prefix_aware,
}


def make_router(name: str) -> Router:
    """A fresh router (routers keep state, e.g. the round-robin counter)."""
    from kvledger.errors import UnknownNameError

    if name not in ROUTERS:
        raise UnknownNameError("router", name, ROUTERS, hint=f"Known: {', '.join(ROUTERS)}.")
    return ROUTERS[name]()
