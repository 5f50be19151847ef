"""simulate's refusal of a max_model_len the KV pool cannot hold names the same pair of lengths plan's advice does."""

from __future__ import annotations

import pytest

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.analyses.serving.from_plan import engine_config_from_plan
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model
from kvledger.errors import InputError


def test_the_refusal_names_the_point_estimate_and_the_length_that_starts_for_sure():
    # Qwen3-32B on one H100 (vLLM latest): 2,203 usable blocks of 16 tokens at the plan's point figure, so vLLM's
    # estimate is 2,203 × 16 = 35,248 tokens; the low end of the plan's block range leaves 1,850 usable blocks, 29,600
    # tokens. A request of the model's 40,960 tokens needs 2,560 blocks: vLLM refuses to start. plan's advice prints
    # both lengths; simulate's refusal (the engine's rule) gains the second.
    plan = build_plan(load_model("Qwen/Qwen3-32B", allow_hub=False), get_gpu("H100-SXM"), make_settings(),
                      with_advice=False)
    assert plan.memory.usable_blocks == 2203
    with pytest.raises(InputError) as e:
        engine_config_from_plan(plan)
    msg = str(e.value)
    assert "needs 2,560 blocks, so it could never run" in msg and "≤ 35,248 (--max-model-len 35248)" in msg
    assert "at the low end of its range 29,600 (--max-model-len 29600) is the length that starts for sure" in msg
    # with a pool given by hand (no memory range) the refusal is the engine's alone
    with pytest.raises(InputError) as e:
        engine_config_from_plan(plan, num_gpu_blocks=2000)
    assert "29,600" not in str(e.value) and "could never run" in str(e.value)


def test_a_hybrid_models_refusal_names_the_length_that_fits():
    # gemma-2-9b-it on one L4, vLLM 0.33, FP8 KV: the plan's pool is 875 blocks of 16 tokens (874 usable; its range's
    # low end holds none, so there is no second length). Each block spans one layer of both groups (21 full + 21
    # sliding), so vLLM's start-up check counts cdiv(L, 16) full blocks + cdiv(min(4,095 + 2 × 2,048, L), 16) + 1
    # sliding ones (each spec's max_memory_usage_bytes, not capped at the request's own blocks as admission is):
    # 512 + 513 = 1,025 at L = 8,192 > 874, so vLLM refuses to start (plan's advice says the same 1,025). vLLM's
    # estimate (its start-up rule, cdiv(min(8,191, L), 16) + 1 sliding) is the largest L with 2 × cdiv(L, 16) + 1 ≤
    # 874: 436 blocks, L = 6,976, the length plan prints. The refusal used to stop at "could never run …, or give
    # the KV cache more memory" with no length: the block rule of a hybrid layout gives the pool check none.
    plan = build_plan(load_model("google/gemma-2-9b-it", allow_hub=False), get_gpu("L4"),
                      make_settings(engine_version="0.33.0", kv_cache_dtype="fp8"), with_advice=False)
    assert plan.memory.usable_blocks == 874
    with pytest.raises(InputError) as e:
        engine_config_from_plan(plan)
    msg = str(e.value)
    assert "needs 1,025 blocks, so it could never run (vLLM refuses to start in this case); lower max_model_len," in msg
    assert msg.endswith("gives vLLM's estimate of 6,976 tokens (--max-model-len 6976)")


def test_plan_and_the_simulators_refusal_count_the_same_start_up_blocks():
    # gemma-2-9b on one L4 (bf16 KV, vLLM 0.33, max_model_len 8,192): 437 blocks, 436 usable. vLLM's start-up check
    # counts 512 full + cdiv(min(4,095 + 4,096, 8,192), 16) + 1 = 513 sliding = 1,025 blocks; plan's verdict and the
    # simulator's refusal both name 1,025 (the refusal used to say 1,024, the runtime admission's capped count).
    plan = build_plan(load_model("google/gemma-2-9b", allow_hub=False), get_gpu("L4"), make_settings())
    assert plan.memory.usable_blocks == 436 and "(1,025 blocks)" in plan.advice.message
    with pytest.raises(InputError, match="needs 1,025 blocks"):
        engine_config_from_plan(plan)
