"""`kvledger report --engine sglang --enable-dp-attention --dp-size N` runs its pipeline with SGLang 0.5.23's DP
attention (sim_parallel.with_dp → sim_sglang_dp.py, the path `cost --simulate` takes): the plan section is the DP plan,
the capacity search and cost simulate the lock-step ranks, the engine line states the layout and SGLang's launch
flags, and every command line carries --enable-dp-attention --dp-size N; what SGLang (or the lock-step simulation)
refuses is refused with exit 2 before any simulation.

The model: DeepSeek-V2-Lite (MLA, 64 routed experts, 27 layers, kv_lora_rank 512 + qk_rope_head_dim 64) on 2 L40S,
TP 2 with --ep-size 2, 8,192-token prompts and 1,024-token outputs: a workload whose SGLang pool (each request's
whole prompt + output reserved at admission) limits how many requests run at once, so the DP rule (MLA's latent KV
is copied on every TP rank; DP attention gives each rank its own pool) shows in the capacity."""

from __future__ import annotations

import pytest
from cli_run import cli_json, run_cli

from kvledger.errors import InputError

BASE = ("deepseek-ai/DeepSeek-V2-Lite", "--gpu", "L40S", "--engine", "sglang", "--tp", "2", "--ep-size", "2",
        "--prompt-lengths", "8192", "--output-lengths", "1024", "--num-requests", "100",
        "--slo", "ttft=5s,tpot=200ms", "--api", "DeepSeek:deepseek-chat")
DP = ("--enable-dp-attention", "--dp-size", "2")


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    """(the DP-attention report's JSON and HTML text, the same report without DP attention's JSON)."""
    out = tmp_path_factory.mktemp("dp") / "r.html"
    dp = cli_json("report", *BASE, *DP, "--out", str(out))
    return dp, out.read_text(), cli_json("report", *BASE)


def test_plan_section_is_the_dp_plan_with_each_ranks_pool(reports):
    dp, _, tp = reports
    # KV per token (MLA, per GPU, either layout): 27 layers × (512 + 64) × 2 B = 31,104 B
    # TP 2: 22,663,496,781 B available per GPU // 31,104 = 728,636 tokens, one pool copied on both GPUs (22,720,119,885
    #       before MLA's w_kc/w_vc copies: 8 heads × 256 × 512 × 2 B × 27 layers = 56,623,104 B)
    # DP 2: attention weights and the input embedding whole on each GPU (attention TP 1), and the copies of all 16
    #       heads (113,246,208 B), leave 21,867,887,979 B // 31,104 = 703,057 tokens per rank, each rank its own
    #       pool: 2 × 703,057 = 1,406,114 in all (1.93×)
    assert tp["plan"]["memory"]["available_kv_bytes"] // 31104 == tp["plan"]["memory"]["num_gpu_blocks"] == 728636
    assert dp["plan"]["memory"]["available_kv_bytes"] // 31104 == dp["plan"]["memory"]["num_gpu_blocks"] == 703057
    lay = dp["plan"]["data_parallel"]
    assert (lay["data_parallel_size"], lay["gpus"], lay["attention_tp"]) == (2, 2, 1)  # attention TP = 2 ÷ 2
    assert (lay["kv_tokens_per_rank"], lay["kv_tokens_total"]) == (703057, 1406114)
    # at the workload's 8,192 + 1,024 = 9,216 tokens: 703,057 // 9,216 = 76 a rank, 152 in all; TP 2: 728,636 // 9,216
    # = 79
    assert {r["context_tokens"]: r["total"] for r in lay["requests"]}[9216] == 152
    assert {r["context_tokens"]: r["max_requests"] for r in tp["plan"]["concurrency"]}[9216] == 79


def test_capacity_rises_with_the_ranks_pools(reports):
    dp, _, tp = reports
    sim = dp["cost"]["simulation"]
    assert sim["num_gpus"] == tp["cost"]["simulation"]["num_gpus"] == 2  # DP attention inside the TP group's GPUs
    assert any(n.startswith("data parallel: --attn-dp-size 2 simulated as 2 DP ranks in lock-step")
               for n in sim["notes"])
    # the lock-step DP ranks hold 152 requests at once, the TP group 79: at 1.5 req/s (E2E about a minute a request
    # at these lengths) the TP group's pool is full and first tokens wait past 5 s (13 of 100 within the SLO); the DP
    # ranks serve all 100 within it, and at 2 req/s too (TP 2: 1 of 100)
    att = {run: {p["value"]: p["attainment"] for p in d["cost"]["simulation"]["capacity_search"]["probes"]}
           for run, d in (("dp", dp), ("tp", tp))}
    assert (att["tp"][1.5], att["tp"][2.0]) == (0.13, 0.01) and (att["dp"][1.5], att["dp"][2.0]) == (1.0, 1.0)
    # the SLO capacity each search settles on (seed 0, 100 requests a probe; the rates above it too short to tell
    # a steady queue): 1.109375 req/s with DP attention against 1.0 without (1.125 before every rank's decode batch
    # was padded to the captured CUDA-graph size of the largest rank's, as SGLang 0.5.23's decode runner pads it)
    assert dp["cost"]["capacity"]["slo_capacity_req_per_s"] == 1.109375
    assert tp["cost"]["capacity"]["slo_capacity_req_per_s"] == 1.0


def test_command_lines_and_engine_line_carry_sglangs_flags(reports):
    dp, html, _ = reports
    for key in ("plan", "cost", "capacity", "sweep_point"):
        assert " --ep-size 2 --attn-dp-size 2 " in dp["commands"][key], key  # SGLang 0.5.23's spelling (0.5.22 on)
    line = " ".join(html.split())
    assert ("DP attention (--attn-dp-size 2): 2 DP ranks over the TP group&#x27;s 2 GPUs, attention "
            "TP 1 = 2 ÷ 2 per rank, each its own scheduler and KV pool of 703,057 tokens (2 × 703,057 = 1,406,114 "
            "tokens in all)") in line
    assert ("launched as python -m sglang.launch_server --model-path deepseek-ai/DeepSeek-V2-Lite --tp-size 2 "
            "--ep-size 2 --attn-dp-size 2;") in line
    assert "152 (2 DP ranks × 76 each) requests at its 9,216 tokens" in line


@pytest.mark.parametrize(("args", "said"), [
    # SGLang 0.5.23 arg_groups/parallel_hook.py asserts tp_size % dp_size == 0 under DP attention
    (("--engine", "sglang", "--tp", "2", "--ep-size", "2", DP[0], "--dp-size", "3"),
     "--dp-size 3 does not divide --tp 2: SGLang asserts tp_size % dp_size == 0"),
    # SGLang runs dp 2 in tp 4 (attention TP 2); the lock-step simulation models attention TP 1 only
    (("--engine", "sglang", "--tp", "4", "--ep-size", "4", *DP),
     "--attn-dp-size 2 --tp 4: an attention DP size below --tp"),
    (("--engine", "sglang", "--tp", "2", *DP), "--ep-size 1 (experts sliced within EP groups) is not simulated"),
    (("--tp", "2", *DP), "--enable-dp-attention is SGLang's: give --engine sglang"),
    (("--engine", "sglang", "--tp", "2", "--ep-size", "2", "--enable-dp-attention"),
     "--enable-dp-attention needs --dp-size above 1"),
    (("--engine", "sglang", "--tp", "2", "--ep-size", "3"), "--ep-size 3 with --tp 2: SGLang splits"),
])
def test_refused_where_sglang_or_the_simulation_refuses(tmp_path, args, said):
    with pytest.raises(InputError) as err:  # InputError: exit 2 at the console entry
        run_cli("report", "deepseek-ai/DeepSeek-V2-Lite", "--gpu", "L40S", *args, "--slo", "ttft=5s",
                "--api", "DeepSeek:deepseek-chat", "--num-requests", "50", "--out", str(tmp_path / "r.html"))
    assert said in str(err.value)
    assert not (tmp_path / "r.html").exists()


def test_dense_model_refused():
    with pytest.raises(InputError) as err:
        run_cli("report", "meta-llama/Llama-3.2-3B", "--gpu", "L40S", "--engine", "sglang", "--tp", "2", *DP,
                "--slo", "ttft=5s", "--api", "OpenAI:gpt-4.1-mini", "--json")
    # SGLang 0.5.23's LlamaForCausalLM splits attention over the whole TP group: DP attention does not apply
    assert "model file for LlamaForCausalLM splits attention over the whole TP group" in str(err.value)
