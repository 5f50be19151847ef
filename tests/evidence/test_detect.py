"""Format detection on the real samples, and the bad-input paths: unknown, empty, broken, wrong shape, directories."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvledger.errors import FormatError, UnknownNameError, running
from kvledger.evidence import FORMAT_DESCRIPTIONS, READERS, read_run, read_runs
from kvledger.evidence._io import load_document
from kvledger.evidence.detect import detect_format

DATA = Path(__file__).parent / "data"


@pytest.mark.parametrize("rel, fmt", [
    ("aiperf/run1_profile_export.jsonl", "aiperf-jsonl"),
    ("aiperf/run1_profile_export_aiperf.json", "aiperf-json"),
    ("aiperf/run1_profile_export_aiperf.csv", "aiperf-csv"),
    ("llmperf/leaderboard_individual_anyscale_70b.json", "llmperf-individual"),
    ("llmperf/leaderboard_summary_bedrock_70b.json", "llmperf-summary"),
    ("inference-perf/stage_3_lifecycle_metrics.json", "inference-perf-lifecycle"),
    ("inference-perf/summary_lifecycle_metrics.json", "inference-perf-lifecycle"),
    ("inferencex/inferencex_glm5_fp8_vllm_tp8_isl1024_osl128_conc4.json", "vllm-bench-serve"),
    ("guidellm/llmd_fixture_guidellm_report_v2_mockserver.json", "guidellm"),
])
def test_real_samples_are_detected_by_key_signature(rel, fmt):
    assert detect_format(load_document(DATA / rel)) == fmt


def test_detection_ignores_file_names(tmp_path):
    # the AIPerf sample renamed to something meaningless is still AIPerf
    p = tmp_path / "results.txt"
    p.write_bytes((DATA / "aiperf/run1_profile_export.jsonl").read_bytes())
    assert read_run(p).metadata.source_format == "aiperf-jsonl"


def test_reader_table_and_descriptions_agree():
    assert set(READERS) == set(FORMAT_DESCRIPTIONS)


def test_unknown_file_says_the_keys_it_saw_and_where_the_formats_are_listed_in_one_paragraph(tmp_path):
    p = tmp_path / "mystery.json"
    p.write_text(json.dumps({"throughput_rps": 3.0, "latency_p50": 0.2}))
    with pytest.raises(FormatError) as e:
        read_runs(p)
    msg = str(e.value)
    # the 14 formats (InferenceX's together_runner results the 14th) are not listed one per line (they were, ~15
    # lines): the tools they come from, in
    # FORMAT_DESCRIPTIONS' order, and where their names are listed (goodput --help)
    assert msg == (f"{p}: unknown benchmark output format. Keys seen: throughput_rps, latency_p50. kvledger reads 14 "
                   "formats (from vllm, SGLang, AIPerf, GenAI-Perf, perf_analyzer, GuideLLM, llmperf, inference-perf, "
                   "InferenceX, its own records and LLMServingSim's requests.jsonl): `kvledger goodput --help` "
                   "names them (goodput and cost force one with --format NAME).")
    assert len(FORMAT_DESCRIPTIONS) == 14 and "\n" not in msg


def test_unknown_list_file_shows_first_element_keys(tmp_path):
    p = tmp_path / "list.json"
    p.write_text(json.dumps([{"foo": 1, "bar": 2}]))
    with pytest.raises(FormatError, match=r"\[0\]\.foo, \[0\]\.bar"):
        read_runs(p)


def test_empty_and_whitespace_files(tmp_path):
    for text in ("", "  \n\n"):
        p = tmp_path / "empty.json"
        p.write_text(text)
        with pytest.raises(FormatError, match="the file is empty"):
            read_runs(p)


def test_empty_list_is_explained(tmp_path):
    p = tmp_path / "empty_list.json"
    p.write_text("[]")
    with pytest.raises(FormatError, match="empty list"):
        read_runs(p)


def test_broken_pretty_json_reports_line_and_column(tmp_path):
    p = tmp_path / "cut.json"
    p.write_text('{\n  "duration": 12.0,\n  "completed": \n')
    with pytest.raises(FormatError, match=r"cut.json: line 4, column 1: not valid JSON: Expecting value"):
        read_runs(p)


def test_broken_json_lines_report_the_bad_line(tmp_path):
    good = (DATA / "aiperf/run1_profile_export.jsonl").read_text().splitlines()[:3]
    p = tmp_path / "profile_export.jsonl"
    p.write_text("\n".join(good + ['{"metadata": {"timestamp_ns": 1}, "metrics": ']) + "\n")
    with pytest.raises(FormatError, match=r"line 4, column"):
        read_runs(p)


def test_missing_file_and_directory(tmp_path):
    with pytest.raises(FormatError, match="no such file"):
        read_runs(tmp_path / "nope.json")
    # an empty folder: said empty, with what to pass (a run folder is an input too: evidence.run_folder)
    with pytest.raises(FormatError, match=r"is empty; pass a run folder \(requests\.jsonl with its meta\.json\)"):
        read_runs(tmp_path)


def test_prometheus_report_is_named_and_redirected():
    with pytest.raises(FormatError, match=r"Prometheus report.*_lifecycle_metrics\.json"):
        read_runs(DATA / "inference-perf/stage_0_prometheus_metrics.json")


def test_forced_format_must_exist_and_fit_the_shape():
    with pytest.raises(UnknownNameError, match="did you mean: aiperf-jsonl"):
        read_runs(DATA / "aiperf/run1_profile_export.jsonl", format="aiperf-jsonlines")
    with pytest.raises(FormatError, match="is JSON Lines but format 'llmperf-individual' needs a JSON list"):
        read_runs(DATA / "aiperf/run1_profile_export.jsonl", format="llmperf-individual")


def test_read_run_refuses_multi_run_files():
    # the GuideLLM sample holds 2 benchmarks (constant 2 and 4 req/s)
    with pytest.raises(FormatError, match=r"holds 2 runs \(benchmark 0 \(constant @ 2\.0 req/s\), benchmark 1"):
        read_run(DATA / "guidellm/llmd_fixture_guidellm_report_v2_mockserver.json")


def test_input_files_are_never_modified(tmp_path):
    src = DATA / "aiperf/run1_profile_export.jsonl"
    before = src.read_bytes()
    read_runs(src)
    assert src.read_bytes() == before


@pytest.mark.parametrize("rel, seen", [
    # inference-perf's own config and manifests sit next to its reports; neither is a benchmark output
    ("inference-perf/config.yaml", "It is YAML, not JSON, JSON Lines or CSV; keys seen: api, data, load, metrics, "
     "report, storage, server, tokenizer. This config.yaml is an inference-perf client config (what the client sent: "
     "load, data, api), read beside the stage reports it produced; give {cmd} a "
     "stage_N_lifecycle_metrics.json; beside it: stage_0_lifecycle_metrics.json, stage_1_lifecycle_metrics.json, "
     "stage_2_lifecycle_metrics.json and 4 more."),
    ("inference-perf/manifests.yaml", "It is YAML, not JSON, JSON Lines or CSV; keys seen: [0].apiVersion, [0].kind"),
    ("SOURCES.md", "It is Markdown, not JSON, JSON Lines or CSV; first line: '# Real benchmark outputs used by the "
     "evidence, ledger and CLI tests'."),
])
def test_yaml_and_markdown_are_unknown_formats_not_broken_json(rel, seen):
    with pytest.raises(FormatError) as err:
        read_runs(DATA / rel)
    msg = str(err.value)
    seen = seen.replace("{cmd}", running())  # the command the user ran (kvledger.errors.COMMAND; validate unset)
    assert f"{rel}: unknown benchmark output format. {seen}" in msg and "`kvledger goodput --help` names them" in msg
    assert "not valid JSON" not in msg


def test_a_forced_format_says_the_file_lacks_its_keys():
    # AIPerf's per-request JSONL read as vLLM or SGLang output: the reader names what it looked for and what it saw,
    # instead of reading nothing and blaming an older vLLM
    for fmt in ("vllm-bench-serve", "sglang-bench-serving"):
        with pytest.raises(FormatError) as err:
            read_runs(DATA / "aiperf/run1_profile_export.jsonl", format=fmt)
        msg = str(err.value)
        assert f"line 1: does not have the keys of {fmt} output" in msg and "keys seen: metadata, metrics, error" in msg
        assert "older vLLM" not in msg
    # GuideLLM reads its YAML reports too (benchmarks.yaml): another YAML file forced as one lacks its benchmarks
    with pytest.raises(FormatError, match=r"no benchmarks in the file \('benchmarks' is missing or empty\)"):
        read_runs(DATA / "inference-perf/config.yaml", format="guidellm")
