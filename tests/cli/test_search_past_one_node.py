"""search's rejections of a TP group past one node: the remedy it names must be one that prices it."""

from __future__ import annotations

import json

from cli_run import run_cli

ARGS = ("search", "meta-llama/Llama-3.1-405B-Instruct", "--gpu", "H100", "--tp", "16", "--max-model-len", "32K",
        "--slo", "ttft=2s,tpot=60ms", "--rate", "1", "--workers", "1")


def test_tp16_on_h100_names_gpu_usd_per_hour_not_another_provider():
    # TP 16 on 8-GPU HGX boards spans 2 nodes; every H100 row sells at most 8 GPUs an instance (p5.48xlarge,
    # a3-highgpu-8g, ND96isr, CoreWeave, Lambda, Nebius 8gpu) or one GPU (p5.4xlarge, the 1x VMs, RunPod's pod), so no
    # --gpu-provider holds it: the old hint sent the user to "another --gpu-provider with multi-GPU instances"
    res = run_cli(*ARGS)
    assert res.exit_code == 1  # no candidate run against the SLO
    line = next(x for x in res.stdout.splitlines() if x.startswith("rejected:"))
    assert "1 past one node (over 8 GPUs" in line and "only --gpu-usd-per-hour" in line
    assert "another --gpu-provider" not in line


def test_the_rows_listed_count_one_gpu_in_the_singular():
    # the detail lists each row's GPUs an instance: AWS p5.4xlarge sells 1 H100 ("1 GPUs" before), p5.48xlarge 8
    res = run_cli(*ARGS, "--json")
    doc = json.loads(res.stdout)
    detail = next(c["detail"] for c in doc["candidates"] if c["id"] == "nvidia_h100_sxm:tp16:kv-auto")
    assert "AWS:p5.4xlarge (1 GPU);" in detail and "AWS:p5.48xlarge (8 GPUs);" in detail and "1 GPUs" not in detail


def test_pp_refusal_names_the_same_gpus_as_one_tp_group():
    # cost --simulate refuses --pp 4 with vLLM 0.19's async scheduling (P − 1 batches scheduled ahead, not modelled);
    # the layout on the same GPUs it does simulate is one TP group of --tp × 4 across the nodes (the refusal said only
    # "--tp" before)
    from cli_run import refused

    msg = refused("cost", "--simulate", "meta-llama/Llama-3.1-405B-Instruct", "--gpu", "H100", "--tp", "8", "--pp", "4",
                  "--slo", "ttft=2s,tpot=60ms", "--engine-version", "0.19.0")
    assert "--pp 4 with async scheduling" in msg and "the same GPUs (--tp × 4" in msg
