"""TP shards against quantization groups and blocks (catalog/quant_tp.py), with the arithmetic worked by hand."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from kvledger.catalog.loading import loaded_weights
from kvledger.catalog.models import load_model
from kvledger.catalog.modelspec import parse_config
from kvledger.catalog.quant_tp import check_quant_tp, tp_misalignment
from kvledger.errors import InputError

AWQ = {"quant_method": "awq", "bits": 4, "group_size": 128, "zero_point": True, "version": "gemm"}


def _qwen72b_awq(intermediate: int = 29568):
    raw = json.loads((resources.files("kvledger.catalog") / "data/models/Qwen--Qwen2.5-72B.json").read_text())
    raw.update(quantization_config=dict(AWQ), intermediate_size=intermediate)
    return parse_config(raw, source="t", name="qwen72b-awq")


def test_awq_down_proj_at_tp2_is_refused_with_the_tp_that_works():
    # down_proj is row-parallel: its 29,568 input features split over TP 2 = 14,784 per GPU; 14,784 / 128 = 115.5, not
    # whole → awq.py "The input size is not aligned". 29,568 = 2^7 × 231: only TP 1 keeps whole groups (64 heads and 8
    # KV heads also allow 1), so the fix is --tp 1.
    m = _qwen72b_awq()
    bad = tp_misalignment(m, m.quant, 2)
    assert (bad.path, bad.size, bad.full, bad.multiple) == ("model.layers.0.mlp.down_proj.weight", 14784, 29568, 128)
    with pytest.raises(InputError) as err:
        loaded_weights(m, tp=2)
    msg = str(err.value)
    assert msg.startswith("--tp 2: vLLM 0.33.0 does not start qwen72b-awq: model.layers.0.mlp.down_proj has 14,784 "
                          "input features per GPU (29,568/2), not a multiple of 128")
    assert "The input size is not aligned with the quantized weight shape" in msg
    assert msg.endswith("a TP that works: --tp 1")


def test_the_29696_padded_awq_checkpoint_passes_at_tp4_and_tp8():
    # Qwen2.5-72B-Instruct-AWQ pads intermediate_size to 29,696: TP 4 → 7,424 = 58 × 128, TP 8 → 3,712 = 29 × 128;
    # the gate/up outputs (column-parallel) 7,424 and 3,712 are multiples of AWQ's 8-value int32 packing.
    m = _qwen72b_awq(29696)
    for tp in (1, 2, 4, 8):
        assert tp_misalignment(m, m.quant, tp) is None
        check_quant_tp(m, m.quant, tp)


def test_block_fp8_qwen3_32b_at_tp16_is_refused_at_tp8_passes():
    # Qwen3-32B-FP8, weight_block_size [128, 128]: down_proj's 25,600 inputs over TP 16 = 1,600 = 12.5 × 128 → refused
    # (fp8_utils.py validate_fp8_block_shape, block_k); TP 8: 3,200 = 25 × 128; gate/up outputs 3,200 too.
    m = load_model("Qwen/Qwen3-32B-FP8")
    bad = tp_misalignment(m, m.quant, 16)
    assert (bad.path, bad.size, bad.multiple, bad.what) == ("model.layers.0.mlp.down_proj.weight", 1600, 128,
                                                            "input features")
    assert tp_misalignment(m, m.quant, 8) is None
    with pytest.raises(InputError, match=r"a TP that works: --tp 8$"):
        check_quant_tp(m, m.quant, 16)


def test_block_fp8_moe_experts_under_tp_vs_expert_parallel():
    # Qwen3-30B-A3B-FP8: moe_intermediate_size 768 over TP 8 = 96 < block_n 128 → Fp8MoEMethod refuses; TP 4 → 192
    # = 1.5 × 128, refused too; TP 2 → 384 = 3 × 128 passes. With --enable-expert-parallel the experts stay whole
    # (768 = 6 × 128) and the dense layers (o_proj inputs 4,096/8 = 512 = 4 × 128) pass.
    m = load_model("Qwen/Qwen3-30B-A3B-FP8")
    assert tp_misalignment(m, m.quant, 8).size == 96
    assert tp_misalignment(m, m.quant, 4).size == 192
    assert tp_misalignment(m, m.quant, 2) is None
    assert tp_misalignment(m, m.quant, 8, ep=8) is None
    with pytest.raises(InputError) as err:
        check_quant_tp(m, m.quant, 8)
    assert str(err.value).endswith("a TP that works: --tp 2 or --enable-expert-parallel at --tp 8 (experts whole on "
                                   "each rank)")


def test_merged_column_layers_skip_the_block_n_check_from_0_14():
    # Qwen3-32B-FP8 with 40 heads of head_dim 96 (8 KV heads): q_proj's 40 × 96 = 3,840 outputs over TP 8 = 480 =
    # 3.75 × 128. vLLM 0.13 refuses the merged qkv_proj (block_n); 0.14+ let a merged layer through
    # (linear.py _maybe_allow_fp8_block_shape_mismatch), and o_proj's 3,840 inputs / 8 = 480 then refuse it (block_k).
    raw = json.loads((resources.files("kvledger.catalog") / "data/models/Qwen--Qwen3-32B-FP8.json").read_text())
    raw.update(num_attention_heads=40, num_key_value_heads=8, head_dim=96)
    m = parse_config(raw, source="t", name="t")
    old, new = tp_misalignment(m, m.quant, 8, version=(0, 13, 0)), tp_misalignment(m, m.quant, 8, version=(0, 14, 0))
    assert (old.path, old.size, old.what) == ("model.layers.0.self_attn.q_proj.weight", 480, "output features")
    assert (new.path, new.size, new.what) == ("model.layers.0.self_attn.o_proj.weight", 480, "input features")


def test_unquantized_and_tp1_are_never_refused():
    assert tp_misalignment(load_model("Qwen/Qwen2.5-72B"), load_model("Qwen/Qwen2.5-72B").quant, 8) is None
    m = _qwen72b_awq()
    assert tp_misalignment(m, m.quant, 1) is None
