"""Records kept as columns (record_sink.py) and a columnar workload (workload_columns.py) give the object path's
records and summary."""

from __future__ import annotations

import json
import re

import numpy as np
import pytest

from kvledger.accounting.stepcost import FixedStepCost
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.simulator import EngineConfig, simulate
from kvledger.dynamics.workload.columns import WorkloadColumns
from kvledger.dynamics.workload.traces import load_trace
from kvledger.errors import InputError
from kvledger.records import RunRecords

STEP = FixedStepCost(per_step_s=0.01, per_token_s=2e-5)


def _run(workload, cfg, **kw):
    return simulate(workload, cfg, STEP, record_token_times=False, **kw)


@pytest.mark.parametrize("cfg", [
    # roomy pool, max_model_len 2,048: Azure conversation prompts past it are rejected (error records)
    dict(num_gpu_blocks=3000, block_size=16, max_model_len=2048),
    # tight pool: preemptions (recompute), so num_preemptions differs between records
    dict(num_gpu_blocks=150, block_size=16, max_model_len=2048, max_num_batched_tokens=512),
])
@pytest.mark.parametrize("replicas", [1, 2])
def test_columns_equal_objects_on_bundled_trace(cfg, replicas):
    """The first 1,500 requests of the bundled Azure conversation trace: same records, same summary, same JSON."""
    w = load_trace("azure-conv", num_requests=1500)
    config = EngineConfig(**cfg)
    objects = _run(w, config, num_replicas=replicas, records_as_columns=False)
    cols = _run(w, config, num_replicas=replicas)
    cols_wl = _run(WorkloadColumns.from_specs(w), config, num_replicas=replicas)
    assert isinstance(objects.records.records, list)
    assert cols.records.columns is not None and cols_wl.records.columns is not None
    for other in (cols, cols_wl):
        assert other.records.records == objects.records.records
        assert json.dumps(other.to_dict()) == json.dumps(objects.to_dict())
    s = objects.summary
    if cfg["num_gpu_blocks"] == 3000:
        assert s.num_rejected == sum(1 for r in w if r.num_prompt_tokens >= 2048) > 0  # vLLM 0.33: prompt ≥ L refused
    else:
        assert s.num_preemptions > 0
    assert cols.records.records[7].request_id == "azure-conv-7"


def test_columns_hold_no_record_objects():
    """The run's records are columns: 1,500 rows of arrays, and one record is built only when asked for."""
    res = _run(load_trace("azure-conv", num_requests=1500), EngineConfig(num_gpu_blocks=3000, block_size=16,
                                                                         max_model_len=8192))
    c = res.records.columns
    assert c.n == 1500 and c.finish_s.dtype == np.float64 and c.num_preemptions.dtype == np.int64
    rec = res.records.records[-1]
    assert rec.finish_s == float(c.finish_s[-1]) and rec.chunk_times_s is None and rec.num_cached_tokens == 0


def test_round_trip_through_dict():
    """A columnar run serialises like a list run and reads back as one (RunRecords.from_dict)."""
    res = _run(load_trace("azure-conv", num_requests=50), EngineConfig(num_gpu_blocks=3000, block_size=16,
                                                                       max_model_len=8192))
    back = RunRecords.from_dict(json.loads(json.dumps(res.records.to_dict())))
    assert back.records == res.records.records


def test_workload_columns_sort_and_ids():
    """Unsorted arrivals are served in arrival order, ties in workload order; ids keep the file rows."""
    wl = WorkloadColumns(np.array([0.3, 0.1, 0.1]), np.array([10, 20, 30]), np.array([2, 3, 4]), "t-", np.array([5, 6,
        7]))
    s = wl.sorted_by_arrival()
    assert [x.request_id for x in s] == ["t-6", "t-7", "t-5"]
    assert s[0] == RequestSpec("t-6", 0.1, 20, 3)
    res = _run(wl, EngineConfig(num_gpu_blocks=100, block_size=16, max_model_len=512))
    objects = _run(list(wl), EngineConfig(num_gpu_blocks=100, block_size=16, max_model_len=512),
                   records_as_columns=False)
    assert [r.request_id for r in res.records.records] == ["t-6", "t-7", "t-5"]
    assert res.records.records == objects.records.records


@pytest.mark.parametrize("arrays, msg", [
    (([0.0, -1.0], [5, 5], [5, 5]), "request 'w-1': arrival_s must be a number in [0, 1e9] s (about 31.7 years; "
                                    "float64 times lose step resolution beyond), got -1.0"),
    (([0.0, 1.0], [5, 0], [5, 5]), "request 'w-1': num_prompt_tokens must be an integer ≥ 1, got 0"),
    (([0.0, np.nan], [5, 5], [5, 5]), "request 'w-1': arrival_s must be a number in [0, 1e9] s (about 31.7 years; "
                                      "float64 times lose step resolution beyond), got nan"),
    (([0.0, 2e9], [5, 5], [5, 5]), "request 'w-1': arrival_s must be a number in [0, 1e9] s (about 31.7 years; "
                                   "float64 times lose step resolution beyond), got 2000000000.0"),
])
def test_workload_columns_checked_like_specs(arrays, msg):
    t, p, o = arrays
    with pytest.raises(InputError, match=re.escape(msg)):
        simulate(WorkloadColumns(np.array(t), np.array(p), np.array(o), "w-"), EngineConfig(num_gpu_blocks=100,
            max_model_len=512), STEP)


def test_from_specs_refuses_segments():
    with pytest.raises(InputError, match="prefix segments"):
        WorkloadColumns.from_specs([RequestSpec("a-0", 0.0, 64, 4, (1, 2), 32)])


def test_load_trace_columns_equals_load_trace():
    """The Azure conversation trace at 3 req/s from 10 s on, 500 requests: the same specs as load_trace's, row ids kept;
    Mooncake (hash_ids) stays a list."""
    from kvledger.dynamics.workload.traces import load_trace_columns

    kw = dict(num_requests=500, rate=3.0, start_s=10.0)
    cols, specs = load_trace_columns("azure-conv", **kw), load_trace("azure-conv", **kw)
    assert list(cols) == specs and cols[0].request_id == specs[0].request_id
    assert load_trace_columns("mooncake", num_requests=10) is None


def test_preempted_requests_finishing_inside_an_arrival_stretch_keep_their_records():
    """Llama-3.1-8B on one L4 at max_model_len 16,384 (1,951 blocks of 16 tokens) under the first 3,000 Azure
    conversation requests: hundreds of preemptions, and requests preempted earlier (several runs of token times)
    finish inside arrival stretches among others, whose records go to the columns together. Each record must be
    the one the object path builds request by request: first-token and finish times, preemptions."""
    from kvledger.analyses.serving.sim_ledgers import prepare_run
    from kvledger.analyses.serving.sim_setup import SimRequestArgs

    setup = prepare_run(SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="L4", trace="azure-conv",
                                       num_requests=3000, max_model_len=16384))
    objects = simulate(setup.workload, setup.config, setup.cost, record_token_times=False, records_as_columns=False)
    cols = simulate(setup.workload, setup.config, setup.cost, record_token_times=False)
    assert objects.summary.num_preemptions > 100
    assert sum(1 for r in objects.records.records if r.num_preemptions) > 50
    assert cols.records.records == objects.records.records
    assert json.dumps(cols.to_dict()) == json.dumps(objects.to_dict())


def test_a_trace_in_arrival_order_is_read_without_copies_and_gives_load_traces_specs(tmp_path):
    """The whole Azure conversation trace (already in arrival order): the specs of load_trace, and the columns are the
    parsed trace's own arrays (no sorted copy, no gathered copy). A file out of order (rows 0, 1, 2 at 0.2, 0.0, 0.1 s)
    is served in arrival order with its file rows as ids: t-1, t-2, t-0."""
    from kvledger.dynamics.workload.traces import load_trace_columns

    cols, specs = load_trace_columns("azure-conv"), load_trace("azure-conv")
    assert list(cols) == specs and cols.id_rows is None
    again = load_trace_columns("azure-conv")  # the parse is cached: both read the same arrays
    assert np.shares_memory(cols.num_prompt_tokens, again.num_prompt_tokens)
    assert np.shares_memory(cols.arrival_s, again.arrival_s)
    f = tmp_path / "t.csv"
    f.write_text("arrival_s,num_prompt_tokens,num_output_tokens\n0.2,10,2\n0.0,20,3\n0.1,30,4\n")
    cols = load_trace_columns(f)
    assert [s.request_id for s in cols] == ["t-1", "t-2", "t-0"] and list(cols) == load_trace(f)
    assert list(cols.num_prompt_tokens) == [20, 30, 10]


def test_plain_spec_is_the_dataclass_spec():
    """plain_spec fills the slots directly: every field equals RequestSpec's with the defaults (no segments, 512-token
    segments, no client, no output segments); a field added to RequestSpec fails here until plain_spec sets it."""
    from dataclasses import fields

    from kvledger.dynamics.engine.request import plain_spec

    assert [f.name for f in fields(RequestSpec)] == ["request_id", "arrival_s", "num_prompt_tokens",
                                                     "num_output_tokens", "prefix_segments", "segment_tokens",
                                                     "client_id", "output_segments"]
    a, b = plain_spec("w-7", 1.25, 300, 40), RequestSpec("w-7", 1.25, 300, 40)
    assert a == b and hash(a) == hash(b) and repr(a) == repr(b)
    assert [getattr(a, f.name) for f in fields(RequestSpec)] == ["w-7", 1.25, 300, 40, (), 512, None, ()]
