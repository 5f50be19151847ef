"""vLLM's start-up check and its printed "estimated maximum model length" by version: before 0.29 they count the block
pool's null block (v1/core/kv_cache_utils.py of 0.19.0 and 0.28.0 compare the KV bytes one max_model_len request needs
with the whole available memory), from 0.29.0 they reserve it ("Reserve the null block BlockPool permanently holds
back", check_enough_kv_cache_memory / get_kv_cache_configs). Before 0.29 a request may need every block and vLLM starts,
but the scheduler never hands out the null block (v1/core/block_pool.py: null_block = free_block_queue.popleft()), so
such a request is never scheduled."""

from __future__ import annotations

import pytest

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.analyses.serving.from_plan import engine_config_from_plan, refuses_max_model_len
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model
from kvledger.errors import DoesNotFitError

MODEL = "meta-llama/Llama-3.1-8B-Instruct"
# The real vLLM 0.19.0 start-up of Llama-3.1-8B-Instruct on one H100 (shared/data/vllm-startups-0.19/logs/
# meta-llama-llama-3-1-8b---h100-80gb--tp1pp1dp1--8192.log) prints "GPU KV cache size: 476,016 tokens" and
# "num_gpu_blocks is: 29751": 29,751 blocks of 16 tokens. A block is 16 tokens × 32 layers × 2 (K, V) × 8 KV heads ×
# 128 × 2 B = 2 MiB, so the pool is 29,751 × 2,097,152 = 62,392,369,152 B (given exactly: the printed 58.11 GiB is
# rounded).
POOL_BYTES = 29_751 * 2_097_152


def _plan(version: str, max_model_len: int):
    s = make_settings(engine_version=version, max_model_len=max_model_len, allow_long_max_model_len=True,
                      available_kv_memory_bytes=POOL_BYTES)
    return build_plan(load_model(MODEL), get_gpu("h100"), s, with_roofline=False)


def test_019_estimate_is_the_logged_pool_size_one_block_above_029():
    # max_model_len 476,017 needs cdiv(476,017, 16) = 29,752 blocks, more than all 29,751: every version refuses. vLLM
    # 0.19's _estimate_max_model_len_from_groups keeps L while cdiv(L, 16) × 2 MiB ≤ the available bytes, i.e.
    # L ≤ 29,751 × 16 = 476,016, the "GPU KV cache size" the 0.19 log prints; 0.29 reserves the null block first:
    # 29,750 × 16 = 476,000.
    old, new = _plan("0.19.0", 476_017), _plan("0.29.0", 476_017)
    assert old.memory.num_gpu_blocks == new.memory.num_gpu_blocks == 29_751
    assert old.advice.verdict == new.advice.verdict == "max_model_len_does_not_fit"
    assert old.advice.estimated_max_model_len == 476_016 and new.advice.estimated_max_model_len == 476_000
    # 0.19 is short by one block (29,752 − 29,751) × 2 MiB, 0.29 by two (against its 29,750 usable blocks)
    assert old.advice.shortfall_bytes == 2_097_152 and new.advice.shortfall_bytes == 2 * 2_097_152
    assert "a request that long would never be scheduled: 476,000 runs" in old.advice.message
    # the fix offered is the length that runs in both: at most the 29,750 usable blocks
    fix = [o for o in old.advice.options if o.action.startswith("--max-model-len")]
    assert fix and fix[0].context_tokens <= 476_000


@pytest.mark.parametrize("version", ["0.19.0", "0.28.0"])
def test_before_029_a_request_of_every_block_starts_but_is_never_scheduled(version):
    # 476,016 tokens need 29,751 blocks = the whole pool: 0.19 and 0.28 check against all 29,751 and start; the
    # requests get 29,750 (block 0 is the null block), so one that long never runs
    p = _plan(version, 476_016)
    assert p.advice.verdict == "fits" and p.row_at(476_016).max_requests == 0 and not p.fits
    assert f"vLLM {version} starts, but a request of max_model_len 476,016 tokens can never be scheduled" in \
        p.advice.message
    assert "29,750 usable blocks never hold it" in p.advice.message
    assert "--max-model-len 476000 runs" in p.advice.message  # 29,750 × 16


def test_from_029_a_request_of_every_block_is_refused():
    p = _plan("0.29.0", 476_016)
    assert p.advice.verdict == "max_model_len_does_not_fit" and p.advice.estimated_max_model_len == 476_000


def test_simulator_says_vllm_before_029_starts_but_the_request_never_runs():
    # --num-gpu-blocks-override 512 and max_model_len 8,192 = 512 blocks of 16: the whole pool
    def cfg(version):
        s = make_settings(engine_version=version, max_model_len=8192, num_gpu_blocks_override=512)
        return engine_config_from_plan(build_plan(load_model(MODEL), get_gpu("h100"), s, with_roofline=False,
                                                  with_advice=False))

    with pytest.raises(DoesNotFitError) as old:
        cfg("0.28.0")
    assert str(old.value).startswith("vLLM 0.28.0 starts, but a request of max_model_len 8,192 tokens can never be "
                                     "scheduled") and "--max-model-len 8176 runs" in str(old.value)  # 511 × 16
    assert refuses_max_model_len(old.value)
    with pytest.raises(DoesNotFitError) as new:
        cfg("0.29.0")
    assert "vLLM refuses to start in this case" in str(new.value)
