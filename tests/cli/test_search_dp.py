"""`kvledger search --data-parallel-size 1,8` for a MoE model: vLLM's DP ranks with expert parallelism ranked beside
the TP layouts, simulated in lock-step as `kvledger simulate -dp N --enable-expert-parallel` simulates them, priced on
DP × TP GPUs, with their launch line; a dense model's DP axis refused."""

from __future__ import annotations

import json

import pytest
from cli_run import refused, run_cli

from kvledger.analyses.search import Candidate, parse_candidate_id

# DeepSeek-V3 on H200 at CoreWeave (8-GPU instances only, $50.44/h): TP 1 and 8 × DP 1 and 8, expert parallelism on.
# TP 1 does not fit one GPU and DP 8 × TP 8 (64 GPUs) no instance: two candidates simulated, TP 8 and DP 8 × TP 1.
# --max-gpus-per-replica 64 keeps DP 8 × TP 8, which the default cap (16) prunes before planning, in the ledger.
DSV3 = ("search", "deepseek-ai/DeepSeek-V3", "--gpus", "H200", "--gpu-provider", "CoreWeave", "--tp", "1,8",
        "--data-parallel-size", "1,8", "--enable-expert-parallel", "--slo", "ttft=2s,tpot=100ms",
        "--num-requests", "50", "--rate", "5", "--max-gpus-per-replica", "64")
DP8 = "nvidia_h200_sxm:dp8xtp1:kv-auto:ep"


@pytest.fixture(scope="module")
def serial() -> str:
    res = run_cli(*DSV3, "--backend", "serial", "--json")
    assert res.exit_code == 0, res.output
    return res.stdout


def test_dp8_ep_ranked_beside_tp8_on_eight_gpus(serial):
    d = json.loads(serial)
    by_id = {c["id"]: c for c in d["candidates"]}
    assert list(by_id) == ["nvidia_h200_sxm:tp1:kv-auto", DP8, "nvidia_h200_sxm:tp8:kv-auto:ep",
                           "nvidia_h200_sxm:dp8xtp8:kv-auto:ep"]
    assert sorted(d["ranking"]) == sorted([DP8, "nvidia_h200_sxm:tp8:kv-auto:ep"])
    c = by_id[DP8]
    assert c["status"] == "feasible" and c["layout"] == "dp8×tp1+ep" and c["num_gpus_per_unit"] == 8
    assert c["data_parallel_size"] == 8 and c["tp"] == 1 and c["enable_expert_parallel"] is True
    # each rank's pool is the plan's at -dp 8: 25,387 blocks of 16 tokens (406,192 tokens, as simulate -dp 8 reports)
    assert c["plan"]["num_gpu_blocks"] == 25_387 and c["plan"]["data_parallel_size"] == 8 and "nnodes" not in c["plan"]
    assert c["launch"]["vllm"].startswith("vllm serve deepseek-ai/DeepSeek-V3 --tensor-parallel-size 1 ")
    assert c["launch"]["vllm"].endswith("--data-parallel-size 8 --enable-expert-parallel")
    assert "--data-parallel-size 8 --enable-expert-parallel" in c["launch"]["check"]
    assert "--tp-size 8 --attn-dp-size 8 " in c["launch"]["sglang"]  # SGLang 0.5.23's spelling (0.5.22 on)
    # vLLM's limits are each DP rank's (its own engine core); SGLang divides its server-wide ones by the 8 DP ranks
    # (0.5.23 resolve_max_num_reqs, handle_data_parallelism): 8 × 1,024 and 8 × 8,192 give each rank vLLM's
    assert (c["plan"]["max_num_seqs"], c["plan"]["max_num_batched_tokens"]) == (1024, 8192)
    assert "--max-running-requests 8192 --chunked-prefill-size 65536 " in c["launch"]["sglang"]
    assert c["launch"]["note"].endswith("DP ranks in lock-step are what was simulated")
    assert "8 GPUs = 1 replica × DP 8 × TP 1" in " ".join(c["capacity"]["notes"])
    # priced on DP × TP = 8 GPUs: one 8x H200 instance per unit, $50.44/h × 730 h = $36,821.20 a month per replica
    s = c["sizing"]
    assert s["num_gpus"] == 8 * s["replicas"]
    assert s["rental_usd_per_month"] == pytest.approx(s["replicas"] * 50.44 * 730)
    # the lock-step bound (the ranks' work ÷ 8) stands above the capacity found: the candidate was simulated, not pruned
    assert c["bounds"]["capacity_bound_req_per_s"] >= c["capacity"]["goodput_req_per_s"] > 0
    wide = by_id["nvidia_h200_sxm:dp8xtp8:kv-auto:ep"]
    assert wide["status"] == "rejected" and wide["num_gpus_per_unit"] == 64 and "64 GPUs" in wide["detail"]
    # DP 8 × TP 8 = 64 GPUs, wider than CoreWeave's 8-GPU instances: the reason names the ranks, not a TP group of 8
    assert wide["reason"] == "no instance holds the DP × TP ranks"
    # vLLM's num_gpu_blocks is each engine's pool: each DP rank's (one GPU here), the TP-8 group's (8 GPUs) there
    assert "25,387 KV blocks of 16 tokens per DP rank (one GPU);" in c["launch"]["note"]
    assert " KV blocks of 16 tokens per TP group (8 GPUs);" in by_id["nvidia_h200_sxm:tp8:kv-auto:ep"]["launch"]["note"]
    assert any(n.startswith("data parallel 8: ") and "lock-step" in n for n in d["notes"])


def test_workers_give_the_same_bytes(serial):
    res = run_cli(*DSV3, "--workers", "2", "--backend", "pool", "--json")
    assert res.exit_code == 0 and res.stdout == serial


def test_dp_candidate_id_reads_back():
    c = parse_candidate_id(DP8)
    assert c == Candidate("nvidia_h200_sxm", 1, enable_expert_parallel=True, data_parallel_size=8)
    assert c.id == DP8 and c.num_gpus == 8


@pytest.mark.parametrize(("args", "said"), [
    (("meta-llama/Llama-3.1-8B", "--gpus", "H100", "-dp", "1,2"),
     "for the dense model meta-llama/Llama-3.1-8B"),
    (("deepseek-ai/DeepSeek-V3", "--gpus", "H200", "-dp", "8", "--no-enable-expert-parallel"),
     "--data-parallel-size 8 with --no-enable-expert-parallel"),
    (("deepseek-ai/DeepSeek-V3", "--gpus", "H200", "--enable-dp-attention"), "--enable-dp-attention"),
    (("deepseek-ai/DeepSeek-V3", "--gpus", "H200", "-dp", "0,8"), "--data-parallel-size"),
])
def test_refusals(args, said):
    assert said in refused("search", *args, "--slo", "ttft=2s", "--rate", "1")


@pytest.mark.parametrize(("tp", "dp", "nodes"), [
    (1, 8, 1),  # 8 GPUs on one 8-GPU H200 baseboard
    (1, 16, 2),  # 16 GPUs: 2 nodes of 8
    (16, 2, 4),  # 32 GPUs, each TP-16 rank on 2 whole nodes: 4 of 8
    (4, 3, 3),  # 12 GPUs: 2 nodes of 6 would split a TP-4 rank; 3 nodes of 4 hold one rank each
])
def test_dp_nodes_by_hand(tp, dp, nodes):
    from kvledger.analyses.search.dp_axis import dp_nnodes
    from kvledger.catalog.gpu_file import resolve_gpu

    assert dp_nnodes(resolve_gpu("H200"), tp, dp) == nodes
