"""A JSON document given as a trace (a ShareGPT-style array, a pretty-printed object) is a clear error that says what
kvledger reads and what to do, not a CSV header error quoting the file's text."""

from __future__ import annotations

import pytest

from kvledger.dynamics.workload.trace_formats import read_trace_file
from kvledger.errors import FormatError

# ShareGPT's layout (a JSON array of {"id", "conversations": [{"from", "value"}]}): text, no token counts or times
SHAREGPT = '[{"id": "a1", "conversations": [{"from": "human", "value": "Hi, how are you?"}, {"from": "gpt", ' \
           '"value": "Fine."}]}]'


@pytest.mark.parametrize("text", [SHAREGPT, '\n  [{"arrival_s": 0, "num_prompt_tokens": 5, "num_output_tokens": 3}]'])
def test_a_json_array_says_jsonl_and_how_to_get_token_counts(tmp_path, text):
    path = tmp_path / "sharegpt.json"
    path.write_text(text)
    with pytest.raises(FormatError) as err:
        read_trace_file(path)
    msg = str(err.value)
    assert "a JSON array, not a trace: kvledger reads JSON Lines" in msg
    assert "arrival_s, num_prompt_tokens, num_output_tokens" in msg and "--prompt-lengths" in msg
    assert "CSV layout" not in msg  # it was read as a CSV whose header was the JSON text


def test_a_pretty_printed_object_says_one_object_a_line(tmp_path):
    path = tmp_path / "pretty.json"
    path.write_text('{\n  "arrival_s": 0,\n  "num_prompt_tokens": 5,\n  "num_output_tokens": 3\n}\n')
    with pytest.raises(FormatError, match=r"line 1, column 1: not valid JSON: Expecting property name enclosed in "
                                          r"double quotes \(JSON Lines: one whole object a line\)"):
        read_trace_file(path)


def test_a_header_with_spaces_after_its_commas_is_named_as_the_reason(tmp_path):
    # "arrival_s, num_prompt_tokens, num_output_tokens" makes csv read the names " num_prompt_tokens" and
    # " num_output_tokens", which no layout has: the error says the spaces are why and how to write the header
    f = tmp_path / "padded.csv"
    f.write_text("arrival_s, num_prompt_tokens, num_output_tokens\n0.0, 100, 10\n")
    with pytest.raises(FormatError) as e:
        read_trace_file(f)
    assert "its column names carry spaces around them" in str(e.value)
    assert "write the names without, 'arrival_s,num_prompt_tokens'" in str(e.value)
    # a header of other names is refused without that sentence
    g = tmp_path / "other.csv"
    g.write_text("t, a, b\n0, 1, 2\n")
    with pytest.raises(FormatError) as e:
        read_trace_file(g)
    assert "spaces around them" not in str(e.value) and "accepted layouts" in str(e.value)
