"""The engine a Kubernetes Deployment launched, read from the manifests.yaml beside an inference-perf run (fresh-user
trial: kubecon's stages were replayed under vLLM 0.33 defaults — max_num_seqs 1,024, prefix caching on — though the
manifests one folder up launch v0.11.0 with --max-num-seqs=128 --no-enable-prefix-caching: saturation throughput
+305%; with the manifests read, the knee and the saturation throughput below)."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kvledger.evidence.k8s_manifests import deployment_facts, engine_kwargs, manifest_facts

KUBECON = Path(__file__).resolve().parents[3] / "shared" / "data" / "measured-runs" / "inference-perf-kubecon-na-2025"
DEPLOYMENT = """
kind: Deployment
spec:
  replicas: 2
  template:
    spec:
      nodeSelector: {cloud.google.com/gke-accelerator: nvidia-h100-80gb}
      containers:
      - image: vllm/vllm-openai:v0.11.0
        args: ["--model=$(MODEL_ID)", "--gpu_memory_utilization=0.9", "--max-model-len=512", "--max-num-seqs=128",
               "--no-enable-prefix-caching", "--enable-chunked-prefill", "--tensor-parallel-size", "2",
               "--block-size=x"]
        env: [{name: MODEL_ID, value: meta-llama/Llama-3.1-8B-Instruct}]
        resources: {limits: {nvidia.com/gpu: "2"}}
---
kind: Service
"""


def test_a_deployments_flags_image_and_gpus_are_read_as_vllm_reads_them():
    facts = deployment_facts(list(yaml.safe_load_all(DEPLOYMENT)))
    # "--tensor-parallel-size 2" (value as the next argument), "_" as "-", --no-… off, a shell reference and an
    # unreadable value left out; 2 GPUs × 2 replicas
    assert facts["engine_kwargs"] == {"gpu_memory_utilization": 0.9, "max_model_len": 512, "max_num_seqs": 128,
                                      "enable_prefix_caching": False, "enable_chunked_prefill": True,
                                      "tensor_parallel_size": 2}
    assert (facts["vllm_version"], facts["accelerator"], facts["num_gpus"]) == ("0.11.0", "nvidia-h100-80gb", 4)
    assert facts["deployed_model"] == "meta-llama/Llama-3.1-8B-Instruct"
    assert engine_kwargs(["-tp", "4", "--max_num_batched_tokens=8192"]) == {"tensor_parallel_size": 4,
                                                                            "max_num_batched_tokens": 8192}
    v0 = DEPLOYMENT.replace("env: [", 'env: [{name: VLLM_USE_V1, value: "0"}, ')  # kubecon's vllm+v0_engine
    assert deployment_facts(list(yaml.safe_load_all(v0)))["engine_kwargs"]["batching"] == "vllm_v0"


def test_an_argument_holding_a_space_is_a_positional_as_argparse_reads_it():
    # Kubernetes passes each args entry unsplit; argparse takes "--quantization bitsandbytes" (no "=") as a
    # positional, "--quantization=bits and bytes" as the flag with that value; the module the command runs is kept
    # only where such a positional needs it (run_record says what that vLLM did with it)
    spaced = DEPLOYMENT.replace('"--block-size=x"]', '"--block-size=x", "--quantization bitsandbytes", '
                                '"--served-model-name=a b"]\n        command: [python3, "-m", '
                                'vllm.entrypoints.openai.api_server]')
    kw = deployment_facts(list(yaml.safe_load_all(spaced)))["engine_kwargs"]
    assert kw["positional_args"] == ["--quantization bitsandbytes"]
    assert kw["entrypoint"] == "vllm.entrypoints.openai.api_server"
    assert kw["other_flags"] == {"served_model_name": "a b"} and "quantization" not in kw
    assert "entrypoint" not in deployment_facts(list(yaml.safe_load_all(DEPLOYMENT)))["engine_kwargs"]
    # a trailing space is a space too: argparse takes "--enable-prefix-caching " as a positional, never the flag
    assert engine_kwargs(["--enable-prefix-caching "]) == {"positional_args": ["--enable-prefix-caching "]}
    serve = DEPLOYMENT.replace('args: ["--model=$(MODEL_ID)",', 'command: [/usr/bin/vllm]\n        args: [serve, '
                               '"--quantization bitsandbytes",')
    assert deployment_facts(list(yaml.safe_load_all(serve)))["engine_kwargs"]["entrypoint"] == "vllm serve"


def test_the_manifests_one_folder_above_the_results_are_found(tmp_path):
    (tmp_path / "results").mkdir()
    stage = tmp_path / "results" / "stage_0_lifecycle_metrics.json"
    stage.write_text("{}")
    assert manifest_facts(stage) == (None, {})
    (tmp_path / "manifests.yaml").write_text(DEPLOYMENT)
    where, facts = manifest_facts(stage)
    assert where == (tmp_path / "manifests.yaml").resolve() and facts["engine_kwargs"]["max_num_seqs"] == 128


@pytest.mark.skipif(not KUBECON.is_dir(), reason="../shared/data/measured-runs not beside the clone")
def test_validate_replays_kubecons_stages_with_the_deployments_flags():
    # measured knee 93.44 req/s; simulated with the manifests' flags 93.53 (was: none in the sweep), saturation
    # throughput 101.09 against 103.08 measured (−1.9%; was 417.64, +305%, before the manifests were read, and 110.16,
    # +6.9%, priced flat) — uncalibrated roofline with the H100's measured matmul curve and layer kernels; the stages
    # whose client fell behind replayed paced under its 440 slots
    from typer.testing import CliRunner

    from kvledger.cli.main import app

    stages = sorted(str(p) for p in (KUBECON / "vllm" / "results").glob("stage_*_lifecycle_metrics.json"))
    res = CliRunner().invoke(app, ["validate", *stages, "--sweep", "--gpu", "H100", "--model",
                                   "meta-llama/Llama-3.1-8B"], env={"COLUMNS": "250"})
    text = " ".join(res.output.split())
    assert res.exit_code == 0, res.output
    assert ("vllm/manifests.yaml): max_num_seqs 128, enable_chunked_prefill False, enable_prefix_caching False, "
            "gpu_memory_utilization 0.9, max_model_len 512, engine_version 0.11.0") in text
    assert "measured 93.44 req/s, simulated 93.53 req/s" in text and "simulated 101.09 req/s (80% band" in text
    assert "uncalibrated roofline) ✓ (the measured figure lies inside its band), error -1.9%" in text
