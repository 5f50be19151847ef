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
