"""The on-disk store of simulations and report HTML (sim_cache.py, report/html_store.py): an identical request is
served from it with identical results; any changed input, a corrupt entry or KVLEDGER_NO_CACHE runs it again."""

from __future__ import annotations

import pytest

from kvledger.analyses.serving import sim_cache
from kvledger.analyses.serving import sim_ledgers as sl
from kvledger.analyses.serving.sim_setup import SimRequestArgs

ARGS = SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="H100", trace="azure-conv", num_requests=40, rate=4.0)


@pytest.fixture
def store(tmp_path, monkeypatch):
    monkeypatch.delenv("KVLEDGER_NO_CACHE", raising=False)
    monkeypatch.setenv("KVLEDGER_CACHE_DIR", str(tmp_path))
    return tmp_path / "sims"


def _summary(sim):
    return sim.result.summary.to_dict()


def test_an_identical_request_is_read_back_with_the_same_records(store):
    before = sim_cache.stats()
    a = sl.simulate_run(ARGS)
    b = sl.simulate_run(ARGS)
    after = sim_cache.stats()
    assert (after["run"] - before["run"], after["reused"] - before["reused"]) == (1, 1)
    assert len(list(store.glob("*.pickle"))) == 1
    assert b is not a and _summary(b) == _summary(a)
    assert [r.finish_s for r in b.run.records] == [r.finish_s for r in a.run.records]


def test_a_changed_input_file_or_setting_gets_its_own_entry(store, tmp_path):
    trace = tmp_path / "t.csv"
    trace.write_text("arrival_s,num_prompt_tokens,num_output_tokens\n0.0,100,10\n0.5,200,20\n")
    args = SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="H100", trace=str(trace))
    k1 = sim_cache.cache_key(args, None, False, True, None)
    trace.write_text("arrival_s,num_prompt_tokens,num_output_tokens\n0.0,100,10\n0.5,200,21\n")  # same name, new bytes
    k2 = sim_cache.cache_key(args, None, False, True, None)
    k3 = sim_cache.cache_key(args, None, False, False, None)  # without token times
    k4 = sim_cache.cache_key(SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="H100", trace=str(trace), seed=1),
                             None, False, True, None)
    assert len({k1, k2, k3, k4}) == 4


def test_a_hub_model_is_not_stored(store):
    args = SimRequestArgs(model="someone/not-bundled-model", gpu="H100")
    assert sim_cache.cache_key(args, None, False, True, None) is None


def test_a_corrupt_entry_is_run_again_and_no_cache_writes_nothing(store, monkeypatch):
    sl.simulate_run(ARGS)
    (entry,) = store.glob("*.pickle")
    entry.write_bytes(b"not a pickle")
    before = sim_cache.stats()
    sim = sl.simulate_run(ARGS)
    assert sim_cache.stats()["run"] == before["run"] + 1 and sim.result.summary.num_finished == 40
    assert entry.read_bytes() != b"not a pickle"  # written again, whole
    monkeypatch.setenv("KVLEDGER_NO_CACHE", "1")
    sl.simulate_run(SimRequestArgs(**{**ARGS.__dict__, "seed": 7}))
    assert len(list(store.glob("*.pickle"))) == 1


def test_the_report_html_is_drawn_once_for_the_same_data(store, monkeypatch):
    from kvledger.analyses.serving.report_data import ReportData
    from kvledger.report import html_report, html_store

    def fake(x):
        return ReportData(inputs={"x": x}, plan={}, cost={}, curves={}, measured=[], commands={})

    data_calls = []
    monkeypatch.setattr(html_report, "report_figures", lambda data: data_calls.append(data) or [])
    monkeypatch.setattr(html_report, "render_html", lambda data, figs: f"<html>{data.inputs['x']}</html>")
    assert html_store.report_html(fake(1.5)) == "<html>1.5</html>"
    assert html_store.report_html(ReportData.from_dict(fake(1.5).to_dict())) == "<html>1.5</html>"
    assert len(data_calls) == 1  # the second (the same data, read back from its JSON) came from the store
    assert html_store.report_html(fake(2.5)) == "<html>2.5</html>" and len(data_calls) == 2


def _five_entries(store, size: int) -> None:
    """Entries e0..e4 of ``size`` bytes written at mtimes 1..5 s."""
    import os

    store.mkdir(parents=True)
    for i in range(5):
        f = store / f"e{i}.pickle"
        f.write_bytes(b"x" * size)
        os.utime(f, ns=(i * 10**9 + 10**9, i * 10**9 + 10**9))


def test_the_store_keeps_its_newest_entries(store, monkeypatch):
    # a limit of 4 entries: 5 stored + the new one = 6 > 4, so the oldest go until three quarters of the limit (3)
    # are left, the new one counted: e0, e1, e2 removed
    _five_entries(store, 1)
    monkeypatch.setattr(sim_cache, "MAX_ENTRIES", 4)
    monkeypatch.setattr(sim_cache, "_SIZE", {})
    sim_cache.store_bytes("sims", "new.pickle", b"y")
    assert sorted(p.name for p in store.iterdir()) == ["e3.pickle", "e4.pickle", "new.pickle"]


def test_the_store_keeps_under_its_byte_budget(store, monkeypatch):
    # 5 × 30 B stored + 10 B new = 160 B > a 100 B budget: the oldest go until at most 75 B are left
    # (160 → 130 → 100 → 70: e0, e1, e2 removed). The next 10 B write counts 70 + 10 = 80 ≤ 100 and removes nothing.
    _five_entries(store, 30)
    monkeypatch.setattr(sim_cache, "MAX_BYTES", 100)
    monkeypatch.setattr(sim_cache, "_SIZE", {})
    sim_cache.store_bytes("sims", "new.pickle", b"y" * 10)
    assert sorted(p.name for p in store.iterdir()) == ["e3.pickle", "e4.pickle", "new.pickle"]
    sim_cache.store_bytes("sims", "new2.pickle", b"z" * 10)
    assert sorted(p.name for p in store.iterdir()) == ["e3.pickle", "e4.pickle", "new.pickle", "new2.pickle"]
