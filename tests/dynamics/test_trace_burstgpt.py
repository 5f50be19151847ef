"""BurstGPT CSV traces (HPMLL/BurstGPT README: ``Timestamp,Model,Request tokens,Response tokens,Total tokens,Log
Type``, Timestamp in s, a failed request has Response tokens 0): detected, read in seconds, failed rows skipped and
said so in simulate's notes."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.dynamics.workload.trace_formats import read_trace_file
from kvledger.dynamics.workload.traces import load_trace
from kvledger.errors import FormatError

# Rows in the release's form (the published BurstGPT_1.csv layout; values made up, not copied): line 5 is a failed
# request (Response tokens 0), line 6 an empty prompt.
BURSTGPT = """Timestamp,Model,Request tokens,Response tokens,Total tokens,Log Type
5,ChatGPT,472,18,490,Conversation log
45,ChatGPT,1087,230,1317,Conversation log
118,GPT-4,417,276,693,Conversation log
120,GPT-4,300,0,300,API log
121,ChatGPT,0,12,12,API log
"""


@pytest.fixture
def burst(tmp_path):
    path = tmp_path / "BurstGPT_1.csv"
    path.write_text(BURSTGPT)
    return path


@pytest.mark.parametrize("pyarrow_reads", [True, False])
def test_burstgpt_rows_in_seconds_failed_ones_skipped(burst, monkeypatch, pyarrow_reads):
    if not pyarrow_reads:  # the row reader (used when pyarrow cannot read a cell) gives the same trace
        monkeypatch.setattr("kvledger.dynamics.workload.burstgpt._columns_arrow", lambda path: None)
    parsed = read_trace_file(burst)
    assert parsed.layout == "burstgpt"
    # seconds, re-based on the first served row: 5 → 0, 45 → 40, 118 → 113 (not ms: 0.04 s, 0.113 s)
    assert parsed.arrivals_s.tolist() == [0.0, 40.0, 113.0]
    assert parsed.prompt_tokens.tolist() == [472, 1087, 417]
    assert parsed.output_tokens.tolist() == [18, 230, 276]
    assert parsed.note.startswith("BurstGPT_1.csv: 2 of 5 BurstGPT rows skipped (1 with Response tokens 0")
    assert "1 with Request tokens 0" in parsed.note and "the other 3 replayed" in parsed.note


def test_burstgpt_rate_scale_and_num_requests(burst):
    # --rate-scale 2 halves every gap: 40 → 20 s; --num-requests 2 keeps the first two served rows
    reqs = load_trace(burst, rate_scale=2.0, num_requests=2)
    assert [(r.arrival_s, r.num_prompt_tokens) for r in reqs] == [(0.0, 472), (20.0, 1087)]


def test_a_bad_served_cell_names_its_line(tmp_path):
    path = tmp_path / "b.csv"
    path.write_text(BURSTGPT + "130,GPT-4,-3,9,6,API log\n")  # line 7: a negative prompt is damage, not a failure
    with pytest.raises(FormatError, match=r"line 7, column 'Request tokens'"):
        read_trace_file(path)
    path.write_text(BURSTGPT + "131,GPT-4,ten,9,19,API log\n")  # line 7: pyarrow gives up, the row reader names it
    with pytest.raises(FormatError, match=r"line 7, column 'Request tokens': 'ten' is not a whole number of tokens"):
        read_trace_file(path)
    path.write_text(BURSTGPT.splitlines()[0] + "\n1,GPT-4,10,0,10,API log\n")
    with pytest.raises(FormatError, match="no row to serve: 1 rows have Response tokens 0"):
        read_trace_file(path)


def test_simulate_notes_the_skipped_rows(burst):
    out = CliRunner().invoke(app, ["simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--trace", str(burst),
                                   "--json"])
    assert out.exit_code == 0, out.output
    doc = json.loads(out.output)
    assert doc["workload"]["num_requests"] == 3
    assert any(n.startswith("BurstGPT_1.csv: 2 of 5 BurstGPT rows skipped") for n in doc["notes"])
