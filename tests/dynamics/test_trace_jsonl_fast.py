"""JSON Lines traces through pyarrow (trace_arrow.read_jsonl_fast): the row reader's values and its errors, file, line
and field."""

from __future__ import annotations

import numpy as np
import pytest

from kvledger.dynamics.workload import trace_formats
from kvledger.dynamics.workload.trace_formats import read_trace_file
from kvledger.dynamics.workload.traces import bundled_trace_path
from kvledger.errors import FormatError


@pytest.fixture
def no_row_reader(monkeypatch):
    """Fail if the row reader is used: the file must go through pyarrow."""
    def refuse(*_):
        raise AssertionError("row reader used")
    monkeypatch.setattr(trace_formats, "_read_jsonl_rows", refuse)


def test_kvledger_jsonl_by_pyarrow(tmp_path, no_row_reader):
    f = tmp_path / "w.jsonl"
    f.write_text('{"arrival_s": 2.5, "num_prompt_tokens": 100, "num_output_tokens": 7, "prefix_segments": [], '
                 '"client_id": "a", "x": 1}\n'
                 "\n"
                 '{"arrival_s": 2, "num_prompt_tokens": 30, "num_output_tokens": 1, "prefix_segments": [4, 5]}\n'
                 '{"arrival_s": 3.25, "num_prompt_tokens": 10000000, "num_output_tokens": 2, "prefix_segments": [4], '
                 '"client_id": "b"}\n')
    t = read_trace_file(f)
    # arrivals relative to the earliest (2 s): 0.5, 0, 1.25
    assert t.layout == "kvledger" and t.arrivals_s.tolist() == [0.5, 0.0, 1.25]
    assert t.prompt_tokens.tolist() == [100, 30, 10_000_000] and t.output_tokens.tolist() == [7, 1, 2]
    assert t.prompt_tokens.dtype == np.int64 and t.arrivals_s.dtype == np.float64
    assert t.segments == [(), (4, 5), (4,)]
    assert t.client_ids == ["a", None, "b"]


def test_bundled_mooncake_by_pyarrow(no_row_reader):
    """The FAST'25 conversation trace (12,031 rows): the first row is timestamp 0 ms, 6,758 prompt tokens, 500 output
    tokens and hash_ids 0 … 13 (ceil(6758 / 512) = 14 ids)."""
    t = read_trace_file(bundled_trace_path("mooncake"))
    assert len(t.prompt_tokens) == 12_031 and t.arrivals_s[0] == 0.0
    assert (t.prompt_tokens[0], t.output_tokens[0], t.segments[0]) == (6758, 500, tuple(range(14)))


def test_rows_the_row_reader_judges(tmp_path):
    """Rows with and without prefix_segments (absent and null look alike to pyarrow): the row reader reads them."""
    f = tmp_path / "w.jsonl"
    f.write_text('{"arrival_s": 0, "num_prompt_tokens": 64, "num_output_tokens": 1, "prefix_segments": [1]}\n'
                 '{"arrival_s": 1, "num_prompt_tokens": 64, "num_output_tokens": 1}\n')
    assert read_trace_file(f).segments == [(1,), ()]
    f.write_text('{"arrival_s": 0, "num_prompt_tokens": 64, "num_output_tokens": 1, "prefix_segments": [1]}\n'
                 '{"arrival_s": 1, "num_prompt_tokens": 64, "num_output_tokens": 1, "prefix_segments": null}\n')
    with pytest.raises(FormatError, match="line 2, field 'prefix_segments': must be a list of integer block ids"):
        read_trace_file(f)


def test_fast_equals_rows_on_bundled_traces():
    from pathlib import Path
    for name in ("mooncake", "mooncake-synthetic"):
        p = Path(bundled_trace_path(name))
        fast, rows = trace_formats._read_jsonl(p, 512), trace_formats._read_jsonl_rows(p, 512)
        assert np.array_equal(fast.arrivals_s, rows.arrivals_s) and np.array_equal(fast.prompt_tokens,
                                                                                   rows.prompt_tokens)
        assert np.array_equal(fast.output_tokens, rows.output_tokens) and fast.segments == rows.segments
        assert fast.client_ids == rows.client_ids and fast.layout == rows.layout


@pytest.mark.parametrize("lines, where, what", [
    # a blank line counts: the bad row is on line 3
    (['{"arrival_s": 0, "num_prompt_tokens": 5, "num_output_tokens": 5}', "",
      '{"arrival_s": 1, "num_prompt_tokens": 5, "num_output_tokens": 0}'],
     "line 3, field 'num_output_tokens'", "token count 0 must be ≥ 1"),
    (['{"arrival_s": 0, "num_prompt_tokens": 5, "num_output_tokens": 5}',
      '{"arrival_s": -1, "num_prompt_tokens": 5, "num_output_tokens": 5}'],
     "line 2, field 'arrival_s'", "must be ≥ 0"),
    (['{"arrival_s": 0, "num_prompt_tokens": 5, "num_output_tokens": 5}',
      '{"arrival_s": 1, "num_prompt_tokens": true, "num_output_tokens": 5}'],
     "line 2, field 'num_prompt_tokens'", "is not a whole number of tokens"),
    (['{"arrival_s": 0, "num_prompt_tokens": 5, "num_output_tokens": 5}', '{"arrival_s": 1, "num_prompt_tokens": 5}'],
     "line 2", "missing field 'num_output_tokens'"),
    (['{"arrival_s": 0, "num_prompt_tokens": 20000000, "num_output_tokens": 5}'],
     "line 1, field 'num_prompt_tokens'", "exceeds 10,000,000 tokens"),
    # Mooncake: 1,000 prompt tokens span ceil(1000/512) = 2 blocks, the row lists 3 ids
    (['{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1, 2]}',
      '{"timestamp": 10, "input_length": 1000, "output_length": 5, "hash_ids": [1, 2, 3]}'],
     "line 2, field 'hash_ids'", "has 3 ids but the prompt of 1000 tokens spans ceil(1000/512) = 2 blocks"),
    # a null inside a segment list (found by a differential fuzz of the two readers)
    (['{"timestamp": 0, "input_length": 600, "output_length": 5, "hash_ids": [1, null]}'],
     "line 1, field 'hash_ids'", "must be a list of integer block ids"),
])
def test_bad_rows_named_by_file_line_and_field(tmp_path, lines, where, what):
    f = tmp_path / "bad.jsonl"
    f.write_text("\n".join(lines) + "\n")
    with pytest.raises(FormatError) as err:
        read_trace_file(f)
    assert str(err.value).startswith(f"{f}: {where}: ") and what in str(err.value)


def test_values_only_the_row_reader_reads(tmp_path):
    """A token count written "5" or 5.0 is read (as the row reader always did), at the row reader's values."""
    f = tmp_path / "w.jsonl"
    f.write_text('{"timestamp": 1500, "input_length": "600", "output_length": 5.0}\n'
                 '{"timestamp": 500, "input_length": 10, "output_length": 2}\n')
    t = read_trace_file(f)
    assert t.layout == "mooncake" and t.arrivals_s.tolist() == [1.0, 0.0]  # ms → s, relative to 0.5 s
    assert t.prompt_tokens.tolist() == [600, 10] and t.output_tokens.tolist() == [5, 2]


_VALUES = ['"5"', "5.0", "-1", "0", "null", "true", "1e3", "[1,2]", "{}", '"x"', "99999999999999999999", "2.5", "[]",
           "[1.5]", "[true]", "[null]", "[1, null]"]


def _mutated(rng, lines: list[str]) -> list[str]:
    import json

    lines = list(lines)
    for _ in range(rng.randint(1, 3)):
        i, op = rng.randrange(len(lines)), rng.randrange(5)
        try:
            obj = json.loads(lines[i])
        except ValueError:
            obj = None
        if op == 0 and isinstance(obj, dict) and obj:
            obj[rng.choice(list(obj))] = json.loads(rng.choice(_VALUES))
            lines[i] = json.dumps(obj)
        elif op == 1 and isinstance(obj, dict) and obj:
            del obj[rng.choice(list(obj))]
            lines[i] = json.dumps(obj)
        elif op == 2:
            lines.insert(i, rng.choice(["", "   ", "[1,2]", "42", '{"extra": 1}']))
        elif op == 3:
            lines[i] = lines[i][: rng.randrange(len(lines[i]) + 1)]
    return lines


def _outcome(read, path):
    try:
        r = read(path, 512)
        return (r.layout, r.arrivals_s.tolist(), r.prompt_tokens.tolist(), r.output_tokens.tolist(), r.segments,
                r.client_ids, r.arrivals_s.dtype, r.prompt_tokens.dtype)
    except FormatError as err:
        return str(err)


def test_both_readers_agree_on_mutated_files(tmp_path):
    """300 seeded mutations of the bundled Mooncake rows and of kvledger rows: the same values or the same error."""
    import json
    import random
    from pathlib import Path

    mooncake = Path(bundled_trace_path("mooncake")).read_text().splitlines()[:20]
    native = [json.dumps({"arrival_s": i * 0.5, "num_prompt_tokens": 100 + i, "num_output_tokens": 5 + i,
                          "prefix_segments": [i, i + 1], "client_id": f"c{i % 3}"}) for i in range(20)]
    f = tmp_path / "m.jsonl"
    for seed in range(300):
        rng = random.Random(seed)
        f.write_text("\n".join(_mutated(rng, rng.choice([mooncake, native]))) + "\n")
        assert _outcome(trace_formats._read_jsonl, f) == _outcome(trace_formats._read_jsonl_rows, f), seed
