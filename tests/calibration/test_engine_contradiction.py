"""A file from another engine or client than the command names is said, not replayed silently: --engine against the
benchmark file's backend warns (the replay runs another scheduler than the one measured), --format of one
bench_serving client for a file the other wrote is refused (its figures would be misread).

The SGLang file is the synthetic fixture (tests/fixtures/sglang_synthetic/README.md); the vLLM file is the same first
line rewritten with `vllm bench serve`'s keys (synthetic too)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvledger.analyses.serving.sim_setup import SimRequestArgs
from kvledger.calibration.targets import load_targets
from kvledger.calibration.validate import validate_file
from kvledger.errors import FormatError
from kvledger.evidence import read_runs

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "sglang_synthetic" / "llama8b_tp2_rates.jsonl"
ARGS = SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="H100", tp=None)


def _vllm_file(tmp_path: Path) -> str:
    line = json.loads(FIXTURE.read_text().splitlines()[0])
    keep = ("request_rate", "max_concurrency", "duration", "completed", "total_input_tokens", "total_output_tokens",
            "request_throughput", "output_throughput", "input_lens", "output_lens", "ttfts", "itls", "errors")
    d = {"date": "20261201-101500", "endpoint_type": "openai", "backend": "vllm", "model_id": "meta-llama/Llama-3.1-8B",
         "tokenizer_id": "meta-llama/Llama-3.1-8B", "num_prompts": 16, "failed": 0, "tensor_parallel_size": "2",
         **{k: line[k] for k in keep}, "mean_ttft_ms": line["mean_ttft_ms"], "mean_tpot_ms": line["mean_tpot_ms"],
         "mean_itl_ms": line["mean_itl_ms"], "mean_e2el_ms": line["mean_e2e_latency_ms"]}
    f = tmp_path / "vllm.json"
    f.write_text(json.dumps(d))
    return str(f)


def test_an_engine_against_the_files_backend_is_a_warning(tmp_path):
    vllm = _vllm_file(tmp_path)
    out = validate_file(vllm, SimRequestArgs(model=None, gpu="H100", tp=None, policy="sglang"))
    said = [n for n in out.notes if n.startswith("WARNING: --engine sglang")]
    assert said == [f"WARNING: --engine sglang replays the run with SGLang's scheduler and memory plan, but {vllm} "
                    "names vLLM as the server it measured (backend \"vllm\"): the errors are those of another engine "
                    "than the one that ran; drop --engine to replay the engine the file names"]
    # the engine the file names, or none given: nothing said
    for policy in ("vllm", None):
        out = validate_file(vllm, SimRequestArgs(model=None, gpu="H100", tp=None, policy=policy))
        assert not any(n.startswith("WARNING: --engine") for n in out.notes)
    (t,) = [t for t in load_targets(str(FIXTURE)) if t.order == 0]
    assert t.run.measured.metadata.extra["backend"] == "sglang"


def test_a_format_of_the_other_bench_serving_client_is_refused(tmp_path):
    vllm = _vllm_file(tmp_path)
    with pytest.raises(FormatError, match=r"--format sglang-bench-serving reads SGLang's bench_serving results, but "
                                          r"this file holds the keys of vLLM's `vllm bench serve`.*give --format "
                                          r"vllm-bench-serve, or leave --format out"):
        read_runs(vllm, format="sglang-bench-serving")
    with pytest.raises(FormatError, match=r"--format vllm-bench-serve reads vLLM's `vllm bench serve` results, but "
                                          r"this file holds the keys of SGLang's bench_serving"):
        read_runs(FIXTURE, format="vllm-bench-serve")
    # each read under its own client's format: 16 requests either way
    assert len(read_runs(vllm, format="vllm-bench-serve")[0].records) == 16
    assert [len(r.records) for r in read_runs(FIXTURE, format="sglang-bench-serving")] == [16, 16, 16]


def test_engine_vllm_on_an_sglang_run_warns_and_leaves_sglangs_own_settings(tmp_path):
    # the record's mem_fraction_static 0.88 and max_total_num_tokens are SGLang's memory plan's: under --engine vllm
    # they are not taken (vLLM's plan would refuse the fraction as a flag the user never gave), and the engine is said
    one = validate_file(str(FIXTURE), SimRequestArgs(model=None, gpu="H100", tp=None, policy="vllm"), run=0)
    assert any(n.startswith("WARNING: --engine vllm replays the run with vLLM's scheduler and memory plan, but "
                            f"{FIXTURE} names SGLang as the server it measured") for n in one.notes)
    rec = next(n for n in one.notes if n.startswith("from the run's own record"))
    assert "tp 2" in rec and "mem_fraction_static" not in rec and "max_total_num_tokens" not in rec
