"""--wddm beyond ``plan``: every command that plans a pool for the simulator plans it as ``plan --wddm`` does (the
same block count), carries the vLLM start-up sentence where it shows the plan, and refuses a server-module GPU with
``plan``'s one-line error.

The figures: Llama-3.1-8B on an RTX 5090 at max_model_len 8192, vLLM 0.33.0 rules (``plan --wddm --json``). Under
WDDM CUDA reports the whole board, nvidia-smi's 32,607 MiB = 34,190,917,632 B (Linux: 33,719,058,432 B);
ceil(× 0.92) = 31,455,644,222 B, less weights 16,094,076,928, activation peak 617,347,891 (its Triton top-k/top-p
buffer 170 SMs × 128,256 × 4 B), non-torch 268,435,456 and CUDA graphs 780,140,544 B = 13,695,643,403 B for KV;
÷ 2,097,152 B per block (16 tokens × 131,072 B) = 6,530.5 → 6,530 blocks (the Linux total gives 6,323). vLLM
0.33.0 does not count the driver's hold (it checks free memory at start-up instead), so the pool is larger and the
plan warns that 0.92 may not start.
"""

from __future__ import annotations

import json

from cli_run import MODEL, cli_json, refused, run_cli

RTX = ("--gpu", "rtx5090", "--max-model-len", "8192")
WDDM_BLOCKS = 6530  # module docstring
LINUX_BLOCKS = 6323
H100_REFUSAL = "--wddm: the NVIDIA H100 80GB SXM5 is a server module (SXM5)"
SLO = ("--slo", "ttft=2s,tpot=100ms")


def _one_line_refusal(*args: str) -> None:
    msg = refused(*args, "--gpu", "H100", "--wddm")
    assert msg.startswith(H100_REFUSAL) and msg.endswith("drop --wddm") and "\n" not in msg


def test_plan_wddm_figures_the_other_commands_match():
    assert cli_json("plan", MODEL, *RTX, "--wddm")["memory"]["num_gpu_blocks"] == WDDM_BLOCKS
    assert cli_json("plan", MODEL, *RTX)["memory"]["num_gpu_blocks"] == LINUX_BLOCKS


def test_simulate_serves_the_wddm_pool_and_says_whether_vllm_starts():
    doc = cli_json("simulate", MODEL, *RTX, "--wddm", "--num-requests", "50")
    assert doc["engine"]["num_gpu_blocks"] == WDDM_BLOCKS
    assert any(n.startswith("warning (--wddm): gpu_memory_utilization 0.92 asks 29.30 GiB") for n in doc["notes"])
    text = run_cli("simulate", MODEL, *RTX, "--wddm", "--num-requests", "50").output
    assert "note: warning (--wddm): gpu_memory_utilization 0.92" in text
    assert cli_json("simulate", MODEL, *RTX, "--num-requests", "50")["engine"]["num_gpu_blocks"] == LINUX_BLOCKS
    _one_line_refusal("simulate", MODEL)


def test_simulate_policy_sglang_serves_sglangs_wddm_pool():
    # SGLang counts the hold (KV = free after the load − free before × (1 − mem_fraction_static)): fewer token slots
    # under --wddm, where vLLM 0.33 gets more; the simulator's pool is the plan's usable slots + page 0 (from_plan.py)
    plan = cli_json("plan", MODEL, *RTX, "--engine", "sglang", "--wddm")["memory"]
    assert plan["usable_blocks"] < cli_json("plan", MODEL, *RTX, "--engine", "sglang")["memory"]["usable_blocks"]
    doc = cli_json("simulate", MODEL, *RTX, "--policy", "sglang", "--wddm", "--num-requests", "50")
    assert doc["engine"]["num_gpu_blocks"] == plan["usable_blocks"] + 1
    assert any(n.startswith("--wddm: CUDA reports the whole board") for n in doc["notes"])


def test_goodput_simulate_plans_with_wddm():
    doc = cli_json("goodput", "--simulate", MODEL, *RTX, "--wddm", "--num-requests", "50", *SLO)
    assert doc["simulation"]["plan"]["num_gpu_blocks"] == WDDM_BLOCKS
    assert any("(--wddm)" in n for n in doc["simulation"]["notes"])
    text = run_cli("goodput", "--simulate", MODEL, *RTX, "--wddm", "--num-requests", "50", *SLO).output
    assert "6,530 blocks × 16 tokens" in text and "warning (--wddm)" in text  # the memory-plan source line
    _one_line_refusal("goodput", "--simulate", MODEL, *SLO)


def test_cost_simulate_plans_with_wddm():
    doc = cli_json("cost", "--simulate", MODEL, *RTX, "--wddm", "--num-requests", "50", *SLO, "--utilization", "0.5",
                "--gpu-usd-per-hour", "0.9")
    assert doc["simulation"]["plan"]["num_gpu_blocks"] == WDDM_BLOCKS
    _one_line_refusal("cost", "--simulate", MODEL, *SLO, "--utilization", "0.5", "--gpu-usd-per-hour", "0.9")


def test_search_plans_candidates_with_wddm_and_its_check_line_says_so():
    doc = cli_json("search", MODEL, *SLO, "--tp", "1", "--wddm", "--num-requests", "50", "--max-model-len", "8192",
                "--gpu", "rtx5090", "--utilization", "0.5", "--gpu-usd-per-hour", "0.9")
    (entry,) = doc["candidates"]
    assert entry["plan"]["num_gpu_blocks"] == WDDM_BLOCKS
    assert entry["plan"]["startup"]["verdict"] == "may_refuse"
    assert entry["launch"]["check"].endswith("--wddm")
    assert doc["spec"]["wddm"] is True
    msg = refused("search", MODEL, *SLO, "--gpu", "H100", "--wddm", "--utilization", "0.5")
    assert msg.startswith(H100_REFUSAL) and "\n" not in msg


def test_search_spec_leaves_wddm_out_unless_given():  # ledgers written before the flag still resume
    from kvledger.analyses.search import SearchSpec

    assert "wddm" not in SearchSpec(model=MODEL, slo="ttft=1s").to_dict()


def test_report_plans_with_wddm(tmp_path):
    out = tmp_path / "r.html"
    doc = cli_json("report", MODEL, *RTX, "--wddm", *SLO, "--num-requests", "50", "--gpu-usd-per-hour", "0.9",
                "--out", str(out))
    m = doc["plan"]["memory"]
    assert m["num_gpu_blocks"] == WDDM_BLOCKS and m["startup"]["verdict"] == "may_refuse"
    assert doc["cost"]["simulation"]["plan"]["num_gpu_blocks"] == WDDM_BLOCKS
    assert doc["commands"]["plan"].endswith("--max-model-len 8192 --wddm --json")
    assert " --wddm " in doc["commands"]["cost"] and " --wddm " in doc["commands"]["sweep_point"]
    assert "warning (--wddm)" in out.read_text(encoding="utf-8")
    _one_line_refusal("report", MODEL, *SLO, "--out", str(tmp_path / "x.html"))
    assert not (tmp_path / "x.html").exists()


def test_ui_plan_endpoint_takes_wddm():
    from fastapi.testclient import TestClient

    from kvledger.report.webapp import create_app

    client = TestClient(create_app(), base_url="http://127.0.0.1")
    r = client.post("/api/plan", json={"model": MODEL, "gpu": "rtx5090", "max_model_len": "8192", "wddm": True})
    h = r.json()["headline"]
    assert h["num_gpu_blocks"] == WDDM_BLOCKS and h["startup"].startswith("warning (--wddm)")
    assert client.post("/api/plan", json={"model": MODEL, "gpu": "rtx5090", "max_model_len": "8192"}).json()[
        "headline"]["num_gpu_blocks"] == LINUX_BLOCKS
    bad = client.post("/api/plan", json={"model": MODEL, "gpu": "H100", "wddm": True})
    assert bad.status_code == 400
    assert bad.json()["error"].startswith("Windows/WSL2 (WDDM): the NVIDIA H100 80GB SXM5 is a server module")
    assert bad.json()["error"].endswith("untick the Windows/WSL2 (WDDM) box")


def test_ui_serving_endpoint_takes_wddm():
    from kvledger.report.webapp import serving_payload

    out = serving_payload(MODEL, "rtx5090", "ttft=2s,tpot=100ms", None, max_model_len="8192", num_requests=50,
                          monthly_tokens=3e8, wddm=True)
    assert out["cost"]["simulation"]["plan"]["num_gpu_blocks"] == WDDM_BLOCKS


AIPERF = "tests/evidence/data/aiperf/run1_profile_export.jsonl"  # openai/gpt-oss-20b, 100 requests


def test_validate_and_calibrate_plan_with_wddm():
    # gpt-oss-20b on the RTX 5090 at its defaults: validate and calibrate replay the run on plan --wddm's pool
    blocks = cli_json("plan", "openai/gpt-oss-20b", "--gpu", "rtx5090", "--wddm")["memory"]["num_gpu_blocks"]
    assert blocks != cli_json("plan", "openai/gpt-oss-20b", "--gpu", "rtx5090")["memory"]["num_gpu_blocks"]
    doc = cli_json("validate", AIPERF, "--gpu", "rtx5090", "--wddm")
    assert doc["engine"]["num_gpu_blocks"] == blocks
    assert any(n.startswith("warning (--wddm)") for n in doc["notes"])
    _one_line_refusal("validate", AIPERF)
    _one_line_refusal("calibrate", AIPERF, "--model", "openai/gpt-oss-20b")


def test_calibrate_records_wddm_in_its_profile():
    prof = json.loads(run_cli("calibrate", AIPERF, "--model", "openai/gpt-oss-20b", "--gpu", "rtx5090", "--wddm",
                              "--json").stdout)
    assert prof["engine_flags"]["wddm"] is True
    assert prof["engine"]["num_gpu_blocks"] == cli_json("plan", "openai/gpt-oss-20b", "--gpu", "rtx5090",
                                                     "--wddm")["memory"]["num_gpu_blocks"]
