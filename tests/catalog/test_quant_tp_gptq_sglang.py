"""GPTQ shards as SGLang 0.5.23 serves them, through Marlin (catalog/quant_tp_gptq_sglang.py), worked by hand:
gptq_marlin_repack.cuh refuses size_k % 16 and size_n % 64 (size_n: a fused layer's parts summed), gptq_marlin.cuh
refuses size_k % num_groups with num_groups = size_k // group_size (> 1), and gptq.py serves only 4/8-bit symmetric
checkpoints with group_size -1/32/64/128 (the plain GPTQ CUDA kernel is removed)."""

from __future__ import annotations

import json
from importlib import resources

import pytest

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.modelspec import parse_config
from kvledger.catalog.quant_tp import tp_misalignment
from kvledger.catalog.quant_tp_sglang import sglang_tp_misalignment
from kvledger.errors import InputError

GPTQ4 = {"quant_method": "gptq", "bits": 4, "group_size": 128, "desc_act": False, "sym": True}


def _model(name: str, quant: dict | None = None, **fields):
    raw = json.loads((resources.files("kvledger.catalog") / f"data/models/{name}.json").read_text())
    raw.update(quantization_config=dict(quant or GPTQ4), **fields)
    return parse_config(raw, source="t", name=f"{name}-gptq")


def _sglang(m, tp):
    return build_plan(m, get_gpu("H100"), make_settings(engine="sglang", tp=tp), with_roofline=False)


def test_llama2_7b_at_tp4_is_refused_by_marlins_group_count():
    # down_proj: 11,008 / 4 = 2,752 inputs per rank (2,752 % 16 = 0 passes the repack); scales 2,752 // 128 = 21
    # groups and 2,752 = 21 × 131 + 1, so gptq_marlin.cuh refuses; TP 2: 5,504 // 128 = 43 and 5,504 = 43 × 128
    m = _model("meta-llama--Llama-2-7b-hf")
    bad = sglang_tp_misalignment(m, m.quant, 4)
    assert (bad.path, bad.size, bad.full, bad.multiple) == ("model.layers.0.mlp.down_proj.weight", 2752, 11008, 21)
    with pytest.raises(InputError) as err:
        _sglang(m, 4)
    msg = str(err.value)
    assert "size_k = 2752, is not divisible by num_groups = 21" in msg and "gptq_marlin.cuh" in msg
    assert msg.endswith("a TP that works: --tp 2") and "\n" not in msg
    assert sglang_tp_misalignment(m, m.quant, 2) is None


def test_desc_act_keeps_the_row_parallel_scales_whole():
    # act order: marlin_repeat_scales_on_all_ranks keeps 11,008 // 128 = 86 groups on every rank, and 2,752 = 32 × 86
    m = _model("meta-llama--Llama-2-7b-hf", {**GPTQ4, "desc_act": True})
    assert sglang_tp_misalignment(m, m.quant, 4) is None


def test_qwen25_72b_at_tp8_fused_gate_up_is_not_a_tile_of_64():
    # gate_proj + up_proj fused: 2 × 29,568 / 8 = 7,392 outputs per rank, 7,392 = 115 × 64 + 32: the repack refuses.
    # The published GPTQ-Int4 checkpoint pads intermediate_size to 29,696: 2 × 3,712 = 7,424 = 116 × 64, down_proj
    # 3,712 // 128 = 29 groups with 3,712 = 29 × 128: it starts at TP 8
    m = _model("Qwen--Qwen2.5-72B")
    bad = sglang_tp_misalignment(m, m.quant, 8)
    assert (bad.path, bad.size, bad.full, bad.multiple) == ("model.layers.0.mlp.gate_up_proj", 7392, 59136, 64)
    assert "size_n = 7392 is not divisible by tile_n_size = 64" in bad.why
    padded = _model("Qwen--Qwen2.5-72B", intermediate_size=29696)
    assert sglang_tp_misalignment(padded, padded.quant, 8) is None


def test_marlin_checks_hold_at_tp1():
    # intermediate_size 11,000: gate_up 22,000 = 343 × 64 + 48 outputs; vLLM checks no group at TP 1
    m = _model("meta-llama--Llama-2-7b-hf", intermediate_size=11000)
    bad = sglang_tp_misalignment(m, m.quant, 1)
    assert (bad.size, bad.multiple) == (22000, 64) and tp_misalignment(m, m.quant, 1) is None


def test_moe_experts_need_twice_their_shard_in_tiles_of_64():
    # Qwen3-30B-A3B's moe_intermediate_size 768: TP 8 → 96 per rank, w13 size_n 192 = 3 × 64 passes; TP 16 → 48,
    # size_n 96 = 64 + 32 is refused
    m = _model("Qwen--Qwen3-30B-A3B")
    assert sglang_tp_misalignment(m, m.quant, 8) is None
    bad = sglang_tp_misalignment(m, m.quant, 16)
    assert (bad.what, bad.size, bad.multiple) == ("intermediate features", 48, 32) and "size_n = 96" in bad.why


@pytest.mark.parametrize("quant", [{**GPTQ4, "bits": 3}, {**GPTQ4, "sym": False}, {**GPTQ4, "group_size": 256}])
def test_a_checkpoint_marlin_cannot_take_is_not_served(quant):
    m = _model("meta-llama--Llama-2-7b-hf", quant)
    with pytest.raises(InputError, match="is not Marlin-compatible .*The non-Marlin GPTQ CUDA kernel has been removed"):
        _sglang(m, 1)


def test_the_plain_gptq_kernel_is_still_there_in_0_5_17():
    # 0.5.17's gptq_linear.py still has its CUDA kernel: a 3-bit checkpoint is not refused for Marlin there
    m = _model("meta-llama--Llama-2-7b-hf", {**GPTQ4, "bits": 3})
    plan = build_plan(m, get_gpu("H100"), make_settings(engine="sglang", engine_version="0.5.17"), with_roofline=False)
    assert plan.memory.engine == "sglang"
