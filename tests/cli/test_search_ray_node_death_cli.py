"""``search`` whose Ray node dies under one candidate: that candidate is said on stderr in one line as it fails
(Ray's error type and message), the output is still one JSON document with it as failed, and the exit status is 1. The
failure is synthetic (tests/analyses/test_search_ray_node_death.py says why): a backend that fails the H100's task
with NodeDiedError's message."""

from __future__ import annotations

import json

from cli_run import run_cli

from kvledger.analyses.search import backends

NODE_DIED = ("Task failed because the node it was running on is dead or unavailable. Node IP: 127.0.0.1, node ID: "
             "77f7. This can happen if the node was preempted, had a hardware failure, or its raylet crashed "
             "unexpectedly.")


class NodeDiedError(Exception):
    """Stands in for ray.exceptions.NodeDiedError: its class name and message are what the report reads."""


def test_the_cli_says_each_failure_as_it_happens_and_exits_1(monkeypatch):
    from kvledger.analyses.search import runner

    real = runner.serial_backend

    def node_dies_under_h100(spec, batches, workers, address):
        for batch in batches:
            for e in batch:
                yield backends.failed_entry(e, NodeDiedError(NODE_DIED)) if "h100" in e["id"] else \
                    real(spec, iter([[e]]), workers, address).__next__()

    monkeypatch.setattr(runner, "serial_backend", node_dies_under_h100)
    res = run_cli("search", "meta-llama/Llama-3.2-3B", "--slo", "ttft=2s,tpot=100ms", "--gpus", "L4,H100", "--tp", "1",
                  "--max-model-len", "8K", "--num-requests", "60", "--utilization", "0.5", "--backend", "serial",
                  "--json")
    assert res.exit_code == 1
    d = json.loads(res.stdout)  # the output is still one JSON document, the failed candidate in it
    assert [(e["id"], e["status"]) for e in d["candidates"]] == [("nvidia_l4:tp1:kv-auto", "feasible"),
                                                                 ("nvidia_h100_sxm:tp1:kv-auto", "error")]
    assert res.stderr.splitlines() == [
        "search: 2 of 2 candidates to simulate; each a capacity search: one simulation of 60 requests per probed rate "
        "(doubling to a bracket, then bisecting to 1 %), then 3 operating points at 25/50/75 % of the capacity found",
        f"error: nvidia_h100_sxm:tp1:kv-auto could not be evaluated (worker failed): NodeDiedError: {NODE_DIED}",
        "error: 1 candidate(s) could not be evaluated (each said above as it failed: nvidia_h100_sxm:tp1:kv-auto). "
        "Run again with --resume LEDGER to redo only those."]
