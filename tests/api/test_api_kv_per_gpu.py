"""The memory-plan figures in ``goodput --simulate`` and ``cost --simulate``'s ``simulation.plan`` are per GPU and say
so: ``kv_bytes_per_token_per_gpu``, as ``plan --json``'s ``kv.bytes_per_token_per_gpu`` and ``search``'s
``plan.kv_bytes_per_token_per_gpu`` (``kv_bytes_per_token`` is the whole model's in ``plan`` and ``models``)."""

from __future__ import annotations

import kvledger

L8 = "meta-llama/Llama-3.1-8B"
SMALL = dict(prompt_lengths="fixed:512", output_lengths="fixed:64", rate=5.0, num_requests=60, cache=False)


def test_simulation_plan_names_its_kv_bytes_per_gpu_at_tp2():
    # Llama-3.1-8B: 2 (K,V) × 32 layers × 8 KV heads × 128 head_dim × 2 B = 131,072 B per token for the model;
    # TP 2 splits the 8 KV heads 4 + 4, so each GPU holds 65,536 B per token
    g = kvledger.goodput(L8, "H100", slo="ttft=200ms,tpot=50ms", tp=2, **SMALL).to_dict()
    figures = g["simulation"]["plan"]
    assert figures["kv_bytes_per_token_per_gpu"] == 65_536 and "kv_bytes_per_token" not in figures
    p = kvledger.plan(L8, "H100", tp=2).to_dict()
    assert p["kv"]["bytes_per_token_per_gpu"] == 65_536 and p["model"]["kv_bytes_per_token"] == 131_072
    assert figures["num_gpu_blocks"] == p["memory"]["num_gpu_blocks"] == 62_113
