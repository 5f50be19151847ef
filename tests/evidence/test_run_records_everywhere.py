"""What a run's own file records is read wherever runs are: a vLLM result's ``--metadata`` launch keys (TP,
max_num_seqs, max_num_batched_tokens, the vLLM version) as its launch record, an SGLang server_info's version as the
engine version, the GPU as part of the deployment a sweep must share, and LLMServingSim's requests and workloads by
goodput and simulate --trace."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest

from kvledger.calibration.run_record import recorded_settings
from kvledger.dynamics.workload.trace_formats import read_trace_file
from kvledger.errors import InputError
from kvledger.evidence.deployment import launch_record, refuse_mixed_sweep
from kvledger.evidence.read import read_run
from kvledger.records import RunMetadata


def vllm_result(**over) -> dict:
    """An aggregate ``vllm bench serve`` result; ``--metadata`` pairs arrive as strings, as vLLM writes them."""
    return {"backend": "vllm", "model_id": "meta-llama/Llama-3.1-8B", "num_prompts": 10, "request_rate": 10.0,
            "duration": 2.0, "completed": 10, "failed": 0, "request_throughput": 5.0, "mean_ttft_ms": 50.0,
            "mean_tpot_ms": 20.0} | over


def write(tmp_path: Path, doc: dict, name: str = "run.json") -> Path:
    p = tmp_path / name
    p.write_text(json.dumps(doc))
    return p


def test_vllm_metadata_keys_are_the_runs_launch_record(tmp_path):
    doc = vllm_result(tensor_parallel_size="2", max_num_seqs="128", max_num_batched_tokens=2048, vllm_version="0.19.0",
                      gpu="H100", num_gpu_blocks=None, my_label="a")
    run = read_run(write(tmp_path, doc))
    extra = run.metadata.extra
    assert extra["engine_kwargs"] == {"tensor_parallel_size": 2, "max_num_seqs": 128, "max_num_batched_tokens": 2048,
                                      "my_label": "a"}
    assert extra["vllm_version"] == "0.19.0" and extra["record_file"].endswith("(vllm bench serve --metadata)")
    rec = recorded_settings(extra)
    assert rec.flags == {"tp": 2, "max_num_seqs": 128, "max_num_batched_tokens": 2048}
    assert rec.engine_version == "0.19.0"
    assert rec.unapplied == ["--my-label a"]  # present, not used: named in validate's warning
    # the settings, not the file name, are the launch record a sweep's runs must share
    assert launch_record(run.metadata) == ("the settings [('max_num_batched_tokens', 2048), ('max_num_seqs', 128), "
                                           "('my_label', 'a'), ('tensor_parallel_size', 2)] (the result's top-level "
                                           "keys)")


def test_short_tp_spelling_is_the_tensor_parallel_size(tmp_path):
    run = read_run(write(tmp_path, vllm_result(tp=4)))
    assert run.metadata.extra["engine_kwargs"] == {"tensor_parallel_size": 4}


def test_an_sglang_runs_version_is_its_server_infos_not_a_vllm_version_beside_it():
    extra = {"backend": "sglang", "vllm_version": "0.19.0", "sglang_version": "0.5.3",
             "engine_kwargs": {"tensor_parallel_size": 2}}
    rec = recorded_settings(extra)
    assert rec.engine_version == "0.5.3" and rec.flags["policy"] == "sglang"


def meta(gpu: str | None, n: int | None = None) -> SimpleNamespace:
    return SimpleNamespace(metadata=RunMetadata(f"/r/{gpu}-{n}.json", "vllm-bench-serve", model="m", hardware=gpu,
                                                num_gpus=n))


def test_a_sweep_over_two_gpus_is_refused_naming_each_group():
    with pytest.raises(InputError) as err:
        refuse_mixed_sweep([meta("RTX PRO 6000"), meta("RTX 4090")], "--target finds the SLO boundary")
    msg = str(err.value)
    assert "ran on different GPUs" in msg and "NVIDIA GeForce RTX 4090: RTX 4090-None.json" in msg


def test_one_gpu_under_two_spellings_is_one_deployment():
    refuse_mixed_sweep([meta("H100"), meta("h100-sxm"), meta(None)], "--target finds the SLO boundary")


def test_gpu_counts_differ_only_where_every_run_states_one():
    refuse_mixed_sweep([meta("H100", 1), meta("H100")], "x")
    with pytest.raises(InputError, match="H100 80GB SXM5 × 2"):
        refuse_mixed_sweep([meta("H100", 1), meta("H100", 2)], "x")


def test_llmservingsim_requests_are_read_as_a_run(tmp_path):
    rows = [{"request_id": "a", "input_toks": 100, "output_toks": 11, "queued_ts": 50.0, "first_token_ts": 50.2,
             "last_token_ts": 51.2},
            {"request_id": "b", "input_toks": 200, "output_toks": 3, "queued_ts": 50.5, "first_token_ts": 50.9,
             "last_token_ts": 51.0}]
    p = tmp_path / "requests.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    run = read_run(p)
    assert run.metadata.source_format == "llmservingsim-vllm"
    # times from the first queued_ts: b arrives at 0.5 s, its TTFT 0.4 s; a's TPOT (51.2 − 50.2)/(11 − 1) = 0.1 s
    assert [r.request_id for r in run.records] == ["a", "b"]
    assert run.records[1].ttft_s == pytest.approx(0.4) and run.records[0].tpot_s == pytest.approx(0.1)


def test_llmservingsim_workload_is_a_trace_with_arrivals_in_ns(tmp_path):
    rows = [{"input_toks": 100, "output_toks": 10, "arrival_time_ns": 46_926_808, "input_tok_ids": [1, 2]},
            {"input_toks": 300, "output_toks": 30, "arrival_time_ns": 546_926_808, "input_tok_ids": [3]}]
    p = tmp_path / "sharegpt.jsonl"
    p.write_text("".join(json.dumps(r) + "\n" for r in rows))
    t = read_trace_file(p)
    # (546,926,808 − 46,926,808) ns = 0.5 s
    assert t.layout == "llmservingsim" and list(t.arrivals_s) == pytest.approx([0.0, 0.5])
    assert list(t.prompt_tokens) == [100, 300] and list(t.output_tokens) == [10, 30]


def test_a_trace_with_a_byte_order_mark_is_read(tmp_path):
    p = tmp_path / "bom.jsonl"
    p.write_text("\ufeff" + json.dumps({"arrival_s": 0.0, "num_prompt_tokens": 5, "num_output_tokens": 2}) + "\n"
                 + json.dumps({"arrival_s": 1.5, "num_prompt_tokens": 7, "num_output_tokens": 3}) + "\n",
                 encoding="utf-8")
    t = read_trace_file(p)
    assert t.layout == "kvledger" and list(t.arrivals_s) == [0.0, 1.5] and list(t.prompt_tokens) == [5, 7]
