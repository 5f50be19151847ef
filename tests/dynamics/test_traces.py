"""Bundled trace replay and user trace files: real values from the files, rate scaling, and malformed input."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kvledger.dynamics.workload.traces import list_traces, load_trace, trace_has_arrivals
from kvledger.errors import FormatError, InputError, UnknownNameError


def _arrivals(reqs):
    return np.array([r.arrival_s for r in reqs])


def test_listing_names_rows_and_sources():
    infos = {t.name: t for t in list_traces()}
    assert list(infos) == ["azure-conv", "azure-code", "mooncake", "mooncake-synthetic", "arxiv"]
    assert infos["azure-conv"].licence == "CC-BY-4.0" and "AzurePublicDataset" in infos["azure-conv"].source
    assert infos["arxiv"].has_arrivals is False and infos["mooncake"].has_prefix_ids is True
    assert infos["mooncake"].to_dict()["rows"] == 12031


@pytest.mark.parametrize("name", ["azure-conv", "azure-code", "mooncake", "mooncake-synthetic"])
def test_bundled_row_counts_match_the_registry(name):
    info = {t.name: t for t in list_traces()}[name]
    assert len(load_trace(name)) == info.rows


def test_azure_conv_first_rows_means_and_span():
    reqs = load_trace("azure-conv")
    # file rows 1-2: "2023-11-16 18:15:46.6805900,374,44" and "2023-11-16 18:15:50.9951690,396,109";
    # 50.9951690 − 46.6805900 = 4.3145790 s (Vidur's re-timed splitwise_conv.csv row 2 says 4.314579)
    assert (reqs[0].request_id, reqs[0].arrival_s, reqs[0].num_prompt_tokens, reqs[0].num_output_tokens) == \
        ("azure-conv-0", 0.0, 374, 44)
    assert reqs[1].arrival_s == pytest.approx(4.314579, abs=1e-9)
    assert (reqs[1].num_prompt_tokens, reqs[1].num_output_tokens) == (396, 109)
    # last row 19:14:08.4025270 − 18:15:46.6805900 = 58 min 21.7219370 s
    assert reqs[-1].arrival_s == pytest.approx(3501.721937, abs=1e-9)
    # docs/formats.md §8: prompt mean 1,155, output mean 211 (exact: 22,361,870 / 19,366 and 4,088,665 / 19,366)
    assert np.mean([r.num_prompt_tokens for r in reqs]) == pytest.approx(1154.6974, abs=1e-3)
    assert np.mean([r.num_output_tokens for r in reqs]) == pytest.approx(211.1259, abs=1e-3)
    assert all(r.prefix_segments == () for r in reqs)


def test_azure_code_seven_digit_timestamps_and_means():
    reqs = load_trace("azure-code")
    # "18:17:03.9799600,4808,10" then "18:17:04.0319600,3180,8": 0.0520000 s apart
    assert (reqs[0].num_prompt_tokens, reqs[0].num_output_tokens) == (4808, 10)
    assert reqs[1].arrival_s == pytest.approx(0.052, abs=1e-9)
    # 18,059,974 / 8,819 and 245,896 / 8,819 (docs/formats.md §8: 2,048 and 28)
    assert np.mean([r.num_prompt_tokens for r in reqs]) == pytest.approx(2047.848, abs=1e-3)
    assert np.mean([r.num_output_tokens for r in reqs]) == pytest.approx(27.883, abs=1e-3)


def test_mooncake_hash_ids_are_512_token_prefix_segments():
    reqs = load_trace("mooncake")
    first = reqs[0]
    # line 1: input_length 6758, output_length 500, hash_ids 0..13 (ceil(6758/512) = 14 blocks)
    assert (first.num_prompt_tokens, first.num_output_tokens) == (6758, 500)
    assert first.prefix_segments == tuple(range(14)) and first.segment_tokens == 512
    # the last block (6758 − 13·512 = 102 tokens) is partial, so 13 full blocks are shareable
    assert first.num_shareable_tokens == 13 * 512
    assert all(len(r.prefix_segments) == math.ceil(r.num_prompt_tokens / 512) for r in reqs)
    assert all(r.prefix_segments[0] == 0 for r in reqs)  # every request shares block 0 (system prompt)
    assert reqs[-1].arrival_s == pytest.approx(3536.999)  # timestamp 3536999 ms


def test_identical_arrival_times_keep_file_order():
    reqs = load_trace("mooncake", num_requests=50)
    # the first rows of conversation_trace.jsonl all have timestamp 0
    zeros = [r for r in reqs if r.arrival_s == 0.0]
    assert len(zeros) > 5
    assert [r.request_id for r in zeros] == [f"mooncake-{i}" for i in range(len(zeros))]
    assert np.all(np.diff(_arrivals(reqs)) >= 0)


def test_rate_sets_the_mean_gap_and_keeps_burstiness():
    base = load_trace("azure-code", num_requests=2000)
    scaled = load_trace("azure-code", num_requests=2000, rate=20.0)
    t0, t1 = _arrivals(base), _arrivals(scaled)
    assert (t1[-1] - t1[0]) / 1999 == pytest.approx(1 / 20.0, rel=1e-12)
    g0, g1 = np.diff(t0), np.diff(t1)
    assert g1.std() / g1.mean() == pytest.approx(g0.std() / g0.mean(), rel=1e-9)
    assert [r.request_id for r in scaled] == [r.request_id for r in base]


def test_rate_scale_divides_times():
    base = _arrivals(load_trace("azure-conv", num_requests=300))
    fast = _arrivals(load_trace("azure-conv", num_requests=300, rate_scale=2.5))
    np.testing.assert_allclose(fast, base / 2.5, rtol=0, atol=1e-12)


def test_start_s_skips_and_rebases():
    full = load_trace("azure-conv")
    part = load_trace("azure-conv", start_s=600.0, num_requests=10)
    expected = [r for r in full if r.arrival_s >= 600.0][:10]
    assert [r.request_id for r in part] == [r.request_id for r in expected]
    np.testing.assert_allclose(_arrivals(part), _arrivals(expected) - 600.0, atol=1e-9)


def test_arxiv_needs_a_rate_and_seed_and_is_deterministic():
    assert trace_has_arrivals("arxiv") is False
    with pytest.raises(InputError, match="no arrival times"):
        load_trace("arxiv")
    with pytest.raises(InputError, match="seed"):
        load_trace("arxiv", rate=2.0)
    a = load_trace("arxiv", rate=2.0, seed=7, num_requests=500)
    b = load_trace("arxiv", rate=2.0, seed=7, num_requests=500)
    assert a == b
    # row 1 of the file: 3772 prefill, 54 decode tokens
    assert (a[0].num_prompt_tokens, a[0].num_output_tokens, a[0].arrival_s) == (3772, 54, 0.0)
    burst = load_trace("arxiv", rate=math.inf)
    assert len(burst) == 28257 and _arrivals(burst).max() == 0.0
    # 73,131,321 / 28,257 (docs/formats.md §8: prefill mean 2,588)
    assert np.mean([r.num_prompt_tokens for r in burst]) == pytest.approx(2588.078, abs=1e-3)


def test_bad_arguments_and_names():
    with pytest.raises(UnknownNameError) as err:
        load_trace("azure-chat")
    assert "azure-conv" in str(err.value)
    with pytest.raises(InputError, match="not both"):
        load_trace("azure-conv", rate=1.0, rate_scale=2.0)
    with pytest.raises(InputError, match="19,366"):
        load_trace("azure-conv", num_requests=20000)
    with pytest.raises(InputError, match="not found"):
        load_trace("no/such/trace.csv")


def test_a_directory_or_a_short_row_says_what_is_wrong(tmp_path):
    with pytest.raises(InputError, match=r"is a directory; give a CSV or JSONL trace file"):
        load_trace(tmp_path)
    f = tmp_path / "t.csv"
    f.write_text("arrival_s,num_prompt_tokens,num_output_tokens\n0,5,3\n1,4\n")
    with pytest.raises(FormatError, match=r"line 3: wrong number of fields \(the header names 3\)"):
        load_trace(f)


def test_user_csv_layouts(tmp_path):
    vidur = tmp_path / "v.csv"
    vidur.write_text("arrived_at,num_prefill_tokens,num_decode_tokens\n0.5,10,3\n0.25,20,4\n0.5,30,5\n")
    reqs = load_trace(vidur)
    # sorted by arrival; the two rows at 0.5 s keep file order; times re-based to the earliest (0.25 s)
    assert [(r.request_id, r.arrival_s) for r in reqs] == [("v-1", 0.0), ("v-0", 0.25), ("v-2", 0.25)]
    native = tmp_path / "n.csv"
    native.write_text("arrival_s,num_prompt_tokens,num_output_tokens,client_id\n0,5,6,alice\n1.5,7,8,\n")
    reqs = load_trace(native)
    assert [(r.client_id, r.num_prompt_tokens) for r in reqs] == [("alice", 5), (None, 7)]
    azure = tmp_path / "a.csv"
    azure.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n2024-05-10 23:59:59.9999999,1,1\n"
                     "2024-05-11 00:00:00.5,2,2\n")
    assert _arrivals(load_trace(azure))[1] == pytest.approx(0.5000001, abs=1e-9)  # across midnight


def test_user_jsonl_native_with_segments(tmp_path):
    f = tmp_path / "w.jsonl"
    f.write_text('{"arrival_s": 0, "num_prompt_tokens": 40, "num_output_tokens": 2, "prefix_segments": [9, 8]}\n\n'
                 '{"arrival_s": 1, "num_prompt_tokens": 4, "num_output_tokens": 1}\n')
    reqs = load_trace(f)
    assert reqs[0].prefix_segments == (9, 8) and reqs[1].prefix_segments == ()


@pytest.mark.parametrize("text, where", [
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 18:17:03.97,5,1\n2023-11-16 18:17:04.1,x,1\n",
     "line 3, column 'ContextTokens'"),
    ("TIMESTAMP,ContextTokens,GeneratedTokens\n2023-11-16 25:17:03.97,5,1\n", "line 2, column 'TIMESTAMP'"),
    ("arrival_s,num_prompt_tokens,num_output_tokens\n0,5,0\n", "line 2, column 'num_output_tokens'"),
    ("arrival_s,num_prompt_tokens,num_output_tokens\n0,5,1,9\n", "line 2"),
    ("when,prompt,output\n0,5,1\n", "line 1"),
])
def test_malformed_csv_names_file_line_and_column(tmp_path, text, where):
    f = tmp_path / "bad.csv"
    f.write_text(text)
    with pytest.raises(FormatError) as err:
        load_trace(f)
    assert str(f) in str(err.value) and where in str(err.value)


@pytest.mark.parametrize("lines, where", [
    (['{"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [1, 2]}',
      '{"timestamp": 5, "input_length": 600, "output_length": 1, "hash_ids": [1]}'], "line 2, field 'hash_ids'"),
    (['{"timestamp": 0, "input_length": 6, "output_length": 1}', '{"timestamp": 1, "input_length": 6,'],
     "line 2, column"),
    (['{"timestamp": 0, "input_length": 6, "output_length": 1}', '{"timestamp": "soon", "input_length": 6, '
      '"output_length": 1}'], "line 2, field 'timestamp'"),
    (['{"timestamp": 0, "input_length": 6.5, "output_length": 1}'], "line 1, field 'input_length'"),
])
def test_malformed_jsonl_names_file_line_and_field(tmp_path, lines, where):
    f = tmp_path / "bad.jsonl"
    f.write_text("\n".join(lines) + "\n")
    with pytest.raises(FormatError) as err:
        load_trace(f)
    assert str(f) in str(err.value) and where in str(err.value)


def test_hash_id_count_is_checked_with_the_stated_block_size(tmp_path):
    f = tmp_path / "m.jsonl"
    f.write_text('{"timestamp": 0, "input_length": 600, "output_length": 1, "hash_ids": [1, 2, 3]}\n')
    with pytest.raises(FormatError, match=r"ceil\(600/512\) = 2"):
        load_trace(f)
    assert load_trace(f, segment_tokens=256)[0].segment_tokens == 256  # ceil(600/256) = 3


def test_damaged_trace_files_are_clear_errors(tmp_path):
    # found by benchmarks/fuzz.py: a CSV field over the csv module's 131,072-character limit, a JSONL line of
    # objects nested 100,000 deep, and a trace name of 300 bytes used to end in tracebacks
    import pytest

    from kvledger.dynamics.workload.traces import load_trace
    from kvledger.errors import FormatError, InputError

    big = tmp_path / "big.csv"
    big.write_text("TIMESTAMP,ContextTokens,GeneratedTokens\n\"" + "9" * 200_000 + "\",1,1\n")
    with pytest.raises(FormatError, match="not a readable CSV"):
        load_trace(big)
    deep = tmp_path / "deep.jsonl"
    deep.write_text('{"a":' * 100_000 + "1" + "}" * 100_000 + "\n")
    with pytest.raises(FormatError, match="nested too deeply"):
        load_trace(deep)
    with pytest.raises(InputError, match="not a usable name or path"):
        load_trace("a" * 300)


def test_an_unknown_trace_name_lists_the_bundled_ones():
    # fresh-user trial: `--trace nope` said only "unknown trace 'nope'. Or give the path …"
    from kvledger.dynamics.workload.traces import load_trace
    from kvledger.errors import UnknownNameError

    with pytest.raises(UnknownNameError, match="The bundled traces: arxiv, azure-code, azure-conv, mooncake, "
                                               "mooncake-synthetic; or give the path of a CSV/JSONL trace file"):
        load_trace("nope")
