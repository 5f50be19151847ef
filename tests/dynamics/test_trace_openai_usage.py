"""A user's own request log with OpenAI usage columns (the usage object's ``prompt_tokens``, ``completion_tokens``;
the Chat Completion object's ``created``, Unix seconds) read as a ``--trace``: with ``created`` its arrivals, without
it lengths only (a rate needed, said so), and a time column under another name refused rather than dropped."""

from __future__ import annotations

import pytest

from kvledger.dynamics.workload.trace_formats import read_trace_file
from kvledger.dynamics.workload.traces import load_trace
from kvledger.errors import FormatError, InputError

# hand-written: four requests, two in the same second (created is whole seconds), total_tokens (ignored) beside them
WITH_TIMES = """id,created,prompt_tokens,completion_tokens,total_tokens
chatcmpl-a,1733500000,120,30,150
chatcmpl-b,1733500002,80,45,125
chatcmpl-c,1733500002,200,10,210
chatcmpl-d,1733500007,64,64,128
"""


def test_created_gives_the_arrivals_and_usage_the_lengths(tmp_path):
    f = tmp_path / "requests.csv"
    f.write_text(WITH_TIMES)
    t = read_trace_file(f)
    assert t.layout == "openai"
    # arrivals: created − the first created (1733500000) = 0, 2, 2, 7 s
    assert t.arrivals_s.tolist() == [0.0, 2.0, 2.0, 7.0]
    assert t.prompt_tokens.tolist() == [120, 80, 200, 64] and t.output_tokens.tolist() == [30, 45, 10, 64]
    # replayed twice as fast (--rate-scale 2): every gap halved → 0, 1, 1, 3.5 s
    specs = load_trace(str(f), rate_scale=2.0)
    assert [s.arrival_s for s in specs] == [0.0, 1.0, 1.0, 3.5]
    assert [(s.num_prompt_tokens, s.num_output_tokens) for s in specs] == [(120, 30), (80, 45), (200, 10), (64, 64)]


def test_without_created_a_rate_is_required(tmp_path):
    f = tmp_path / "usage.csv"
    f.write_text("prompt_tokens,completion_tokens\n120,30\n80,45\n")
    t = read_trace_file(f)
    assert t.layout == "openai-lengths" and t.arrivals_s is None
    assert t.prompt_tokens.tolist() == [120, 80] and t.output_tokens.tolist() == [30, 45]
    with pytest.raises(InputError, match=r"has no arrival times \(only lengths\): give --rate R"):
        load_trace(str(f))
    # --rate inf: every request at t = 0, lengths as read
    specs = load_trace(str(f), rate=float("inf"))
    assert [s.arrival_s for s in specs] == [0.0, 0.0] and [s.num_prompt_tokens for s in specs] == [120, 80]


def test_a_time_column_under_another_name_is_refused_not_dropped(tmp_path):
    f = tmp_path / "log.csv"
    f.write_text("timestamp,prompt_tokens,completion_tokens\n2026-12-06T10:00:00Z,120,30\n")
    with pytest.raises(FormatError, match=r"column 'timestamp' is not read: .* rename the column to 'created'"):
        read_trace_file(f)


def test_the_refusal_of_an_unknown_layout_names_the_openai_columns(tmp_path):
    f = tmp_path / "other.csv"
    f.write_text("input,output\n1,2\n")
    with pytest.raises(FormatError, match=r"openai: created, prompt_tokens, completion_tokens; openai-lengths: "
                                          r"prompt_tokens, completion_tokens"):
        read_trace_file(f)
