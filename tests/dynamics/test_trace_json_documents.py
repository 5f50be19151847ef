"""A JSON document given as a trace (a ShareGPT-style array, a pretty-printed object) is a clear error that says what
kvledger reads and what to do, not a CSV header error quoting the file's text."""

from __future__ import annotations

import pytest

from kvledger.dynamics.workload.trace_formats import read_trace_file

# ShareGPT's layout (a JSON array of {"id", "conversations": [{"from", "value"}]}): text, no token counts or times
SHAREGPT = '[{"id": "a1", "conversations": [{"from": "human", "value": "Hi, how are you?"}, {"from": "gpt", ' \
           '"value": "Fine."}]}]'


@pytest.mark.parametrize("text", [SHAREGPT, '\n  [{"arrival_s": 0, "num_prompt_tokens": 5, "num_output_tokens": 3}]'])
def test_a_json_array_says_jsonl_and_how_to_get_token_counts(format_refusal, text):
    msg = format_refusal(read_trace_file, text, "sharegpt.json")
    assert "a JSON array, not a trace: kvledger reads JSON Lines" in msg
    assert "arrival_s, num_prompt_tokens, num_output_tokens" in msg and "--prompt-lengths" in msg
    assert "CSV layout" not in msg  # it was read as a CSV whose header was the JSON text


def test_a_pretty_printed_object_says_one_object_a_line(format_refusal):
    pretty = '{\n  "arrival_s": 0,\n  "num_prompt_tokens": 5,\n  "num_output_tokens": 3\n}\n'
    msg = format_refusal(read_trace_file, pretty, "pretty.json")
    assert ("line 1, column 1: not valid JSON: Expecting property name enclosed in double quotes (JSON Lines: one "
            "whole object a line)") in msg


def test_a_header_with_spaces_after_its_commas_is_named_as_the_reason(format_refusal):
    # "arrival_s, num_prompt_tokens, num_output_tokens" makes csv read the names " num_prompt_tokens" and
    # " num_output_tokens", which no layout has: the error says the spaces are why and how to write the header
    padded = "arrival_s, num_prompt_tokens, num_output_tokens\n0.0, 100, 10\n"
    msg = format_refusal(read_trace_file, padded, "padded.csv")
    assert "its column names carry spaces around them" in msg
    assert "write the names without, 'arrival_s,num_prompt_tokens'" in msg
    # a header of other names is refused without that sentence
    other = format_refusal(read_trace_file, "t, a, b\n0, 1, 2\n", "other.csv")
    assert "spaces around them" not in other and "accepted layouts" in other
