"""GLM-4.5-style MoE on the standard decoder path: a dense MLP below ``first_k_dense_replace`` and ``n_shared_experts``
shared experts beside the routed ones (vLLM ``glm4_moe.py``: ``layer_idx >= first_k_dense_replace`` → MoE, shared
experts of ``moe_intermediate_size × n_shared_experts``)."""

from __future__ import annotations

import json
from pathlib import Path

from kvledger.catalog.modelspec import parse_config

CFG = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "oracle_configs" / "glm4_moe.json"


def _mlp_params(spec, layer: int) -> dict[str, int]:
    pre = f"model.layers.{layer}.mlp."
    return {w.path[len(pre):]: w.numel for w in spec.weights if w.path.startswith(pre)}


def test_glm4_moe_dense_first_layer_and_shared_expert():
    # transformers' default Glm4MoeConfig (the GLM-4.5-Air shape): hidden 4096, 46 layers, first_k_dense_replace 1,
    # intermediate_size 10944, 128 routed experts top-8 of moe_intermediate_size 1408, n_shared_experts 1.
    spec = parse_config(json.loads(CFG.read_text()), source="glm4_moe")
    # layer 0 dense: gate, up, down of 4096 × 10944 = 3 × 44,826,624 = 134,479,872; no experts
    assert sum(_mlp_params(spec, 0).values()) == 3 * 4096 * 10944 == 134_479_872
    assert not any(w.expert for w in spec.weights if w.path.startswith("model.layers.0."))
    # layer 1: one shared expert, 3 × 4096 × 1408 = 17,301,504, beside 128 routed experts of the same width
    mlp1 = _mlp_params(spec, 1)
    assert sum(n for k, n in mlp1.items() if k.startswith("shared_experts.")) == 3 * 4096 * 1408 == 17_301_504
    assert sum(n for k, n in mlp1.items() if k.startswith("experts.")) == 128 * 17_301_504
    # 45 MoE layers; the total equals transformers' Glm4MoeForCausalLM on the meta device
    # (benchmarks/data/transformers_oracle.csv: 103,481,200,640). Before the fix layer 0 was routed and no layer had a
    # shared expert: 103,481,200,640 + 128 × 17,301,504 + 524,288 (router) − 134,479,872 − 45 × 17,301,504
    # = 104,783,269,888.
    moe_layers = {w.path.split(".mlp.")[0] for w in spec.weights if w.expert}
    assert len(moe_layers) == 45
    assert spec.num_params == 103_481_200_640
    # active: every non-routed tensor + 8/128 of the 45 × 128 × 17,301,504 = 99,656,663,040 routed parameters:
    # 103,481,200,640 − 99,656,663,040 × 120/128 = 10,053,079,040
    assert spec.num_active_params == 10_053_079_040


def test_qwen3_moe_unchanged():
    # no first_k_dense_replace / n_shared_experts: every layer routed, no shared expert (transformers: 15,350,731,776)
    cfg = CFG.parent / "qwen3_moe.json"
    assert parse_config(json.loads(cfg.read_text()), source="qwen3_moe").num_params == 15_350_731_776
