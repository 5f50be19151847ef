"""The web app's SGLang fields: ``mem_fraction_static`` (SGLang's; ``gpu_memory_utilization`` stays vLLM's, each
refused under the other engine with the CLI's message), and the parallelism fields ``data_parallel_size``,
``enable_dp_attention``, ``attn_dp_size``, ``ep_size`` and ``enable_expert_parallel`` (vLLM's
``--data-parallel-size``, SGLang's ``--dp-size``, ``--enable-dp-attention``, ``--attn-dp-size`` (0.5.22 on),
``--ep-size``, vLLM's ``--enable-expert-parallel``): planned as ``kvledger plan`` plans the flags, simulated as
``kvledger report`` simulates them, refused by the CLI's own checks in the app's words."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.errors import KvLedgerError
from kvledger.report.webapp import create_app
from kvledger.report.webapp_words import in_app_words

client = TestClient(create_app(), base_url="http://127.0.0.1")
MODEL = "meta-llama/Llama-3.1-8B"
PLAN = {"model": MODEL, "gpu": "H100", "engine": "sglang"}
SERVING = {**PLAN, "slo": "ttft=500ms,tpot=50ms", "api": "OpenAI:gpt-4.1-mini", "num_requests": 100,
           "monthly_tokens": 3e9}
# DeepSeek-V2-Lite (MLA, 64 routed experts) on 2 L40S, TP 2 = EP 2 = DP 2 (tests/cli/test_report_sglang_dp.py's case)
DP = {"model": "deepseek-ai/DeepSeek-V2-Lite", "gpu": "L40S", "engine": "sglang", "tp": 2, "ep_size": 2,
      "enable_dp_attention": True, "data_parallel_size": 2}
DP_FLAGS = ["deepseek-ai/DeepSeek-V2-Lite", "--gpu", "L40S", "--engine", "sglang", "--tp", "2", "--ep-size", "2",
            "--enable-dp-attention", "--dp-size", "2"]
# the same layout in SGLang 0.5.22+'s spelling: --attn-dp-size 2 is --enable-dp-attention --dp-size 2
ATTN = {k: v for k, v in DP.items() if k not in ("enable_dp_attention", "data_parallel_size")} | {"attn_dp_size": 2}


def _cli(*args: str) -> dict:
    res = CliRunner().invoke(app, list(args))
    assert res.exit_code == 0, res.output
    return json.loads(res.output)


def _cli_error(*args: str) -> str:
    """The message the CLI refuses ``args`` with (the KvLedgerError the console entry prints)."""
    res = CliRunner().invoke(app, list(args))
    assert isinstance(res.exception, KvLedgerError), res.output
    return str(res.exception)


def test_plan_takes_mem_fraction_static_as_plan_does():
    r = client.post("/api/plan", json={**PLAN, "mem_fraction_static": 0.22})
    assert r.status_code == 200, r.text
    m = r.json()["plan"]["memory"]
    c = _cli("plan", MODEL, "--gpu", "H100", "--engine", "sglang", "--mem-fraction-static", "0.22", "--json")["memory"]
    # 0.78 × the 84,578,056,273 B free before the load is SGLang's reserve; the 2,408,183,129 B left after the
    # weights hold 18,372 KV tokens at 131,072 B/token (tests/cli/test_report_sglang_fraction.py works it through)
    assert (m["fraction_name"], m["fraction"], m["pool_tokens"]) == ("mem_fraction_static", 0.22, 18_372)
    assert m["available_kv_bytes"] == c["available_kv_bytes"] == 2_408_183_129


def test_serving_runs_the_fraction_as_report_does():
    r = client.post("/api/serving", json={**SERVING, "mem_fraction_static": 0.22})
    assert r.status_code == 200, r.text
    sim = r.json()["cost"]["simulation"]
    # `kvledger report --engine sglang --mem-fraction-static 0.22` on these 100-request probes: 5.875 req/s on the
    # 18,372-token pool (17.75 at SGLang's default fraction), the simulator's pool 18,373 slots as the report's
    assert sim["capacity_search"]["slo_capacity_req_per_s"] == 5.875
    assert sim["engine"]["num_gpu_blocks"] == 18_373 and sim["plan"]["engine"] == "sglang"


def test_plan_takes_dp_attention_and_ep_as_plan_does():
    r = client.post("/api/plan", json=DP)
    assert r.status_code == 200, r.text
    plan, cli = r.json()["plan"], _cli("plan", *DP_FLAGS, "--json")
    # 21,981,134,187 B available per rank less MLA's w_kc/w_vc copies of all 16 heads at attention TP 1 (16 × 256 ×
    # 512 × 2 B × 27 layers = 113,246,208 B) = 21,867,887,979 B // 31,104 B per token (27 layers × (512 + 64) × 2 B,
    # MLA) = 703,057 tokens per rank, each rank its own pool: 2 × 703,057 = 1,406,114 in all
    assert plan["memory"]["available_kv_bytes"] == cli["memory"]["available_kv_bytes"] == 21_867_887_979
    assert plan["memory"]["num_gpu_blocks"] == cli["memory"]["num_gpu_blocks"] == 703_057
    same = {k: v for k, v in plan["data_parallel"].items() if k != "requests"}  # the rows: the app's contexts
    assert same == {k: v for k, v in cli["data_parallel"].items() if k != "requests"}
    assert plan["data_parallel"]["kv_tokens_total"] == 1_406_114
    # the DP line spells the flags as the newest SGLang read (0.5.23) takes them: --attn-dp-size from 0.5.22
    assert plan["data_parallel"]["flags"] == "--attn-dp-size 2"


def test_plan_takes_attn_dp_size_as_the_same_layout():
    r = client.post("/api/plan", json=ATTN)
    assert r.status_code == 200, r.text
    cli = _cli("plan", *DP_FLAGS[:-3], "--attn-dp-size", "2", "--json")
    plan, old = r.json()["plan"], client.post("/api/plan", json=DP).json()["plan"]
    # the plan of --enable-dp-attention --dp-size 2 above: 703,057 tokens per rank, 1,406,114 in all
    assert plan["memory"]["num_gpu_blocks"] == cli["memory"]["num_gpu_blocks"] == 703_057
    assert plan["data_parallel"] == old["data_parallel"]
    assert {k: v for k, v in plan["data_parallel"].items() if k != "requests"} == \
        {k: v for k, v in cli["data_parallel"].items() if k != "requests"}


@pytest.mark.parametrize("layout", [DP, ATTN], ids=["enable_dp_attention", "attn_dp_size"])
def test_serving_simulates_dp_attention_as_report_does(layout):
    body = {**layout, "prompt_lengths": "8192", "output_lengths": "1024", "num_requests": 100,
            "slo": "ttft=5s,tpot=200ms", "api": "DeepSeek:deepseek-chat"}
    r = client.post("/api/serving", json=body)
    assert r.status_code == 200, r.text
    # `kvledger report ... --enable-dp-attention --dp-size 2` on the same workload: 1.109375 req/s, from 1.0 at TP 2
    # alone (tests/cli/test_report_sglang_dp.py: each rank's own 703,057-token pool, 76 requests of 9,216 tokens)
    sim = r.json()["cost"]["simulation"]
    assert sim["capacity_search"]["slo_capacity_req_per_s"] == 1.109375
    assert sim["plan"]["num_gpu_blocks"] == 703_057


VLLM_DP = {"model": "deepseek-ai/DeepSeek-V3", "gpu": "H200", "tp": 1, "data_parallel_size": 8,
           "enable_expert_parallel": True}


def test_vllm_dp_ranks_of_a_moe_model_as_plan_and_report_take_them():
    r = client.post("/api/plan", json=VLLM_DP)
    assert r.status_code == 200, r.text
    cli = _cli("plan", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--tp", "1", "--data-parallel-size", "8",
               "--enable-expert-parallel", "--json")
    dp = r.json()["plan"]["data_parallel"]
    assert {k: v for k, v in dp.items() if k != "requests"} == \
        {k: v for k, v in cli["data_parallel"].items() if k != "requests"}
    assert dp["flags"] == "--data-parallel-size 8 --enable-expert-parallel" and dp["gpus"] == 8
    r = client.post("/api/serving", json={**VLLM_DP, "slo": "ttft=2s,tpot=100ms", "num_requests": 50,
                                          "gpu_provider": "CoreWeave"})
    assert r.status_code == 200, r.text
    # `kvledger report deepseek-ai/DeepSeek-V3 --gpu H200 --tp 1 -dp 8 --enable-expert-parallel` on 50-request probes
    # (tests/cli/test_report_dp.py): 4.8125 req/s on DP 8 × TP 1 = 8 GPUs
    sim = r.json()["cost"]["simulation"]
    assert (sim["capacity_search"]["slo_capacity_req_per_s"], sim["num_gpus"]) == (4.8125, 8)
    # without it the plan refuses the MoE model's DP ranks, in plan's words
    r = client.post("/api/plan", json={**VLLM_DP, "enable_expert_parallel": False})
    assert r.status_code == 400 and r.json()["error"].startswith(
        "data_parallel_size 8 for the MoE model deepseek-ai/DeepSeek-V3 without enable_expert_parallel"), r.text


_REFUSED = [  # (the request's fields, the same inputs as CLI flags)
    ({"engine": "vllm", "mem_fraction_static": 0.5}, ["--mem-fraction-static", "0.5"]),
    ({"gpu_memory_utilization": 0.5}, ["--engine", "sglang", "--gpu-memory-utilization", "0.5"]),
    ({"mem_fraction_static": 1.5}, ["--engine", "sglang", "--mem-fraction-static", "1.5"]),
    ({"ep_size": 2, "tp": 2}, ["--engine", "sglang", "--ep-size", "2", "--tp", "2"]),
    ({"data_parallel_size": 0}, ["--data-parallel-size", "0"]),
]
_ATTN_REFUSED = [  # --attn-dp-size under vLLM, before SGLang 0.5.22, beside a second DP size (attn_dp.py's check)
    ({"engine": "vllm", "attn_dp_size": 2, "tp": 2}, ["--attn-dp-size", "2", "--tp", "2"]),
    ({"engine_version": "0.5.21", "attn_dp_size": 2, "tp": 2},
     ["--engine", "sglang", "--engine-version", "0.5.21", "--attn-dp-size", "2", "--tp", "2"]),
    ({"attn_dp_size": 2, "data_parallel_size": 2, "tp": 2},
     ["--engine", "sglang", "--attn-dp-size", "2", "--dp-size", "2", "--tp", "2"]),
]


@pytest.mark.parametrize(("fields", "flags"), _REFUSED + _ATTN_REFUSED)
def test_the_plan_refuses_with_plans_message_in_the_apps_words(fields, flags):
    r = client.post("/api/plan", json={**PLAN, **fields})
    said = _cli_error("plan", MODEL, "--gpu", "H100", *flags)
    assert r.status_code == 400 and r.json()["error"] == in_app_words(said), r.text


@pytest.mark.parametrize(("fields", "flags"), [
    *_REFUSED[:4],
    ({"enable_dp_attention": True, "tp": 2}, ["--engine", "sglang", "--enable-dp-attention", "--tp", "2"]),
    *_ATTN_REFUSED,
])
def test_serving_refuses_with_reports_message_in_the_apps_words(fields, flags):
    r = client.post("/api/serving", json={**SERVING, **fields})
    said = _cli_error("report", MODEL, "--gpu", "H100", "--slo", "ttft=500ms,tpot=50ms", "--api",
                      "OpenAI:gpt-4.1-mini", "--num-requests", "100", "--json", *flags)
    assert r.status_code == 400 and r.json()["error"] == in_app_words(said), r.text
    assert not any(f in r.json()["error"] for f in ("--mem-fraction-static", "--enable-dp-attention", "--attn-dp-size"))


def test_attn_dp_size_refusals_name_the_apps_fields():
    said = {k: client.post("/api/plan", json={**PLAN, **f}).json()["error"] for k, (f, _) in
            zip(("vllm", "0.5.21", "two sizes"), _ATTN_REFUSED, strict=True)}
    # accounting/attn_dp.resolve_attn_dp_size's three refusals, the flags as the request's fields
    assert said["vllm"].startswith("attn_dp_size 2 is SGLang's attention DP size; vLLM's DP ranks are "
                                   "data_parallel_size N"), said
    assert said["0.5.21"].startswith("attn_dp_size 2: SGLang 0.5.21 has no such flag (it came in 0.5.22)"), said
    assert said["two sizes"].startswith("attn_dp_size 2 with data_parallel_size 2: two attention DP sizes"), said
