"""`kvledger report` takes `--data-parallel-size N --enable-expert-parallel` on the path `cost --simulate` takes
(sim_parallel.with_dp → sim_dp.py): the report's cost section is cost's for the same DP ranks, its plan has the
ranks, and its command lines carry the flag; what cost refuses with DP ranks, the report refuses before any
simulation."""

from __future__ import annotations

from cli_run import cli_json, refused

DP8 = ("deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--tp", "1", "-dp", "8", "--enable-expert-parallel",
       "--slo", "ttft=2s,tpot=100ms", "--num-requests", "50", "--gpu-provider", "CoreWeave")


def test_report_prices_the_dp_ranks_as_cost_does():
    d = cli_json("report", *DP8)
    # the lock-step rate search over 8 DP ranks of TP 1 (tests/cli/test_goodput_cost_dp.py): 4.8125 req/s on
    # DP 8 × TP 1 = 8 GPUs, as `cost --simulate` with the same flags
    assert d["cost"]["simulation"]["num_gpus"] == 8 and d["cost"]["capacity"]["slo_capacity_req_per_s"] == 4.8125
    assert d["plan"]["data_parallel"]["data_parallel_size"] == 8 and d["plan"]["settings"]["data_parallel_size"] == 8
    assert " --data-parallel-size 8 " in d["commands"]["cost"] and " --data-parallel-size 8 " in d["commands"]["plan"]


def test_report_refuses_dp_ranks_with_sglang_as_cost_does():
    said = refused("report", *DP8, "--engine", "sglang")
    # SGLang's --dp-size without --enable-dp-attention is 8 whole replicas of TP 1, as `plan` says (not DP attention)
    assert said.startswith("--dp-size 8 without --enable-dp-attention: SGLang runs 8 whole replicas of TP 1 (8 GPUs, "
                           "as `kvledger plan` says), simulated as --replicas 8 (drop --dp-size)")
