"""`kvledger simulate -dp N --enable-expert-parallel` for a MoE model under vLLM: the DP ranks in lock-step, each its
own KV pool from the plan, vLLM's balancing rule; what it does not model refused in one paragraph."""

from __future__ import annotations

import json

import pytest
from cli_run import cli_json, refused, run_cli

DSV3 = ("simulate", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--tp", "1", "-dp", "8", "--enable-expert-parallel",
        "--num-requests", "16")


def test_dsv3_dp8_ep_reports_per_rank_kv_and_aggregate_throughput():
    d = cli_json(*DSV3)
    dp = d["data_parallel"]
    # the plan's pool per rank: 25,387 blocks × 16 tokens = 406,192 (`kvledger plan ... -dp 8` prints the same),
    # 8 × 406,192 = 3,249,536 in all, on 8 × TP 1 = 8 GPUs
    assert dp["kv_tokens_per_rank"] == 406_192 and dp["kv_tokens_total"] == 3_249_536 and dp["gpus"] == 8
    assert dp["ranks_in_lockstep"] is True and dp["balancing_rule"] == "vLLM 0.33.0"
    assert "DPEngineCoreProc" in dp["rule_source"] and "DPLBAsyncMPClient" in dp["rule_source"]
    assert sum(dp["requests_routed_per_rank"]) == 16 and len(dp["kv_usage_mean_per_rank"]) == 8
    # 0.33's score max(unfinished on the rank, waiting + running) with the scan start rotated spreads the 16 azure-conv
    # arrivals over the 8 ranks: no rank more than one request from the even 2 (the simulator's routing, pinned)
    assert dp["requests_routed_per_rank"] == [3, 2, 2, 2, 2, 2, 1, 2]
    s = d["summary"]
    assert s["num_finished"] == 16
    # the throughput is all ranks' together: output tokens of every request ÷ the run's duration
    assert s["throughput_output_tok_per_s"] * s["duration_s"] == pytest.approx(16 * d["workload"]["output_tokens_mean"])
    assert any("8 DP ranks in lock-step" in n and "DPEngineCoreProc.run_busy_loop" in n for n in d["notes"])
    assert "data parallel 8" in d["step_cost"]["source"]


def test_text_names_the_lockstep_and_is_deterministic():
    a, b = run_cli(*DSV3), run_cli(*DSV3)
    assert a.exit_code == 0 and a.stdout == b.stdout
    text = " ".join(a.stdout.split())
    assert "data parallel: 8 DP ranks in lock-step on 8 GPUs" in text
    assert "KV pool 406,192 tokens per rank, 8 × 406,192 = 3,249,536 in all" in text
    assert json.loads(run_cli(*DSV3, "--json").stdout) == json.loads(run_cli(*DSV3, "--json").stdout)


@pytest.mark.parametrize(("args", "said"), [
    (("meta-llama/Llama-3.1-8B", "--gpu", "H100-SXM", "-dp", "2"),
     "simulate them as independent replicas: --replicas 2 --tp 1"),
    # vLLM 0.22 runs Qwen3-8B on its V2 model runner, whose PP path (tokens back each batch, no stagger) differs
    (("Qwen/Qwen3-8B", "--gpu", "H100", "--pp", "2", "--engine-version", "0.22.0"),
     "--pp 2 on vLLM 0.22.0's V2 model runner: its pipeline loop was read from 0.23.0 on"),
    (("deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--pp", "2", "-dp", "8", "--enable-expert-parallel"),
     "DP ranks with pipeline stages are not modelled"),
    (("deepseek-ai/DeepSeek-V3", "--gpu", "H200", "-dp", "8"), "without --enable-expert-parallel"),
    # the refusal said "--enable-dp-attention needs --enable-dp-attention with --dp-size above 1"
    (("deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--enable-dp-attention"),
     "--enable-dp-attention needs --dp-size above 1: simulate takes"),
    # SGLang's -dp without DP attention: 8 whole replicas of TP 1, as plan says (sim_dp.check_dp_request)
    (("deepseek-ai/DeepSeek-V3", "--gpu", "H200", "-dp", "8", "--enable-expert-parallel", "--policy", "sglang"),
     "--dp-size 8 without --enable-dp-attention: SGLang runs 8 whole replicas of TP 1"),
    (("deepseek-ai/DeepSeek-V3", "--gpu", "H200", "-dp", "8", "--enable-expert-parallel", "--replicas", "2"),
     "drop --replicas and --router"),
])
def test_what_is_not_modelled_is_refused(args, said):
    assert said in refused("simulate", *args, "--num-requests", "4")


def test_console_exit_2(monkeypatch, capsys):
    import sys

    from kvledger.cli.main import run as main_run

    monkeypatch.setattr(sys, "argv", ["kvledger", "simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100-SXM",
                                      "--data-parallel-size", "2"])
    with pytest.raises(SystemExit) as e:
        main_run()
    err = capsys.readouterr().err
    assert e.value.code == 2 and "Traceback" not in err and "dense model" in err


def test_sixteen_ranks_over_two_nodes_price_the_gathers_over_the_nics():
    args = ("simulate", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--tp", "1", "-dp", "16",
            "--enable-expert-parallel", "--num-requests", "50", "--rate", "2")
    d = cli_json(*args)
    note = next(n for n in d["notes"] if n.startswith("data parallel: "))
    # 16 GPUs on two 8-GPU nodes: the ring bound by 8 NICs × 50 GB/s = 400 GB/s (under NVLink's 450), +25 µs a call
    # (tests/accounting/test_dp_lockstep_cost.py works both out)
    assert "across 2 nodes: NCCL's ring at 400 GB/s a direction (bound by the NICs" in note and "+25 µs" in note
    # --inter-node-link 400Gbps is the assumed NIC: the same run; 100 Gb/s NICs (8 × 12.5 = 100 GB/s) slow every step
    same = cli_json(*args, "--inter-node-link", "400Gbps")
    slow = cli_json(*args, "--inter-node-link", "100Gbps")
    assert same["summary"]["tpot_s"] == d["summary"]["tpot_s"]
    assert slow["summary"]["tpot_s"]["mean"] > d["summary"]["tpot_s"]["mean"]


@pytest.mark.parametrize("cmd", [("simulate",), ("goodput", "--simulate")])
def test_an_out_of_range_rank_count_names_the_flag_vllm_spells(cmd):
    # `-dp 0` is vLLM's --data-parallel-size; the error named SGLang's --dp-size, another engine's flag
    said = refused(*cmd, "Qwen/Qwen3-30B-A3B", "--gpu", "H100-SXM", "-dp", "0", "--enable-expert-parallel",
                   "--slo", "ttft=1s", "--target", "0.9") if cmd[0] == "goodput" else refused(
        *cmd, "Qwen/Qwen3-30B-A3B", "--gpu", "H100-SXM", "-dp", "0", "--enable-expert-parallel")
    assert "--data-parallel-size 0 is out of range; allowed: [1, 1,024]" in said and "--dp-size" not in said
