"""``kvledger.goodput`` takes the workload and engine settings ``kvledger goodput --simulate`` takes (and
``kvledger.simulate`` and ``kvledger.cost`` already took): ``kv_cache_dtype``, ``gpu_memory_utilization``,
``max_num_seqs`` and the rest, by the same names, each result equal to the command's ``--json``."""

from __future__ import annotations

import json

import pytest
from api_cli_json import in_call_terms

import kvledger
from kvledger import strict_json

L8 = "meta-llama/Llama-3.1-8B"
WORK = dict(prompt_lengths="fixed:512", output_lengths="fixed:64", rate=5.0, num_requests=60)
WORK_FLAGS = ["--prompt-lengths", "fixed:512", "--output-lengths", "fixed:64", "--rate", "5", "--num-requests", "60"]


def _cli_json(*argv: str) -> dict:
    from typer.testing import CliRunner

    from kvledger.cli.main import app

    r = CliRunner().invoke(app, [*argv, "--json"], env={"KVLEDGER_NO_CACHE": "1"})
    assert r.exit_code == 0, r.stdout
    return in_call_terms(json.loads(r.stdout), argv[0])  # its notes name the call's parameters


def test_fp8_kv_doubles_the_pool_and_matches_the_command():
    # vLLM 0.33 on one H100 keeps 59,056,859,546 B for KV (kvledger plan); a 16-token block of Llama-3.1-8B is
    # 16 × 131,072 B = 2,097,152 B in bf16 → 28,160 blocks, and 16 × 65,536 B = 1,048,576 B in fp8 →
    # floor(59,056,859,546 / 1,048,576) = floor(56,321.4) = 56,321 blocks
    g = kvledger.goodput(L8, "H100", slo="ttft=200ms,tpot=50ms", kv_cache_dtype="fp8", cache=False, **WORK)
    plan = g.to_dict()["simulation"]["plan"]
    assert plan["available_kv_bytes"] == 59_056_859_546 and plan["num_gpu_blocks"] == 56_321
    assert plan["kv_bytes_per_token_per_gpu"] == 65_536
    doc = _cli_json("goodput", "--simulate", L8, "--gpu", "H100", "--slo", "ttft=200ms,tpot=50ms",
                    "--kv-cache-dtype", "fp8", *WORK_FLAGS)
    assert json.loads(strict_json.dumps(g.to_dict())) == doc


def test_engine_limits_reach_the_simulated_plan():
    # gpu_memory_utilization 0.5 with max_num_seqs 64 (a smaller sampler warm-up) leaves 24,680,639,693 B for KV
    # (kvledger plan … --gpu-memory-utilization 0.5 --max-num-seqs 64):
    # floor(24,680,639,693 / 2,097,152) = floor(11,768.7) = 11,768 blocks; max_num_seqs is the engine's cap as given
    g = kvledger.goodput(L8, "H100", slo="ttft=200ms,tpot=50ms", gpu_memory_utilization=0.5, max_num_seqs=64,
                         cache=False, **WORK).to_dict()
    assert g["simulation"]["plan"]["num_gpu_blocks"] == 11_768 and g["simulation"]["plan"]["max_num_seqs"] == 64
    assert g["simulation"]["engine"]["max_num_seqs"] == 64


def test_a_setting_out_of_range_names_the_parameter():
    with pytest.raises(kvledger.InputError, match=r"^kvledger\.goodput: gpu_memory_utilization 1\.5 is out of range"):
        kvledger.goodput(L8, "H100", slo="ttft=200ms", gpu_memory_utilization=1.5, cache=False, **WORK)
