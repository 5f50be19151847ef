"""Trace rows are checked at the reading boundary (vectorised and row-by-row readers alike): file, line, column
named."""

from __future__ import annotations

import pytest

from kvledger.dynamics.workload.trace_arrow import MAX_TRACE_TOKENS
from kvledger.dynamics.workload.traces import load_trace
from kvledger.errors import FormatError

HEAD = "arrival_s,num_prompt_tokens,num_output_tokens\n"


@pytest.mark.parametrize("rows, where, what", [
    ("0,5,3\n1,-4,3\n", "line 3, column 'num_prompt_tokens'", "must be ≥ 1"),
    ("0,5,3\n1,4,0\n", "line 3, column 'num_output_tokens'", "must be ≥ 1"),
    (f"0,5,3\n1,4,3\n2,{MAX_TRACE_TOKENS + 1},3\n", "line 4, column 'num_prompt_tokens'", "exceeds 10,000,000"),
    ("0,5,3\nnan,4,3\n", "line 3, column 'arrival_s'", "must be finite"),
    ("0,5,3\ninf,4,3\n", "line 3, column 'arrival_s'", "must be finite"),
    ("0,5,3\n-2.5,4,3\n", "line 3, column 'arrival_s'", "must be ≥ 0"),
    ("0,5,3\n1,4.5,3\n", "line 3, column 'num_prompt_tokens'", "whole number"),  # row reader's message
    ("0,5,3\n1,,3\n", "line 3, column 'num_prompt_tokens'", "whole number"),
])
def test_bad_rows_name_file_line_and_column(tmp_path, rows, where, what):
    f = tmp_path / "t.csv"
    f.write_text(HEAD + rows)
    with pytest.raises(FormatError) as err:
        load_trace(f)
    msg = str(err.value)
    assert str(f) in msg and where in msg and what in msg


def test_jsonl_rows_get_the_same_checks(tmp_path):
    f = tmp_path / "t.jsonl"
    f.write_text('{"timestamp": 0, "input_length": 6, "output_length": 1}\n'
                 '{"timestamp": -5, "input_length": 6, "output_length": 1}\n')
    with pytest.raises(FormatError, match=r"must be ≥ 0") as err:
        load_trace(f)
    assert "line 2, field 'timestamp'" in str(err.value)


def test_vectorised_and_row_readers_agree_on_a_good_file(tmp_path, monkeypatch):
    from kvledger.dynamics.workload import trace_formats

    f = tmp_path / "ok.csv"
    f.write_text("arrival_s,num_prompt_tokens,num_output_tokens,client_id\n2.5,5,6,alice\n1,7,8,\n1,9,1,bob\n")
    fast = trace_formats.read_trace_file(f)
    monkeypatch.setattr(trace_formats, "read_csv_fast", lambda *a: None)
    slow = trace_formats.read_trace_file(f)
    assert fast.arrivals_s.tolist() == slow.arrivals_s.tolist() == [1.5, 0.0, 0.0]
    assert fast.prompt_tokens.tolist() == slow.prompt_tokens.tolist() == [5, 7, 9]
    assert fast.client_ids == slow.client_ids == ["alice", None, "bob"]


def test_arrivals_past_the_simulators_time_range_are_refused(tmp_path):
    # Past 1e9 s a float64 time no longer resolves an engine step's gaps (at 1e13 s it resolves 2 ms), so the
    # simulator refuses such a workload at its boundary: a file row, or a rate that stretches the trace there.
    from kvledger.accounting.stepcost import FixedStepCost
    from kvledger.dynamics.simulator import EngineConfig, simulate
    from kvledger.errors import InputError

    f = tmp_path / "far.csv"
    f.write_text(HEAD + "0,100,20\n1e17,100,20\n")
    cfg, cost = EngineConfig(num_gpu_blocks=500, block_size=16, max_model_len=2048), FixedStepCost(0.01, 1e-5)
    with pytest.raises(InputError, match=r"request 'far-1': arrival_s must be a number in \[0, 1e9\] s"):
        simulate(load_trace(f), cfg, cost)
    with pytest.raises(InputError, match=r"request 'far-1': arrival_s must be a number in \[0, 1e9\] s"):
        simulate(load_trace(f), cfg, cost, record_token_times=False)  # columnar path
    # 20 requests at 1e-9 req/s: the last arrives after 19 mean gaps of 1e9 s
    with pytest.raises(InputError, match=r"rate 1e-09 req/s puts the last of 20 arrivals at 1\.9e\+10 s"):
        load_trace("azure-conv", num_requests=20, rate=1e-9)
    assert len(load_trace("azure-conv", num_requests=20, rate=1e-7)) == 20  # last arrival 1.9e8 s: fine
