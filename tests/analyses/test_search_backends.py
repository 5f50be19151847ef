"""The same search in process, in a process pool and on a local Ray cluster gives the same ledger byte for byte; resume
redoes only what is missing; a worker failure stays with its candidate."""

from __future__ import annotations

import json

import pytest

from kvledger.analyses.search import Axes, SearchSpec, read_ledger, run_search
from kvledger.analyses.search.backends import pool_backend, ray_backend
from kvledger.analyses.search.screen import screen_candidate
from kvledger.analyses.search.spec import Candidate
from kvledger.errors import InputError

# Four candidates: Llama-3.2-3B on an L4 and an A10 at TP 1 and 2 (its 8 KV heads divide both), all feasible at 8K.
SPEC = SearchSpec(model="meta-llama/Llama-3.2-3B", slo="ttft=2s,tpot=100ms", num_requests=60, max_model_len=8192,
                  utilization=0.5, rate_req_per_s=12.0)
AXES = Axes(gpus=("L4", "A10"), tps=(1, 2))


@pytest.fixture(scope="module")
def serial_ledger(tmp_path_factory):
    path = tmp_path_factory.mktemp("search") / "serial.jsonl"
    res = run_search(SPEC, AXES, ledger=path, backend="serial")
    return path, res


@pytest.fixture(scope="module")
def local_ray():
    ray = pytest.importorskip("ray")
    ray.init(num_cpus=2, include_dashboard=False, logging_level="WARNING", log_to_driver=False)
    yield ray
    ray.shutdown()


def test_pool_with_two_workers_gives_the_same_ledger(serial_ledger, tmp_path):
    path, res = serial_ledger
    # every priced candidate fits and meets the loose SLO: L4 TP 1 and 2 (RunPod's pods rent 2 GPUs) and A10 TP 1;
    # A10 TP 2 has no row that holds it (Lambda's gpu_1x_a10 is a one-GPU VM): rejected "no instance holds the TP group"
    assert res.ranking == ["nvidia_l4:tp1:kv-auto", "nvidia_l4:tp2:kv-auto", "nvidia_a10:tp1:kv-auto"]
    pooled = tmp_path / "pool.jsonl"
    res2 = run_search(SPEC, AXES, ledger=pooled, workers=2, backend="pool")
    assert pooled.read_bytes() == path.read_bytes()
    assert res2.ranking == res.ranking and res2.frontier == res.frontier


def test_local_ray_cluster_gives_the_same_ledger(serial_ledger, local_ray, tmp_path):
    path, res = serial_ledger
    on_ray = tmp_path / "ray.jsonl"
    res3 = run_search(SPEC, AXES, ledger=on_ray, workers=2, backend="ray")
    assert local_ray.is_initialized()  # an existing cluster is used, not shut down
    assert on_ray.read_bytes() == path.read_bytes()
    assert res3.to_dict() == res.to_dict()


def test_resume_redoes_only_missing_candidates(serial_ledger, tmp_path):
    path, res = serial_ledger
    lines = path.read_text(encoding="utf-8").splitlines(keepends=True)
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(lines[:3]) + lines[3][: len(lines[3]) // 2], encoding="utf-8")  # 2 entries + a torn line
    seen = []
    res2 = run_search(SPEC, AXES, ledger=cut, resume=True, backend="serial", progress=lambda e,
                      *_: seen.append(e["id"]))
    assert sorted(seen) == sorted(e["id"] for e in res.entries[2:])  # simulated best-bound first (search.prune)
    assert cut.read_bytes() == path.read_bytes() and res2.ranking == res.ranking
    _, entries = read_ledger(cut)
    assert list(entries) == [e["id"] for e in res.entries]


def test_resume_refuses_the_ledger_of_another_search(serial_ledger, tmp_path):
    path, _ = serial_ledger
    other = tmp_path / "other.jsonl"
    other.write_bytes(path.read_bytes())
    with pytest.raises(InputError, match="ledger of another search"):
        run_search(SearchSpec(**{**SPEC.to_dict(), "synthetic": None, "seed": 1}), AXES, ledger=other, resume=True)


def _todo():
    good = screen_candidate(SPEC, Candidate("nvidia_l4", 1))
    broken = {k: v for k, v in screen_candidate(SPEC, Candidate("nvidia_a10", 1)).items() if k != "plan"}
    return good, broken


def test_worker_failure_is_kept_per_candidate_on_ray(local_ray):
    good, broken = _todo()
    out = {e["id"]: e for e in ray_backend(SPEC, iter([[good, broken]]), 2, None)}
    assert out[good["id"]]["status"] == "feasible"
    assert out[broken["id"]]["reason"] == "worker failed" and "plan" in out[broken["id"]]["detail"]


def _die(spec, entry):
    """Stands in for a worker whose process is killed (os._exit skips every handler, as the OOM killer would)."""
    import os

    os._exit(1)


def test_pool_failures_stay_with_their_candidates(monkeypatch):
    """One task raises (its entry lacks the plan: KeyError) and one kills its process, which breaks the whole pool;
    the candidates taken down with it are rerun one per process and come back, the two failures are recorded; the
    pool outlives a batch (the second batch runs in the pool the first one used)."""
    import kvledger.analyses.search.backends as backends

    good, broken = _todo()
    dying = {**screen_candidate(SPEC, Candidate("nvidia_l4", 2)), "id": "dies"}
    monkeypatch.setattr(backends, "evaluate_candidate", _Dispatch("dies", backends.evaluate_candidate))
    out = {e["id"]: e for e in pool_backend(SPEC, iter([[good], [broken, dying]]), 2, None)}
    assert out[good["id"]]["status"] == "feasible"
    assert out[broken["id"]]["reason"] == "worker failed" and "KeyError" in out[broken["id"]]["detail"]
    assert out["dies"]["reason"] == "worker failed" and "BrokenProcessPool" in out["dies"]["detail"]


class _Dispatch:
    """Picklable stand-in for evaluate_candidate: dies for one candidate id, evaluates the others."""

    def __init__(self, dead_id, real):
        self.dead_id, self.real = dead_id, real

    def __call__(self, spec, entry):
        if entry["id"] == self.dead_id:
            _die(spec, entry)
        return self.real(spec, entry)


def test_default_workers_one_per_core_only_for_a_search_worth_a_pool(monkeypatch):
    """Without --workers: one process per usable core, never more than candidates to simulate, and in process below
    POOL_MIN_CANDIDATES (8) candidates — a pool's start-up would cost more than it saves."""
    from kvledger.analyses.search import runner

    monkeypatch.setattr(runner, "usable_cores", lambda: 2)
    assert [runner.default_workers(n) for n in (1, 7, 8, 64)] == [1, 1, 2, 2]
    monkeypatch.setattr(runner, "usable_cores", lambda: 16)
    assert [runner.default_workers(n) for n in (7, 8, 10, 64)] == [1, 8, 10, 16]


def test_default_workers_small_search_runs_in_process(serial_ledger, tmp_path, monkeypatch):
    """workers=None (the CLI's default) on a search of fewer than 8 candidates to simulate never starts a pool, and its
    ledger is the serial one byte for byte."""
    from kvledger.analyses.search import runner

    def no_pool(*_a, **_k):
        raise AssertionError("a pool was started for a small search")

    monkeypatch.setattr(runner, "pool_backend", no_pool)
    path, _ = serial_ledger
    out = tmp_path / "default.jsonl"
    run_search(SPEC, AXES, ledger=out, workers=None)
    assert out.read_bytes() == path.read_bytes()


@pytest.mark.parametrize(("body", "words"), [
    ('[1, 2]\n', "line 2"),  # valid JSON, not an entry object
    ('{"status": "feasible"}\n', "line 2"),  # an object without its id
])
def test_a_ledger_line_that_is_not_an_entry_is_named(tmp_path, body, words):
    from kvledger.analyses.search.ledger_file import LEDGER_FORMAT
    from kvledger.errors import FormatError

    path = tmp_path / "ledger.jsonl"
    path.write_text(json.dumps({"format": LEDGER_FORMAT}) + "\n" + body + '{"id": "x"}\n', encoding="utf-8")
    with pytest.raises(FormatError, match="not an object with a string 'id'") as err:
        read_ledger(path)
    assert words in str(err.value)


def test_a_binary_file_is_not_a_ledger(tmp_path):
    from kvledger.errors import FormatError

    path = tmp_path / "ledger.jsonl"
    path.write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(FormatError, match="not UTF-8"):
        read_ledger(path)


def test_a_synthetic_ledger_written_with_the_unused_trace_still_resumes(tmp_path):
    # before SearchSpec.to_dict left the unused trace out of a synthetic search, its header said "azure-conv": the same
    # search all the same (the synthetic spec is what every probe ran); another synthetic spec is another search
    from kvledger.analyses.search.ledger_file import ledger_header, ledger_line, resumable_entries
    from kvledger.analyses.serving.sim_ledgers import SyntheticSpec

    spec = SearchSpec(model="meta-llama/Llama-3.2-3B", slo="ttft=2s", utilization=0.5,
                      synthetic=SyntheticSpec("fixed:512", "fixed:128"))
    header = ledger_header(spec, [])
    assert "trace" not in header["spec"]
    old = {**header, "spec": {**header["spec"], "trace": "azure-conv"}}
    path = tmp_path / "old.jsonl"
    path.write_text(ledger_line(old))
    assert resumable_entries(path, header) == {}
    other = ledger_header(SearchSpec(model="meta-llama/Llama-3.2-3B", slo="ttft=2s", utilization=0.5,
                                     synthetic=SyntheticSpec("fixed:512", "fixed:256")), [])
    with pytest.raises(InputError, match="ledger of another search"):
        resumable_entries(path, other)
