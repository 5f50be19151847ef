"""inference-perf: the real KubeCon lifecycle reports (seconds, not ms) and constructed per-request files (two
layouts)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvledger.errors import FormatError
from kvledger.evidence import read_run, read_runs

DATA = Path(__file__).parent / "data" / "inference-perf"


def test_stage_report_counts_rate_duration_and_model():
    agg = read_run(DATA / "stage_0_lifecycle_metrics.json")
    # successes.count 60, failures.count 0, load_summary.requested_rate 1.0
    assert (agg.num_completed, agg.num_failed, agg.metadata.request_rate) == (60, 0, 1.0)
    # duration = 60 ÷ successes.throughput.requests_per_sec 0.996850670841712 = 60.1896 s
    assert agg.duration_s == pytest.approx(60 / 0.996850670841712, rel=1e-12)
    # the model the engine served: the Deployment's MODEL_ID in the manifests.yaml beside it, as validate replays it;
    # the sibling config.yaml's server.model_name (meta-llama/Meta-Llama-3-8B-Instruct) is the name the client sent
    assert agg.metadata.model == "meta-llama/Llama-3.1-8B-Instruct"
    said = [d for d in agg.metadata.definitions if d.startswith("model from ")]
    assert len(said) == 1 and said[0].endswith("manifests.yaml MODEL_ID (the Deployment's); config.yaml "
                                               "server.model_name names meta-llama/Meta-Llama-3-8B-Instruct, the name "
                                               "the client sent, not the model the engine served")
    assert agg.metadata.extra["run_label"] == "stage 0"
    # manifests.yaml: nodeSelector gke-accelerator nvidia-h100-80gb, nvidia.com/gpu 1, --max-num-seqs=192,
    # and MODEL_ID meta-llama/Llama-3.1-8B-Instruct (the model above; the client's other name said beside it)
    md = agg.metadata
    assert (md.hardware, md.num_gpus, md.extra["max_num_seqs"]) == ("nvidia-h100-80gb", 1, 192)
    assert md.extra["deployed_model"] == md.model


def test_a_launch_record_names_the_model_tp_and_limits_before_the_manifests(tmp_path):
    # inference-sim/training's layout: <experiment>/exp-config.yaml above <experiment>/results/stage_k_….json. The
    # launch record wins over the manifests and the client config, as validate replays the stage (calibration.sweep):
    # goodput and cost priced kubecon-style stages of CodeLlama-34B at TP 2 with "pass --num-gpus"
    import shutil

    (tmp_path / "results").mkdir()
    for name in ("stage_0_lifecycle_metrics.json", "config.yaml", "manifests.yaml"):
        shutil.copy(DATA / name, tmp_path / "results" / name)
    (tmp_path / "exp-config.yaml").write_text("model: codellama/CodeLlama-34b-Instruct-hf\ntensor_parallelism: 2\n"
                                              "max_model_len: 4096\nmax_num_seqs: 128\napp: inference-perf\n")
    md = read_run(tmp_path / "results" / "stage_0_lifecycle_metrics.json").metadata
    assert (md.model, md.num_gpus, md.extra["max_num_seqs"]) == ("codellama/CodeLlama-34b-Instruct-hf", 2, 128)
    assert md.extra["engine_kwargs"] == {"tensor_parallel_size": 2, "max_model_len": 4096, "max_num_seqs": 128}
    assert md.extra["record_file"] == str((tmp_path / "exp-config.yaml").resolve())
    assert f"model from {(tmp_path / 'exp-config.yaml').resolve()} model (the launch record)" in md.definitions
    assert md.hardware is None and "deployed_model" not in md.extra  # the manifests beside it are not read
    # a record without a model: the model as validate takes it (calibration.sweep.stage_run), the Deployment's MODEL_ID
    # in the manifests beside it being skipped once the record states engine settings, so the client config's
    (tmp_path / "exp-config.yaml").write_text("tensor_parallelism: 2\n")
    md = read_run(tmp_path / "results" / "stage_0_lifecycle_metrics.json").metadata
    assert (md.model, md.num_gpus) == ("meta-llama/Meta-Llama-3-8B-Instruct", 2)
    # a record with a model and no engine setting: the engine's settings and GPU from the manifests
    (tmp_path / "exp-config.yaml").write_text("model: codellama/CodeLlama-34b-Instruct-hf\n")
    md = read_run(tmp_path / "results" / "stage_0_lifecycle_metrics.json").metadata
    assert (md.model, md.hardware, md.extra["max_num_seqs"]) == ("codellama/CodeLlama-34b-Instruct-hf",
                                                               "nvidia-h100-80gb", 192)


def test_latencies_are_seconds_even_though_the_docs_say_ms():
    agg = read_run(DATA / "stage_0_lifecycle_metrics.json")
    # time_to_first_token p99 0.04251505806925707: a 42.5 ms TTFT for Llama-3-8B on an H100 at 1 req/s
    # (read as ms it would be 42 µs, read ×1000 as s it would be 42 s)
    assert agg.metrics["ttft"].percentiles_s[99.0] == 0.04251505806925707
    assert agg.metrics["ttft"].percentiles_s[0.1] == 0.023218922580825165  # key "p0.1"
    assert agg.metrics["ttft"].percentiles_s[50.0] == 0.032918093027547  # key "median"
    # inter_token_latency pools every token gap (median 34 µs: several tokens per chunk) → "gap" weighting
    assert agg.metrics["itl"].weighting == "gap" and agg.metrics["tpot"].weighting == "request"
    # prompt_len.mean 200.68333 × 60 = 12041 input tokens
    assert agg.total_input_tokens == 12041


def _per_request(tmp_path: Path) -> Path:
    # Constructed from RequestLifecycleMetric (inference_perf/apis/base.py): the newer layout keeps token
    # times in info.response_metrics.{chunk_times, output_token_times}, the older one in info.output_token_times.
    new = {"stage_id": 0, "scheduled_time": 100.0, "start_time": 100.0, "end_time": 100.5, "request_data": "",
           "error": None,
           "info": {"request_metrics": {"text": {"input_tokens": 20}},
                    "response_metrics": {"output_tokens": 4, "chunk_times": [100.1, 100.2, 100.3, 100.45]}}}
    old = {"stage_id": 1, "scheduled_time": 101.0, "start_time": 101.0, "end_time": 101.4, "request_data": "",
           "error": None,
           "info": {"input_tokens": 30, "output_tokens": 2, "output_token_times": [101.2, 101.3]}}
    bad = {"stage_id": 1, "scheduled_time": 101.5, "start_time": 101.5, "end_time": 101.6, "request_data": "",
           "info": {"input_tokens": 30}, "error": {"error_type": "ClientError", "error_msg": "reset"}}
    p = tmp_path / "per_request_lifecycle_metrics.json"
    p.write_text(json.dumps([new, old, bad]))
    return p


def test_per_request_file_splits_stages_on_a_shared_clock(tmp_path):
    s0, s1 = read_runs(_per_request(tmp_path))
    assert (s0.metadata.extra["run_label"], s1.metadata.extra["run_label"]) == ("stage 0", "stage 1")
    (r,) = s0.records
    # TTFT = 100.1 − 100.0; E2E to the last token 100.45 − 100.0; TPOT = (100.45 − 100.1)/(4 − 1)
    assert (r.ttft_s, r.e2e_s, r.tpot_s) == pytest.approx((0.1, 0.45, 0.35 / 3))
    assert r.num_prompt_tokens == 20 and list(r.itls_s) == pytest.approx([0.1, 0.1, 0.15])
    old, bad = s1.records
    assert old.arrival_s == pytest.approx(1.0) and old.num_prompt_tokens == 30  # origin is the file's first start
    assert bad.error == "ClientError: reset"


def test_per_request_token_times_going_backwards(tmp_path):
    p = _per_request(tmp_path)
    doc = json.loads(p.read_text())
    doc[0]["info"]["response_metrics"]["chunk_times"] = [100.1, 100.05]
    p.write_text(json.dumps(doc))
    with pytest.raises(FormatError, match=r"\[0\]\.token_times\[1\] − start_time|go backwards"):
        read_runs(p)
    doc[0]["info"]["response_metrics"]["chunk_times"] = [99.0]
    p.write_text(json.dumps(doc))
    with pytest.raises(FormatError, match=r"\[0\]\.token_times\[0\] − start_time: negative latency"):
        read_runs(p)


def test_goodput_percentage_is_kept_with_its_successful_only_denominator(tmp_path):
    # Constructed from the lifecycle report's optional goodput_metrics block (docs/formats.md §6): inference-perf's
    # goodput_percentage divides by *successful* requests, so it is carried verbatim and labelled, never reused.
    doc = json.loads((DATA / "stage_0_lifecycle_metrics.json").read_text())
    doc["failures"]["count"] = 20
    doc["goodput_metrics"] = {"goodput_percentage": 90.0, "request_goodput": 0.9, "good_requests": 54,
                              "total_requests": 60}
    p = tmp_path / "stage_0_lifecycle_metrics.json"
    p.write_text(json.dumps(doc))
    agg = read_run(p)
    assert agg.tool_goodput["percentage_of_successful"] == 90.0 and agg.num_requests == 80


def test_goodput_view_says_an_inference_perf_slo_is_not_in_the_file(tmp_path):
    # inference-perf's goodput_metrics come with constraints kept in report.goodput, not in the lifecycle file: the
    # tool's figure is printed as "its SLO is not in the file" (it was "under the SLO the file states", read off the
    # slo text's first words, which for inference-perf are not "not stored")
    from typer.testing import CliRunner

    from kvledger.cli.main import app

    doc = json.loads((DATA / "stage_0_lifecycle_metrics.json").read_text())
    doc["goodput_metrics"] = {"goodput_percentage": 90.0, "request_goodput": 0.9, "good_requests": 54,
                              "total_requests": 60}
    p = tmp_path / "stage_0_lifecycle_metrics.json"
    p.write_text(json.dumps(doc))
    out = CliRunner().invoke(app, ["goodput", str(p), "--slo", "ttft=1s"], env={"COLUMNS": "200"}).output
    assert "tool-reported goodput (its SLO is not in the file)" in out and "the file states" not in out
