"""A Ray node dying mid-search: each candidate it takes down is recorded as failed with Ray's error type and message,
said on stderr in one line as it fails (tests/cli/test_search_ray_node_death_cli.py), and the search ends with status
1 after its output.

A node death cannot be caused on demand in a test (killing a local raylet ends the run in several ways), so the
failures here are synthetic: an exception of Ray's class name and message, and a stand-in ``ray`` module whose wait
fails as a dead cluster's does."""

from __future__ import annotations

import sys
import types

from kvledger.analyses.search import backends
from kvledger.report.search_answer import failure_line, failures_line

# Ray 2.60's message for a task whose node died (ray.exceptions.NodeDiedError), as a killed local raylet gave it
NODE_DIED = ("Task failed because the node it was running on is dead or unavailable. Node IP: 127.0.0.1, node ID: "
             "77f7. This can happen if the node was preempted, had a hardware failure, or its raylet crashed "
             "unexpectedly.")


class NodeDiedError(Exception):
    """Stands in for ray.exceptions.NodeDiedError: its class name and message are what the report reads."""


def test_a_node_death_is_one_line_naming_the_candidate_the_error_type_and_its_message():
    e = backends.failed_entry({"id": "nvidia_h100_sxm:tp1:kv-auto", "status": "planned"}, NodeDiedError(NODE_DIED))
    assert (e["status"], e["reason"]) == ("error", "worker failed")
    assert e["detail"] == f"NodeDiedError: {NODE_DIED}"
    assert failure_line(e) == f"error: nvidia_h100_sxm:tp1:kv-auto could not be evaluated (worker failed): " \
                              f"NodeDiedError: {NODE_DIED}"


def test_a_task_error_keeps_the_last_line_of_rays_traceback():
    # a RayTaskError's message is the worker's traceback; its last line is the task's own exception
    err = type("RayTaskError(KeyError)", (Exception,), {})(
        "ray::evaluate_candidate() (pid=1, ip=127.0.0.1)\n  File \"evaluate.py\", line 9\nKeyError: 'plan'")
    e = backends.failed_entry({"id": "a"}, err)
    assert e["detail"] == "RayTaskError(KeyError): KeyError: 'plan'"
    assert "\n" not in failure_line(e)
    assert failures_line([e, {**e, "id": "b"}]) == (
        "error: 2 candidate(s) could not be evaluated (each said above as it failed: a, b). Run again with --resume "
        "LEDGER to redo only those.")


def _fake_ray(fail_on_wait: int):
    """A ``ray`` module whose tasks return their entry as feasible and whose ``wait`` raises NodeDiedError at the
    ``fail_on_wait``-th call (1-based), as a wait on a cluster whose node died does."""
    exc = types.ModuleType("ray.exceptions")

    class RayError(Exception):
        pass

    exc.RayError = RayError
    exc.NodeDiedError = type("NodeDiedError", (RayError,), {})
    ray = types.ModuleType("ray")
    ray.exceptions = exc
    calls = {"wait": 0, "shutdown": 0}
    ray.calls = calls
    ray.is_initialized = lambda: False
    ray.put = lambda spec: spec

    results = {}

    def submit(spec, e):
        results[e["id"]] = {**e, "status": "feasible"}
        return e["id"]  # the object ref: hashable, as Ray's are

    def remote(**_kw):
        return lambda fn: types.SimpleNamespace(remote=submit)

    def wait(refs, num_returns):
        calls["wait"] += 1
        if calls["wait"] == fail_on_wait:
            raise exc.NodeDiedError(NODE_DIED)
        return refs[:num_returns], refs[num_returns:]

    def shutdown():
        calls["shutdown"] += 1

    ray.remote, ray.wait, ray.get, ray.shutdown = remote, wait, results.__getitem__, shutdown
    return ray, exc


def test_a_cluster_failing_under_a_wait_fails_every_candidate_left_with_its_error(monkeypatch):
    ray, exc = _fake_ray(fail_on_wait=2)
    monkeypatch.setitem(sys.modules, "ray", ray)
    monkeypatch.setitem(sys.modules, "ray.exceptions", exc)
    monkeypatch.setattr(backends, "start_ray", lambda *_a: None)
    batches = iter([[{"id": "a"}, {"id": "b"}], [{"id": "c"}], [{"id": "d"}]])
    out = list(backends.ray_backend(None, batches, 2, None))
    # the first wait returns a; the second raises: b (in flight), c (the second batch, in flight) and d (not yet
    # asked for) fail with Ray's error, in order; the local cluster started is shut down
    assert [(e["id"], e["status"]) for e in out] == [("a", "feasible"), ("b", "error"), ("c", "error"), ("d", "error")]
    assert {e["detail"] for e in out[1:]} == {f"NodeDiedError: {NODE_DIED}"}
    assert ray.calls["shutdown"] == 1
