"""search's no-winner clause names a multi-node layout that holds the weights it says the model needs."""

from __future__ import annotations

from kvledger.report.search_multinode import multinode_words, nodes_for


def _rejected(weight_bytes: int) -> list[dict]:
    return [{"reason": "does not fit", "gpu_id": "nvidia_a100_40gb_sxm", "tp": tp,
             "plan": {"weight_bytes_model": weight_bytes, "gpu_memory_utilization": 0.92}} for tp in (1, 2, 4, 8)]


def test_llama_405b_on_a100_40gb_is_sent_to_four_nodes_not_two():
    # Llama-3.1-405B bf16: 811,706,777,600 B of weights (search --json's plan.weight_bytes_model); an A100 40GB holds
    # 0.92 × 42,509,271,040 B = 39,108,529,356.8 B, so ⌈20.76⌉ = 21 GPUs: ⌈21 / 8⌉ = 3 nodes, rounded to 4 (TP 32;
    # 128 heads do not divide by 24). Before: --tp 16 on 2 nodes and --pp 2 --tp 8, 16 GPUs, which plan refuses.
    why = multinode_words(_rejected(811_706_777_600))
    assert "need 21 GPUs at 0.92 × 39.59 GiB" in why
    assert "--tp 32 (one TP group on 4 nodes, launched with --nnodes 4)" in why
    assert "kvledger plan --pp 4 --tp 8 checks PP 4 × TP 8" in why and "--tp 16" not in why


def test_nodes_for_rounds_up_to_a_power_of_two_and_at_least_two():
    # DeepSeek-V3 on H100: 9 GPUs → ⌈9/8⌉ = 2 nodes (TP 16); 8 GPUs still 2 (one node could not hold it with the rest)
    assert [nodes_for(need, 8) for need in (8, 9, 16, 17, 21, 33)] == [2, 2, 2, 4, 4, 8]
