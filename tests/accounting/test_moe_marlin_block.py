"""MXFP4 experts below Hopper run vLLM's Marlin MoE, which pads each expert's rows to its own BLOCK_SIZE_M (the first of
8, 16, 32, 48, 64 with tokens·k/E/B < 0.9; vLLM 0.19 fused_marlin_moe.py), not Triton's default (16, then 64 once the
step's tokens pass E). Priced with Triton's rule, gpt-oss-20b on an RTX 4090 decoded slower at batch 64 than at 32
(1,553 → 1,136 tok/s): every expert padded to 64 rows."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvledger.accounting.moe_rows import block_m, marlin_block, padded_rows_moments
from kvledger.cli.main import app


@pytest.mark.parametrize("tokens,block", [(1, 8), (32, 8), (64, 16), (256, 48), (2048, 64)])
def test_marlin_block_follows_the_rows_per_expert(tokens, block):
    # gpt-oss-20b: k = 4 of E = 32. tokens·4/32 rows per expert: 0.125 and 4 → 8 (÷ 8 < 0.9); 8 → 16 (8/8 = 1.0,
    # 8/16 = 0.5); 32 → 48 (32/32 = 1.0, 32/48 = 0.67); 256 → none below 0.9, so 64
    assert marlin_block(tokens, 4, 32) == block


def test_at_64_tokens_marlin_pads_an_expert_to_16_rows_where_triton_pads_to_64():
    # c ~ Binomial(64, 4/32): mean 8, P(c = 0) = (7/8)^64 = 1.94e-4, P(c > 16) = 1.80e-3 (c > 32: ~0). Marlin (B = 16):
    # E[⌈c/16⌉·16] = 16·(1 − P(c = 0)) + 16·P(c > 16) = 16.026; Triton's default (M = 64 > E = 32: B = 64) =
    # 64·(1 − 1.94e-4) = 63.988
    assert block_m(64, 32) == 64
    assert padded_rows_moments(64, 4, 32, 0, marlin_block(64, 4, 32))[0] == pytest.approx(16.026, abs=0.005)
    assert padded_rows_moments(64, 4, 32)[0] == pytest.approx(63.988, abs=0.005)


def test_gpt_oss_decode_throughput_grows_from_batch_32_to_64_on_a_4090():
    res = CliRunner().invoke(app, ["plan", "openai/gpt-oss-20b", "--gpu", "RTX 4090", "--engine-version", "0.19.0",
                                   "--max-model-len", "32K", "--json"], catch_exceptions=False)
    d = json.loads(res.stdout)
    tok = {r["batch"]: r["tok_per_s"] for r in d["roofline"]["decode"] if r["context_tokens"] == 2048}
    assert tok[64] > tok[32] > tok[16]


def test_fp8_experts_take_marlin_below_sm89_and_triton_from_it():
    # Qwen3-30B-A3B-FP8 (k = 8 of E = 128): vLLM 0.19's oracle/fp8.py picks Marlin on an A100 (sm80: Triton takes FP8
    # from sm89) and Triton on an L40S (sm89). At 256 tokens, 16 rows per expert: Marlin's block is 32 (16/16 = 1.0,
    # 16/32 = 0.5), Triton's default 64 (M = 256 > E = 128)
    from kvledger.accounting.plan import build_plan
    from kvledger.accounting.roofline import RooflineStepCost
    from kvledger.accounting.settings import PlanSettings
    from kvledger.catalog.gpus import get_gpu
    from kvledger.catalog.models import load_model

    m = load_model("Qwen/Qwen3-30B-A3B-FP8", allow_hub=False)
    flags = {}
    for name in ("A100", "L40S"):
        g = get_gpu(name)
        kv = build_plan(m, g, PlanSettings(max_model_len=8192), with_roofline=False, with_advice=False).kv
        flags[name] = RooflineStepCost(m, g, kv).marlin_moe
    assert flags == {"A100": True, "L40S": False}
    assert (marlin_block(256, 8, 128), block_m(256, 128)) == (32, 64)
