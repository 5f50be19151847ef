"""CSV traces with exactly their layout's columns are read by numpy's loadtxt: the values and errors of the readers
before it."""

from __future__ import annotations

import pytest

from kvledger.dynamics.workload import trace_arrow
from kvledger.dynamics.workload.trace_formats import read_trace_file
from kvledger.errors import FormatError

AZURE = "TIMESTAMP,ContextTokens,GeneratedTokens\n"
KVL = "arrival_s,num_prompt_tokens,num_output_tokens\n"

CASES = {  # name: (file text, whether numpy reads it; else pyarrow or the row reader does, or names the bad row)
    "azure": (AZURE + "2023-11-16 18:15:46.6805900,374,44\n2023-11-16 18:15:50.9951690,396,109\n", True),
    "azure no fraction, crlf": (AZURE + "2023-11-16 18:15:46,374,44\r\n2023-11-16 18:15:47.5,1,2\r\n", True),
    "azure 10-digit fraction": (AZURE + "2023-11-16 18:15:46.1234567891,1,1\n2023-11-16 18:15:46,1,1\n", True),
    "azure quoted and signed": (AZURE + '"2023-11-16 18:15:46",+5, 6 \n', True),
    "azure bom": ("\ufeff" + AZURE + "2023-11-16 18:15:46,5,6\n", True),
    "azure T separator": (AZURE + "2023-11-16T18:15:46.68,374,44\n", False),
    "azure date only": (AZURE + "2023-11-16,374,44\n", False),
    "azure NaT": (AZURE + "NaT,374,44\n", False),
    "azure year 3000": (AZURE + "2023-11-16 18:15:46,1,1\n3000-01-01 00:00:00,1,1\n", False),
    "azure year 1850": (AZURE + "1850-01-01 00:00:00,1,1\n", False),
    "azure month 13": (AZURE + "2023-13-01 00:00:00,1,1\n", False),
    "azure leading space": (AZURE + " 2023-11-16 18:15:46,5,6\n", False),
    "azure dot without digits": (AZURE + "2023-11-16 18:15:46.,5,6\n", False),
    "azure non-ascii digit": (AZURE + "2023-11-16 18:15:46,1,1\n2023-11-16 18:15:4\u0665,1,1\n", False),
    "azure 5.0 tokens": (AZURE + "2023-11-16 18:15:46,5.0,6\n", False),
    "azure empty cell": (AZURE + "2023-11-16 18:15:46,,6\n", False),
    "azure long row": (AZURE + "2023-11-16 18:15:46,5,6\n2023-11-16 18:15:47,5,6,7\n", False),
    "azure short row": (AZURE + "2023-11-16 18:15:46,5\n", False),
    "azure header only": (AZURE, False),
    "azure zero tokens": (AZURE + "2023-11-16 18:15:46,5,6\n2023-11-16 18:15:47,0,6\n", False),
    "kvledger": (KVL + "2.5,5,6\n1,7,8\n1e3,9,1\n", True),
    "kvledger reordered": ("num_output_tokens,arrival_s,num_prompt_tokens\n6,2.5,5\n8,1,7\n", True),
    "kvledger nan time": (KVL + "0,5,3\nnan,4,3\n", False),
    "kvledger negative time": (KVL + "0,5,3\n-2.5,4,3\n", False),
    "kvledger hex time": (KVL + "0x1p3,5,3\n", False),
    "kvledger extra column": ("arrival_s,num_prompt_tokens,num_output_tokens,note\n1,5,6,a\n", False),
    "kvledger client ids": ("arrival_s,num_prompt_tokens,num_output_tokens,client_id\n1,5,6,a\n", False),
    "vidur lengths": ("num_prefill_tokens,num_decode_tokens\n3772,54\n12,3\n", True),
}


def _outcome(path):
    try:
        t = read_trace_file(path)
    except FormatError as err:
        return "error", str(err)
    return t.layout, None if t.arrivals_s is None else t.arrivals_s.tolist(), t.prompt_tokens.tolist(), \
        t.output_tokens.tolist(), t.client_ids


@pytest.mark.parametrize("name", list(CASES))
def test_numpy_reader_gives_what_the_readers_before_it_give(tmp_path, monkeypatch, name):
    text, by_numpy = CASES[name]
    f = tmp_path / "t.csv"
    f.write_text(text, encoding="utf-8")
    calls = []
    real = trace_arrow._read_csv_numpy
    monkeypatch.setattr(trace_arrow, "_read_csv_numpy", lambda *a: calls.append(got := real(*a)) or got)
    new = _outcome(f)
    took = bool(calls) and calls[0] is not None
    monkeypatch.setattr(trace_arrow, "_read_csv_numpy", lambda *a: None)  # pyarrow, then the row reader
    assert new == _outcome(f)
    assert took == by_numpy  # a bad row: the next reader names it


def test_numpy_reader_values_by_hand(tmp_path):
    # 18:15:46.6805900 → 18:15:50.9951690 is 4.314579 s; the earliest arrival is t = 0
    f = tmp_path / "a.csv"
    f.write_text(CASES["azure"][0])
    t = read_trace_file(f)
    assert t.layout == "azure" and t.arrivals_s.tolist() == [0.0, 4_314_579_000 / 1e9]
    assert t.prompt_tokens.tolist() == [374, 396] and t.output_tokens.tolist() == [44, 109]
    f.write_text(CASES["kvledger reordered"][0])
    t = read_trace_file(f)
    assert t.arrivals_s.tolist() == [1.5, 0.0] and t.prompt_tokens.tolist() == [5,
                                                                                7] and t.output_tokens.tolist() == [6,
                                                                                    8]
    f.write_text(CASES["azure zero tokens"][0])
    with pytest.raises(FormatError, match=r"line 3, column 'ContextTokens': token count 0 must be ≥ 1"):
        read_trace_file(f)


def test_bundled_azure_traces_need_no_pyarrow():
    import subprocess
    import sys

    code = ("import sys\nfrom kvledger.dynamics.workload.traces import load_trace\n"
            "n = len(load_trace('azure-conv')) + len(load_trace('azure-code'))\n"
            "print(n, 'pyarrow' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True).stdout
    assert out.split() == ["28185", "False"]  # 19,366 + 8,819 requests
