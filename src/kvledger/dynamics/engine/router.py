"""Routing requests across replicas: round robin, least loaded, and prefix-aware, as small policies in a dict.

* ``round_robin``: the i-th request goes to replica ``i mod K`` (Vidur's, llm-d's default).
* ``least_loaded``: the replica with the fewest outstanding (waiting + running) requests,
  lowest index on ties (Vidur "least outstanding requests").
* ``prefix_aware``: sgl-router's cache-aware policy (``sgl-router/src/policies/cache_aware.rs :
  CacheAwarePolicy::select_worker``). If the load is imbalanced (max − min outstanding > 32
  and max > 1.0001 × min) go to the least loaded replica. Otherwise match the prompt against
  the router's own approximate tree of what it has routed where (not the replicas' caches,
  which it never sees): if the longest match covers more than 50 % of the prompt
  (``match_rate > cache_threshold``, strict) go to the replica that tree names, else to the
  replica whose tree is smallest (``get_smallest_tenant``: the least routed text), lowest
  index on ties. Every routed prompt is inserted for its replica. The tree is kept in
  tokens of shared segments plus each prompt's unique tail (the router's is in characters),
  and never evicted (the router prunes it every 120 s above 2^26 nodes).
* ``session_affinity``: sticky sessions (llm-d / gateway session affinity by a session header): the first request
  of a client (``RequestSpec.client_id``: a session's id) goes to the least loaded replica, every later one to the
  same replica, so a conversation's prefix stays in one replica's cache; requests without a client id go to the
  least loaded replica.
"""

from __future__ import annotations

from collections.abc import Callable

from kvledger.dynamics.engine.request_state import SimRequest
from kvledger.errors import UnknownNameError

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


class _ApproxTree:
    """The router's per-replica record of routed prompts: shared-segment paths and each replica's tree size, tokens."""

    def __init__(self) -> None:
        self.owners: dict[tuple, dict[int, int]] = {}  # segment path → {replica: last insert tick}
        self.size: dict[int, int] = {}  # replica → tokens its tree holds
        self.tick = 0

    def match(self, spec) -> tuple[int, int | None]:
        """(matched tokens, replica holding the deepest matched node: the most recent, lowest index on ties)."""
        segs, best, owner = spec.prefix_segments, 0, None
        depth = spec.num_shareable_tokens // spec.segment_tokens if segs else 0
        for d in range(1, depth + 1):
            holders = self.owners.get(segs[:d])
            if not holders:
                break
            best = d * spec.segment_tokens
            owner = min(holders, key=lambda i: (-holders[i], i))
        return best, owner

    def insert(self, spec, replica: int) -> None:
        self.tick += 1
        segs = spec.prefix_segments
        depth = spec.num_shareable_tokens // spec.segment_tokens if segs else 0
        added = spec.num_prompt_tokens - depth * spec.segment_tokens  # the unique tail is a branch of its own
        for d in range(1, depth + 1):
            holders = self.owners.setdefault(segs[:d], {})
            if replica not in holders:
                added += spec.segment_tokens
            holders[replica] = self.tick
        self.size[replica] = self.size.get(replica, 0) + added


def _prefix_aware() -> Router:
    tree = _ApproxTree()

    def route(replicas: list, req: SimRequest) -> int:
        loads = [r.num_outstanding for r in replicas]
        lo, hi = min(loads), max(loads)
        if hi - lo > BALANCE_ABS_THRESHOLD and hi > BALANCE_REL_THRESHOLD * lo:
            pick = loads.index(lo)
        else:
            matched, owner = tree.match(req.spec)
            if owner is not None and matched > CACHE_THRESHOLD * req.num_prompt_tokens:
                pick = owner
            else:
                sizes = [tree.size.get(i, 0) for i in range(len(replicas))]
                pick = sizes.index(min(sizes))
        tree.insert(req.spec, pick)
        return pick

    return route


def _session_affinity() -> Router:
    home: dict[str, int] = {}

    def route(replicas: list, req: SimRequest) -> int:
        cid = req.spec.client_id
        pick = home.get(cid) if cid is not None else None
        if pick is None:
            pick = _least_loaded(replicas, req)
            if cid is not None:
                home[cid] = pick
        return pick

    return route


ROUTERS: dict[str, Callable[[], Router]] = {
    "round_robin": _round_robin,
    "least_loaded": lambda: _least_loaded,
    "prefix_aware": _prefix_aware,
    "session_affinity": _session_affinity,
}


def make_router(name: str) -> Router:
    """A fresh router (routers keep state, e.g. the round-robin counter)."""
    if name not in ROUTERS:
        raise UnknownNameError("router", name, ROUTERS, hint=f"Known: {', '.join(ROUTERS)}.")
    return ROUTERS[name]()
