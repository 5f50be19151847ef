"""The columnar fast path for large vLLM --save-detailed files gives the per-request reader's records, field for field,
and steps aside (to the reader that names the index at fault) on anything unclean."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from kvledger.errors import FormatError
from kvledger.evidence import read_runs, vllm_bench, vllm_fast
from kvledger.evidence._io import load_document
from kvledger.ledgers.goodput import goodput
from kvledger.ledgers.slo import parse_slo

# five requests, by hand: 0 ok (3 chunks), 1 failed with an error text and a latency, 2 non-streaming (ttft 0, no
# gaps: TTFT unknown), 3 ok with integer values, 4 ok with one chunk (no gaps)
BASE = {"backend": "vllm", "model_id": "meta-llama/Llama-3.1-8B", "request_rate": "inf", "duration": 4.0,
        "completed": 4,
        "failed": 1, "request_throughput": 1.0, "max_concurrency": None, "request_goodput": None,
        "input_lens": [100, 200, 300, 400, 500], "output_lens": [3, 0, 7, 2, 1],
        "ttfts": [0.25, 0.0, 0.0, 1, 0.5], "itls": [[0.02, 0.03], [], [], [1], []],
        "latencies": [0.3, 2.0, 0.9, 2, 0.5], "start_times": [1000.5, 1000.0, 1001.0, 1002.25, 1003.0],
        "generated_texts": ["a", "", "b", "c", "d"], "errors": ["", "Internal Server Error", "", None, ""]}


def _write(tmp_path, obj, name="run.json"):
    p = tmp_path / name
    p.write_text(json.dumps(obj))
    return p


def _same(fast, slow):
    assert len(fast.records) == len(slow.records)
    for a, b in zip(fast.records, slow.records):
        for f in ("request_id", "num_prompt_tokens", "num_output_tokens", "error"):
            assert getattr(a, f) == getattr(b, f), f
        for f in ("arrival_s", "first_token_s", "finish_s"):
            x, y = getattr(a, f), getattr(b, f)
            assert x == y, (f, x, y)  # bit for bit: the same float operations in the same order
        assert (a.chunk_times_s is None) == (b.chunk_times_s is None)
        if a.chunk_times_s is not None:
            assert np.array_equal(a.chunk_times_s, b.chunk_times_s)
    assert fast.metadata.to_dict() == slow.metadata.to_dict()


@pytest.fixture
def fast_always(monkeypatch):
    monkeypatch.setattr(vllm_fast, "FAST_MIN_BYTES", 0)


@pytest.mark.parametrize("drop", [(), ("errors",), ("latencies",), ("start_times",), ("errors", "latencies",
                                                                                      "start_times")])
def test_fast_path_equals_the_per_request_reader(tmp_path, fast_always, drop):
    obj = {k: v for k, v in BASE.items() if k not in drop}
    p = _write(tmp_path, obj)
    fast = vllm_fast.read_fast(p)
    assert fast is not None and fast[0].columns is not None
    slow = vllm_bench.read(load_document(p))
    _same(fast[0], slow[0])
    r = fast[0].records
    # request 0: arrival 1000.5 − 1000.0 = 0.5; chunks at 0.5 + 0.25 = 0.75, + 0.02, + 0.03 (with start_times)
    if "start_times" not in drop:
        np.testing.assert_allclose(r[0].chunk_times_s, [0.75, 0.77, 0.80])
    if "errors" not in drop:
        assert r[1].error == "Internal Server Error" and r[2].first_token_s is None and r[3].error is None
    for slo in ("ttft=300ms,e2e=2s", "itl=25ms", "tpot=40ms"):
        assert goodput(fast[0], parse_slo(slo)).to_dict() == goodput(slow[0], parse_slo(slo)).to_dict()


@pytest.mark.parametrize("edit, field", [
    (lambda o: o["ttfts"].__setitem__(3, -1.0), "ttfts[3]"),
    (lambda o: o["itls"][0].__setitem__(1, float("nan")), "itls[0][1]"),
    (lambda o: o["latencies"].__setitem__(0, 0.1), "latencies[0]"),
    (lambda o: o["output_lens"].__setitem__(2, 2.5), "output_lens[2]"),
    (lambda o: o["output_lens"].pop(), "output_lens"),
    (lambda o: o["input_lens"].__setitem__(0, None), "input_lens[0]"),
])
def test_an_unclean_file_goes_to_the_reader_that_names_the_field(tmp_path, fast_always, edit, field):
    obj = json.loads(json.dumps(BASE))
    edit(obj)
    p = _write(tmp_path, obj)
    assert vllm_fast.read_fast(p) is None
    with pytest.raises(FormatError, match=field.replace("[", r"\[").replace("]", r"\]")):
        read_runs(p)


_num = st.floats(0, 50, allow_nan=False, width=32)


@st.composite
def _runs(draw):
    n = draw(st.integers(1, 12))
    ok = draw(st.lists(st.booleans(), min_size=n, max_size=n))
    itls = [draw(st.lists(_num, max_size=5)) if o else [] for o in ok]
    ttft = [draw(st.one_of(st.just(0.0), _num)) for _ in range(n)]
    lat = [t + sum(g) + draw(_num) for t, g in zip(ttft, itls)]
    return {"backend": "vllm", "duration": draw(st.floats(0.1, 100)), "completed": n, "request_throughput": 1.0,
            "input_lens": draw(st.lists(st.integers(0, 10_000), min_size=n, max_size=n)),
            "output_lens": [len(g) + 1 if o else 0 for g, o in zip(itls, ok)], "ttfts": ttft, "itls": itls,
            "latencies": lat, "start_times": draw(st.lists(st.floats(0, 1e6), min_size=n, max_size=n)),
            "errors": ["" if o else "boom" for o in ok]}


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(obj=_runs())
def test_fast_path_equals_the_reader_on_random_runs(tmp_path, fast_always, obj):
    p = _write(tmp_path, obj)
    fast = vllm_fast.read_fast(p)
    assert fast is not None
    _same(fast[0], vllm_bench.read(load_document(p))[0])


def test_a_pretty_printed_file_is_read_too(tmp_path, fast_always):
    p = tmp_path / "pretty.json"
    p.write_text(json.dumps(BASE, indent=2))
    fast = vllm_fast.read_fast(p)
    assert fast is not None
    _same(fast[0], vllm_bench.read(load_document(p))[0])
