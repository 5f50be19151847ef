"""kvledger.plan takes the parallel layouts `kvledger plan` takes (enable_expert_parallel, data_parallel_size,
enable_dp_attention, all2all_backend, nnodes, inter_node_link): before, the call had no such parameters, so the DP + EP
layout the command's own MLA note recommends (--data-parallel-size 8 --enable-expert-parallel --tp 1) could not be
planned from Python at all."""

from __future__ import annotations

import pytest
from api_cli_json import cli_json, plain

import kvledger
from kvledger.errors import InputError

V3 = "deepseek-ai/DeepSeek-V3"
# DeepSeek-V3's MLA cache: 61 layers × (kv_lora_rank 512 + qk_rope_head_dim 64) × 2 B = 70,272 B per token, one latent
# head that TP does not split, so a GPU holds the same bytes per token at TP 1 (a DP rank) as at TP 8
MLA_BYTES_PER_TOKEN = 61 * (512 + 64) * 2


def test_plan_takes_vllm_dp_with_expert_parallel_as_the_command():
    d = plain(kvledger.plan(V3, "H200", tp=1, data_parallel_size=8, enable_expert_parallel=True).to_dict())
    assert d == cli_json("plan", V3, "--gpu", "H200", "--tp", "1", "-dp", "8", "--enable-expert-parallel")
    assert d["kv"]["bytes_per_token_per_gpu"] == MLA_BYTES_PER_TOKEN == 70_272
    dp = d["data_parallel"]
    blocks = d["memory"]["num_gpu_blocks"]
    # one pool per rank: the rank's blocks × 16 tokens, 8 such pools on the 8 GPUs
    assert dp["kv_tokens_per_rank"] == blocks * 16 and dp["kv_tokens_total"] == 8 * blocks * 16
    assert (dp["gpus"], dp["attention_tp"]) == (8, 1)
    # at max_model_len 163,840 a request needs 163,840 / 16 = 10,240 blocks; block 0 is vLLM's null block
    at_max = next(r for r in dp["requests"] if r["context_tokens"] == 163_840)
    assert at_max["per_rank"] == (blocks - 1) // 10_240 and at_max["total"] == 8 * at_max["per_rank"]
    # the profile's MoE rows: allgather_reducescatter gathers DP 8 × max_num_batched_tokens 8,192 = 65,536
    assert dp["moe_profile_tokens"] == 8 * 8_192


def test_plan_takes_sglang_dp_attention_and_the_nodes_as_the_command():
    d = plain(kvledger.plan(V3, "H200", engine="sglang", tp=8, data_parallel_size=8,
                            enable_dp_attention=True).to_dict())
    assert d == cli_json("plan", V3, "--gpu", "H200", "--engine", "sglang", "--tp", "8", "--dp-size", "8",
                         "--enable-dp-attention")
    assert d["data_parallel"]["attention_tp"] == 8 // 8
    # TP 16 over two 8-GPU H100 nodes, each GPU's NIC 200 GB/s one direction: 2e11 B/s reaches the settings
    t = plain(kvledger.plan(V3, "H100", tp=16, nnodes=2, inter_node_link="200GB/s").to_dict())
    assert t == cli_json("plan", V3, "--gpu", "H100", "--tp", "16", "--nnodes", "2", "--inter-node-link", "200GB/s")
    assert (t["settings"]["nnodes"], t["settings"]["inter_node_link_bytes_per_s"]) == (2, 200e9)


def test_plan_refuses_a_bad_layout_naming_the_parameter():
    with pytest.raises(InputError, match=r"^kvledger\.plan: enable_expert_parallel: Qwen/Qwen3-8B has no routed "
                                         "experts"):
        kvledger.plan("Qwen/Qwen3-8B", "H100", data_parallel_size=2, enable_expert_parallel=True)
    with pytest.raises(InputError, match=r"^kvledger\.plan: data_parallel_size 0 is out of range"):
        kvledger.plan(V3, "H200", data_parallel_size=0)
