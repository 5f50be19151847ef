"""Azure LLM inference trace 2024 timestamps (``2024-05-10 00:00:00.009930+00:00``; rows without a fraction too):
read by every reader (numpy hands them on, pyarrow's zoned retry, the row reader) with the same gaps as 2023's."""

from __future__ import annotations

import pytest

from kvledger.dynamics.workload import trace_arrow
from kvledger.dynamics.workload.trace_formats import read_trace_file
from kvledger.dynamics.workload.traces import load_trace
from kvledger.errors import FormatError

# Four rows in the 2024 release's form (Azure/AzurePublicDataset, AzureLLMInferenceDataset2024.md: TIMESTAMP,
# ContextTokens, GeneratedTokens; times written "YYYY-MM-DD HH:MM:SS.ffffff+00:00", some without the fraction).
AZURE_2024 = """TIMESTAMP,ContextTokens,GeneratedTokens
2024-05-10 00:00:00.009930+00:00,2162,5
2024-05-10 00:00:00.031290+00:00,1062,4
2024-05-10 00:00:01+00:00,4020,100
2024-05-10 00:00:01.250000+00:00,500,50
"""
# gaps from the first row: 0.031290 − 0.009930 = 0.02136 s; 1 − 0.009930 = 0.99007 s; 1.25 − 0.00993 = 1.24007 s
EXPECTED = [0.0, 0.02136, 0.99007, 1.24007]


@pytest.mark.parametrize("numpy_limit", [trace_arrow.NUMPY_CSV_MAX_BYTES, 0])  # 0: straight to pyarrow
def test_2024_offsets_read_as_utc_gaps(tmp_path, monkeypatch, numpy_limit):
    monkeypatch.setattr(trace_arrow, "NUMPY_CSV_MAX_BYTES", numpy_limit)
    path = tmp_path / "AzureLLMInferenceTrace_conv_1week.csv"
    path.write_text(AZURE_2024)
    parsed = read_trace_file(path)
    assert parsed.layout == "azure"
    assert parsed.arrivals_s.tolist() == pytest.approx(EXPECTED, abs=1e-9)
    assert parsed.prompt_tokens.tolist() == [2162, 1062, 4020, 500]
    assert parsed.output_tokens.tolist() == [5, 4, 100, 50]


def test_mixed_offsets_go_to_the_row_reader_and_convert_to_utc(tmp_path):
    # one naive row and one at +01:00 make every vectorised reader give up; the row reader takes 01:00:02+01:00 to
    # 00:00:02 UTC, 2 s after the naive 00:00:00 row (a naive time is taken as written)
    path = tmp_path / "mixed.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-10 00:00:00,10,2\n"
                    "2024-05-10 01:00:02+01:00,20,3\n2024-05-10 00:00:03.5Z,30,4\n")
    assert read_trace_file(path).arrivals_s.tolist() == pytest.approx([0.0, 2.0, 3.5], abs=1e-9)


def test_a_bad_offset_names_the_row_and_both_forms(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-10 00:00:00+00:00,10,2\n"
                    "2024-05-10 00:00:01+0x:00,20,3\n")
    with pytest.raises(FormatError, match=r"line 3, column 'TIMESTAMP'.*Azure 2023.*\+00:00' \(Azure 2024\)"):
        read_trace_file(path)


def test_2024_trace_replays_with_rate(tmp_path):
    path = tmp_path / "az24.csv"
    path.write_text(AZURE_2024)
    # --rate 3: the mean gap 1.24007 / 3 becomes 1/3 s, so the last arrival is at 3 × (1/3) = 1.0 s
    reqs = load_trace(path, rate=3.0)
    assert [r.num_prompt_tokens for r in reqs] == [2162, 1062, 4020, 500]
    assert reqs[-1].arrival_s == pytest.approx(1.0, abs=1e-12)
