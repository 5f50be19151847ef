"""Benchmark files as users have them (tests/data/public-bench, SOURCES.md): what the readers take from each, the
values read by hand from the file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvledger.calibration.aggregate_stage import aggregate_stage
from kvledger.evidence import read_run
from kvledger.evidence._meta import hub_id_of_cache_path

DATA = Path(__file__).parents[1] / "data" / "public-bench"
GPTOSS = DATA / "inferencex_vllm_bench_gptoss120b_hfcache_conc4.json"
QWEN_LENS = DATA / "inferencex_vllm_bench_qwen35_lens_conc64.json"
AIPERF_08 = DATA / "inferencex_aiperf_0_8_kimi_conc4_profile_export_aiperf.json"
CACHE_PATH = "/models/models--openai--gpt-oss-120b/snapshots/b5c939de8f754692c1647ca79fbf85e8c1e70f8a/"


def _edited(tmp_path: Path, src: Path, **changes) -> Path:
    obj = json.loads(src.read_text())
    obj.update(changes)
    out = tmp_path / src.name
    out.write_text(json.dumps(obj))
    return out


def test_hf_cache_snapshot_model_id_read_as_hub_id():
    run = read_run(GPTOSS)
    # the file's model_id is the cache folder vLLM was pointed at: models--openai--gpt-oss-120b → openai/gpt-oss-120b
    assert run.metadata.extra["model_path"] == CACHE_PATH
    assert run.metadata.model == "openai/gpt-oss-120b"
    assert any("Hugging Face cache snapshot" in d for d in run.metadata.definitions)


@pytest.mark.parametrize("path, hub_id", [
    ("/root/.cache/huggingface/hub/models--meta-llama--Llama-3.1-8B-Instruct/snapshots/0e9e39f",
     "meta-llama/Llama-3.1-8B-Instruct"),
    ("models--Qwen--Qwen3-0.6B/snapshots/abc/", "Qwen/Qwen3-0.6B"),
    ("/models/gpt-oss-120b", None),  # a plain folder names no Hub id
    ("meta-llama/Llama-3.1-8B", None),  # already an id: left as given
    ("/x/models--openai--gpt-oss-120b/blobs/abc", None),  # not a snapshot folder
])
def test_hub_id_of_cache_path(path, hub_id):
    assert hub_id_of_cache_path(path) == hub_id


def test_failed_from_num_prompts_when_no_failed_key(tmp_path):
    run = read_run(GPTOSS)
    # no 'failed' key; num_prompts 40, completed 40 → 40 − 40 = 0 failed, known rather than assumed
    assert (run.num_completed, run.num_failed) == (40, 0)
    assert not any("counted as 0" in d for d in run.metadata.definitions)
    # the same file had 42 prompts been sent: 42 − 40 = 2 failed
    assert read_run(_edited(tmp_path, GPTOSS, num_prompts=42)).num_failed == 2
    # completed above num_prompts: a client counting otherwise, left unknown
    odd = read_run(_edited(tmp_path, GPTOSS, num_prompts=30))
    assert odd.num_failed is None and any("counted as 0" in d for d in odd.metadata.definitions)


def test_best_of_at_its_default_is_not_a_launch_setting(tmp_path):
    run = read_run(GPTOSS)
    # "best_of": 1 is benchmark_serving.py's own --best-of default, written beside the date: kept, not a launch key
    assert run.metadata.extra["best_of"] == 1
    assert "engine_kwargs" not in run.metadata.extra
    # best_of 2 asks the engine for two sequences a request: recorded among the launch settings (warned unmodelled)
    assert read_run(_edited(tmp_path, GPTOSS, best_of=2)).metadata.extra["engine_kwargs"] == {"best_of": 2}


def test_kept_lengths_drive_the_replay_lengths():
    run = read_run(QWEN_LENS)
    extra = run.metadata.extra
    # input_lens: 640 entries, min 6557, max 8189, Σ 4,729,077 = total_input_tokens; sorted[319] 7391, sorted[320]
    # 7392 → median 7391.5; output_lens: min 814, max 1021, sorted[319] = sorted[320] = 920, Σ 588,102
    assert extra["input_len_quantiles"][0] == [0.0, 6557.0] and extra["input_len_quantiles"][-1] == [1.0, 8189.0]
    assert extra["input_len_quantiles"][10] == [0.5, 7391.5]
    assert extra["output_len_quantiles"][0] == [0.0, 814.0] and extra["output_len_quantiles"][-1] == [1.0, 1021.0]
    assert extra["output_len_quantiles"][10] == [0.5, 920.0]
    stage = aggregate_stage(run, "qwen", (64, "the file's max_concurrency 64"))
    assert stage.prompt_quantiles[0] == (0.0, 6557.0) and stage.prompt_quantiles[-1] == (1.0, 8189.0)
    assert stage.output_quantiles[10] == (0.5, 920.0)
    # InferenceX's wall-clock window is the run's, not a launch setting: 1786022910.2384567 − 1786022594.990249
    # = 315.2482078 s, the file's duration 315.2482071 s
    assert "engine_kwargs" not in extra
    assert extra["benchmark_end_time_unix"] - extra["benchmark_start_time_unix"] == pytest.approx(run.duration_s,
                                                                                                  abs=1e-5)


def test_lengths_of_failed_requests_not_taken_as_completed(tmp_path):
    # 641 prompts sent, 640 completed: the 640 lengths cannot be one per sent request and one per completed at once
    # (vLLM's arrays are one per sent request): with no errors array to drop the failed one, no quantiles
    edited = _edited(tmp_path, QWEN_LENS, num_prompts=641, input_lens=json.loads(QWEN_LENS.read_text())["input_lens"]
                     + [100], output_lens=json.loads(QWEN_LENS.read_text())["output_lens"] + [0])
    run = read_run(edited)
    assert run.num_failed == 1 and "input_len_quantiles" not in run.metadata.extra


def test_aiperf_0_8_run_fields():
    run = read_run(AIPERF_08)
    meta = run.metadata
    # aiperf_version "0.8.0", schema_version "1.2"; input_config.loadgen.concurrency 4; request_count.avg 547;
    # error_summary [] and no error_request_count → 0 failed; benchmark_duration.avg 3625.9412828160002 s
    assert (meta.extra["aiperf_version"], meta.extra["schema_version"]) == ("0.8.0", "1.2")
    assert (meta.extra["start_time"], meta.extra["was_cancelled"]) == ("2026-07-09T10:23:29.033942", False)
    assert (meta.model, meta.concurrency) == ("amd/Kimi-K2.7-Code-MXFP4", 4)
    assert (run.num_completed, run.num_failed) == (547, 0)
    assert run.duration_s == pytest.approx(3625.9412828160002)
    # time_to_first_token.p50 5834.378336 ms
    assert run.metrics["ttft"].percentiles_s[50.0] == pytest.approx(5.834378336)


def test_aiperf_cancelled_run_said(tmp_path):
    run = read_run(_edited(tmp_path, AIPERF_08, was_cancelled=True))
    assert any("was_cancelled true" in d for d in run.metadata.definitions)


GUIDELLM_02 = DATA / "guidellm_0_2_benchmarks_stripped.json"


def test_guidellm_0_2_model_and_synchronous_concurrency():
    run = read_run(GUIDELLM_02)
    # benchmarks[0].worker.backend_model "example_model" (GuideLLM 0.2's only place for it); strategy synchronous:
    # one request at a time
    assert (run.metadata.model, run.metadata.concurrency) == ("example_model", 1)
    # request_totals.successful 46 with 1 request kept: counts scaled 46 ÷ 1
    assert run.metadata.extra["sample_weights"] == {"ok": 46.0, "failed": 0.0}


def test_guidellm_sampled_requests_replayed_from_aggregates():
    from kvledger.evidence.read import read_runs

    (agg,) = read_runs(GUIDELLM_02, aggregate_samples=True)
    # request_totals: 46 successful, 0 errored; prompt_token_count.successful.total_sum 11827, output 5888;
    # time_to_first_token_ms.successful.mean 16.792535781860348 ms; duration 29.997201442718506 s
    assert (agg.num_completed, agg.num_failed) == (46, 0)
    assert (agg.total_input_tokens, agg.total_output_tokens) == (11827, 5888)
    assert agg.metrics["ttft"].mean_s == pytest.approx(0.016792535781860348)
    stage = aggregate_stage(agg, "g", (1, "synchronous"))
    # a closed loop of 1 client through 46 requests: 46 ÷ 29.997201442718506 s = 1.5335 req/s
    assert stage.count == 46 and stage.requests_per_s == pytest.approx(46 / 29.997201442718506)


def test_guidellm_yaml_report_reads_as_its_json():
    run = read_run(GUIDELLM_02.with_suffix(".yaml"))
    # the same benchmark saved as benchmarks.yaml: 46 successful, backend_model example_model, duration 29.9972 s
    assert run.metadata.source_format == "guidellm" and run.metadata.model == "example_model"
    assert run.metadata.extra["sample_weights"]["ok"] == 46.0 and run.duration_s == pytest.approx(29.997201442718506)
