"""A --block-size given for a dense MLA model (accounting/vllm_mla_given.py): vLLM 0.10.2–0.17.1 replace a size the
MLA backend's kernels do not take, from 0.18 the given size stands.

Read in platforms/cuda.py ``CudaPlatform.check_and_update_config``: 0.10.2 and 0.11.0 force FlashMLA (Hopper) to
exactly 64 (``block_size != 64``) and CUTLASS_MLA (SM 10.0) to exactly 128; 0.11.1 on test multiples
(``% 64``, ``% 128``); 0.15.0–0.17.1 pick FLASHINFER_MLA on the SM 10.x family for qk_nope_head_dim 128 and force 64
unless ``block_size == 32 or block_size % 64 == 0``. 0.18.0's ``update_block_size_for_backend`` returns when
``user_specified_block_size``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.accounting.vllm_mla_given import given_mla_block, given_sparse_mla_block
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model
from kvledger.catalog.modelspec import parse_config


@pytest.mark.parametrize("ver,arch,capability,nope,given,block", [
    ((0, 16, 0), "sm90", 90, 128, 16, 64), ((0, 17, 1), "sm90", 90, 128, 32, 64),  # FlashMLA: 16 % 64, 32 % 64 ≠ 0
    ((0, 17, 1), "sm90", 90, 128, 128, 128),  # a multiple of 64 passes from 0.11.1
    ((0, 10, 2), "sm90", 90, 128, 128, 64), ((0, 11, 0), "sm90", 90, 128, 128, 64),  # != 64 before 0.11.1
    ((0, 16, 0), "sm100", 100, 128, 16, 64), ((0, 17, 1), "sm100", 103, 128, 48, 64),  # FLASHINFER_MLA: 16, 48 → 64
    ((0, 16, 0), "sm100", 100, 128, 32, 32), ((0, 16, 0), "sm100", 100, 128, 192, 192),  # 32 and 3 × 64 pass
    ((0, 16, 0), "sm100", 100, 192, 64, 128), ((0, 14, 1), "sm100", 103, 128, 64, 128),  # CUTLASS_MLA: 64 % 128 ≠ 0
    ((0, 14, 1), "sm100", 100, 128, 256, 256), ((0, 10, 2), "sm100", 100, 128, 256, 128),  # 256 = 2 × 128; != 128
    ((0, 12, 0), "sm100", 103, 128, 16, 16),  # SM 10.3 before the family test, and not FlashMLA's SM 9.x: kept
    ((0, 16, 0), "sm120", 120, 128, 16, 16), ((0, 16, 0), "sm80", 80, 128, 16, 16),  # no backend forces a block
    ((0, 18, 0), "sm90", 90, 128, 16, 16), ((0, 19, 0), "sm100", 100, 128, 16, 16),  # 0.18: the user's size kept
    ((0, 10, 1), "sm90", 90, 128, 16, 16),  # before the releases read: kept
])
def test_the_given_block_by_release_and_backend(ver, arch, capability, nope, given, block):
    got, why = given_mla_block(ver, arch, capability, nope, given)
    assert got == block
    assert (why == "given") == (got == given)


def test_the_plan_says_the_engine_replaced_the_given_size():
    # DeepSeek-V2-Lite (27 layers, kv_lora_rank 512 + qk_rope_head_dim 64 = 576 values, bf16): 27 × 576 × 2 B =
    # 31,104 B per token. --block-size 16 on H100 with vLLM 0.16.0: FlashMLA forces 64, so 64 × 31,104 = 1,990,656 B
    # per block; vLLM 0.19.0 keeps 16: 16 × 31,104 = 497,664 B
    model, gpu = load_model("deepseek-ai/DeepSeek-V2-Lite"), get_gpu("h100")
    p = build_plan(model, gpu, make_settings(engine_version="0.16.0", max_model_len=8_192, block_size=16),
                   with_roofline=False)
    assert (p.memory.block_size, p.memory.bytes_per_block) == (64, 1_990_656)
    note = next(n for n in p.memory.notes if n.startswith("block_size 64"))
    assert "--block-size 16 given, but vLLM 0.16.0 replaces it" in note and "FlashMLA" in note
    q = build_plan(model, gpu, make_settings(engine_version="0.19.0", max_model_len=8_192, block_size=16),
                   with_roofline=False)
    assert (q.memory.block_size, q.memory.bytes_per_block) == (16, 497_664)
    assert "block_size 16: given" in q.memory.notes


def test_a_dense_model_keeps_its_given_block():
    # Llama-3.1-8B has no MLA layer: no MLA backend rule, the given 32 stands on Hopper in 0.16.0
    p = build_plan(load_model("meta-llama/Llama-3.1-8B"), get_gpu("h100"),
                   make_settings(engine_version="0.16.0", max_model_len=8_192, block_size=32), with_roofline=False)
    assert p.memory.block_size == 32


@pytest.mark.parametrize("ver,given,block", [
    ((0, 11, 0), 16, 64), ((0, 16, 0), 32, 64), ((0, 17, 1), 16, 64),  # use_sparse and block_size != 64 → 64
    ((0, 14, 1), 128, 64),  # exactly 64: a multiple is replaced too (the dense rule's % 64 does not apply)
    ((0, 16, 0), 64, 64),  # 64 passes
    ((0, 10, 2), 16, 16),  # no use_sparse before 0.11.0: kept
    ((0, 18, 0), 128, 128), ((0, 19, 0), 16, 16),  # update_block_size_for_backend keeps a user-specified size
])
def test_a_sparse_mla_given_block_by_release(ver, given, block):
    got, why = given_sparse_mla_block(ver, given)
    assert got == block
    assert (why == "given") == (got == given)


def test_the_plan_says_the_engine_replaced_a_sparse_mla_given_size():
    # DeepSeek-V3.2 (61 sparse MLA layers, index_topk 2048), bf16, TP 8 on H200. Before 0.28 kvledger keeps the plain
    # cache: 576 values × 2 B = 1,152 B per layer, plus the indexer's 128 FP8 + 4 B scale = 132 B: 61 × 1,284 = 78,324
    # B per token. --block-size 16 with vLLM 0.16.0: use_sparse forces 64 → 64 × 78,324 = 5,012,736 B per block;
    # vLLM 0.19.0 keeps 16: 16 × 78,324 = 1,253,184 B
    cfg = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "oracle_configs" / "deepseek_v32.json"
    model = parse_config(json.loads(cfg.read_text()), source="deepseek_v32")

    def plan(ver):
        return build_plan(model, get_gpu("h200"), make_settings(tp=8, engine_version=ver, max_model_len=8_192,
                                                                block_size=16), with_roofline=False).memory
    p, q = plan("0.16.0"), plan("0.19.0")
    assert (p.block_size, p.bytes_per_block) == (64, 5_012_736)
    note = next(n for n in p.notes if n.startswith("block_size 64"))
    assert "--block-size 16 given, but vLLM 0.16.0 replaces it" in note and "FlashMLASparse" in note
    assert (q.block_size, q.bytes_per_block) == (16, 1_253_184)
    assert "block_size 16: given" in q.notes
