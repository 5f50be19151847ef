"""``kvledger search --engine sglang``: every candidate planned with SGLang's memory plan (the one ``plan --engine
sglang`` prints), simulated with SGLang's scheduler (the capacity ``cost --simulate --engine sglang`` finds), its axes
SGLang's knobs and its launch line SGLang's; vLLM-only flags refused (exit 2)."""

from __future__ import annotations

import json

import pytest
from cli_run import cli_json, refused

# Llama-3.2-3B on one L4, TP 1, 8K context, 60 requests of the default trace: two candidates (KV auto and fp8_e4m3)
BASE = ("search", "meta-llama/Llama-3.2-3B", "--slo", "ttft=2s,tpot=100ms", "--gpus", "L4", "--tp", "1",
        "--max-model-len", "8K", "--num-requests", "60", "--rate", "5", "--engine", "sglang",
        "--max-running-requests", "32", "--chunked-prefill-size", "2048")


@pytest.fixture(scope="module")
def sg() -> dict:
    return cli_json(*BASE, "--kv-cache-dtype", "auto,fp8_e4m3")


def _entry(d: dict, cid: str) -> dict:
    return next(c for c in d["candidates"] if c["id"] == cid)


def test_winner_is_planned_launched_and_checked_as_sglang(sg):
    # `kvledger plan meta-llama/Llama-3.2-3B --gpu L4 --engine sglang --tp-size 1 --context-length 8192
    # --kv-cache-dtype fp8_e4m3 --max-running-requests 32 --chunked-prefill-size 2048` (SGLang 0.5.23 rules): the
    # fraction SGLang computes is 0.821; KV 2 (K,V) × 28 layers × 8 KV heads × 128 head_dim × 1 B = 57,344 B/token;
    # available KV 12,507,213,536 B → floor(12,507,213,536 ÷ 57,344) = 218,108 pages of 1 token. At KV auto (2 B):
    # 114,688 B/token, 109,054 tokens (half, as the bytes per token double).
    w = sg["winner"]
    assert w["id"] == "nvidia_l4:tp1:kv-fp8_e4m3:seqs-32:mnbt-2048" and sg["spec"]["engine"] == "sglang"
    p = _entry(sg, w["id"])["plan"]
    assert (p["engine"], p["mem_fraction_static"], p["num_gpu_blocks"], p["block_size"]) == ("sglang", 0.821, 218108, 1)
    assert p["kv_bytes_per_token_per_gpu"] == 57344 and "gpu_memory_utilization" not in p
    assert p["source"] == "kvledger.accounting.plan.build_plan (SGLang memory rules)"
    other = next(c for c in sg["candidates"] if c["kv_cache_dtype"] == "auto")
    assert other["plan"]["num_gpu_blocks"] == 109054
    assert w["launch"]["sglang"] == (
        "python -m sglang.launch_server --model-path meta-llama/Llama-3.2-3B --tp-size 1 --context-length 8192 "
        "--mem-fraction-static 0.821 --kv-cache-dtype fp8_e4m3 --max-running-requests 32 --chunked-prefill-size 2048 "
        "--page-size 1")
    assert "vllm" not in w["launch"]  # vLLM's engine was not simulated
    assert "218,108 KV tokens per GPU (mem_fraction_static 0.821" in w["launch"]["note"]


def test_check_line_replans_the_same_pool(sg):
    # the winner's check line, run: plan --engine sglang with the fraction the search planned gives its 218,108 pages
    argv = sg["winner"]["launch"]["check"].split()[1:]
    d = cli_json(*argv)
    m = d["memory"]
    assert (m["fraction_name"], m["fraction"], m["num_gpu_blocks"], m["block_size"]) == (
        "mem_fraction_static", 0.821, 218108, 1)
    assert m["available_kv_bytes"] == 12507213536 and 218108 * 57344 <= 12507213536 < 218109 * 57344


def test_capacity_is_cost_simulate_sglang_s(sg):
    # the same capacity search cost --simulate --engine sglang runs: 3.90625 req/s for the fp8 winner (bisection on
    # request_rate, resolution 1/64 of the bracket), 3.59375 for KV auto
    cost = cli_json("cost", "--simulate", "meta-llama/Llama-3.2-3B", "--gpu", "L4", "--engine", "sglang",
                    "--max-model-len", "8K", "--num-requests", "60", "--slo", "ttft=2s,tpot=100ms", "--target", "0.9",
                    "--kv-cache-dtype", "fp8_e4m3", "--max-running-requests", "32", "--chunked-prefill-size", "2048")
    win = _entry(sg, sg["winner"]["id"])["capacity"]["slo_capacity_req_per_s"]
    assert cost["capacity"]["slo_capacity_req_per_s"] == win == 3.90625
    other = next(c for c in sg["candidates"] if c["kv_cache_dtype"] == "auto")
    assert other["capacity"]["slo_capacity_req_per_s"] == 3.59375


def test_vllm_only_flags_are_refused_together():
    msg = refused(*BASE, "--gpu-memory-utilization", "0.9", "--quantization", "fp8", "--disagg")
    assert msg.startswith("search --engine sglang plans and simulates SGLang, so it refuses vLLM's flags: "
                          "--gpu-memory-utilization is vLLM's (SGLang's pool is sized by mem_fraction_static, computed "
                          "as SGLang computes its default); --quantization is vLLM's (SGLang's online quantization is "
                          "not modelled); --disagg is vLLM's")
    assert msg.endswith("; drop them, or search vLLM (--engine vllm, the default)")
    for extra in (["--enable-expert-parallel"], ["--offload", "cpu:64GiB"], ["--mamba-ssm-cache-dtype", "float32"],
                  ["--data-parallel-size", "2"], ["--all2all-backend", "naive"]):
        assert f"{extra[0]}" in refused(*BASE, *extra)


def test_exit_status_and_engine_word(cli_entry):
    code, out, _ = cli_entry(*BASE, "--quantization", "fp8", "--json")
    assert code == 2 and "refuses vLLM's flags: --quantization" in json.loads(out)["error"]["message"]
    # SGLang's release: an FP8 KV name it lacks (fp8_inc, vLLM's Intel one) is refused in SGLang's words
    assert "fp8_inc" in refused(*BASE, "--kv-cache-dtype", "fp8_inc")


def test_default_engine_ledger_has_no_engine_key():
    d = cli_json(*BASE[:-6], "--max-num-seqs", "32", "--engine", "vllm")
    assert "engine" not in d["spec"] and "gpu_memory_utilization" in _entry(d, d["winner"]["id"])["plan"]
    assert d["winner"]["launch"]["vllm"].startswith("vllm serve meta-llama/Llama-3.2-3B --tensor-parallel-size 1")
