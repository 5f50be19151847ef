"""Shared by the pipeline-loop tests: a ``PipelineSends`` double (the same send time at every stage boundary) and the
stress check of a pool too small for the load."""

from __future__ import annotations


class Sends:
    """A send of ``d`` s at every boundary (``PipelineSends``' two calls)."""

    def __init__(self, d: float) -> None:
        self.d = d

    def boundary_s(self, tokens: int, b: int) -> float:
        return self.d

    def seconds(self, tokens: int) -> float:
        return self.d


def stress_specs(seed: int) -> list:
    """60 requests, arrivals uniform over 1 s, prompts 1–150 and outputs 1–40 tokens, drawn from ``seed``."""
    import random

    from kvledger.dynamics.engine.request import RequestSpec

    rng = random.Random(seed)
    return [RequestSpec(f"r{i}", rng.uniform(0, 1), rng.randint(1, 150), rng.randint(1, 40)) for i in range(60)]


def assert_every_request_whole(specs, cfg, cost):
    """Run with and without token times: preemptions happened, every request ends with exactly its output tokens at
    non-decreasing times after its arrival, and the exact step-gap counts give the token times' ITL mean. Returns the
    run with token times."""
    import pytest

    from kvledger.dynamics.simulator import simulate

    kept, gaps = simulate(specs, cfg, cost), simulate(specs, cfg, cost, record_token_times=False)
    assert kept.summary.num_preemptions > 0
    for r, s in zip(sorted(kept.records.records, key=lambda r: int(r.request_id[1:])), specs):
        t = list(r.chunk_times_s)
        assert len(t) == s.num_output_tokens and t[0] > s.arrival_s and all(b >= a for a, b in zip(t, t[1:]))
    assert gaps.summary.itl_s.mean == pytest.approx(kept.summary.itl_s.mean, rel=1e-12)
    return kept
