"""vLLM's --max-model-len auto-fit on a pool worked by hand (accounting/vllm_auto_len.py): a full-attention layout of
16-token blocks, one request of L tokens holding ceil(L / 16) blocks."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kvledger.accounting.vllm_auto_len import auto_max_model_len
from kvledger.errors import DoesNotFitError


class _Layout:
    groups = ("full",)

    @staticmethod
    def blocks_per_request(length: int, inflight: int) -> int:
        return -(-length // 16)


def _fit(ver, blocks, derived=131_072, override=None):
    s = SimpleNamespace(auto_max_model_len=True, num_gpu_blocks_override=override)
    notes: list[str] = []
    return auto_max_model_len(s, ver, _Layout(), blocks, 0, derived, notes), notes


def test_the_null_block_counts_before_0_29_and_not_from_it():
    # a 10-block pool: 0.19 holds a request to all 10 blocks, 10 × 16 = 160 tokens; 0.29 keeps the null block back,
    # 9 × 16 = 144
    assert _fit((0, 19, 0), (10, 10))[0] == 160
    assert _fit((0, 29, 0), (10, 10))[0] == 144


def test_the_models_length_kept_where_it_fits_and_nothing_changes_without_auto():
    # 8,192 blocks hold 131,072 / 16 = 8,192: kept, with the note
    length, notes = _fit((0, 19, 0), (8_192, 8_192))
    assert length == 131_072 and notes[0].startswith("max_model_len auto (-1): the model's 131,072 tokens kept")
    s = SimpleNamespace(auto_max_model_len=None, num_gpu_blocks_override=None)
    assert auto_max_model_len(s, (0, 19, 0), _Layout(), (1, 1), 0, 131_072, []) == 131_072


def test_an_ignored_override_fits_to_the_profiled_memory():
    # before 0.21 the check (and auto-fit) read the profiled memory, not --num-gpu-blocks-override: 20 blocks → 320
    assert _fit((0, 19, 0), (5, 20), override=5)[0] == 320
    assert _fit((0, 21, 0), (5, 20), override=5)[0] == 80  # from 0.21 the override's 5 blocks


def test_not_one_token_is_vllms_cannot_auto_fit():
    with pytest.raises(DoesNotFitError, match="Cannot auto-fit max_model_len: not enough GPU memory available"):
        _fit((0, 29, 0), (1, 1))  # one block, the null block: none left


def test_before_0_29_the_fitted_length_is_never_scheduled_and_the_note_says_so():
    # a 10-block pool on 0.19: the fit holds a request to all 10 blocks (160 tokens), but block_pool.py hands the null
    # block to no request, so one request gets at most 9: 10 > 9, never scheduled; 0.29 fits 144 tokens = 9 blocks
    length, notes = _fit((0, 19, 0), (10, 10))
    assert length == 160 and notes[0].endswith(
        "; but one request that long takes 10 blocks, more than the 9 a request can get (the 10-block pool less its "
        "null block, which no request gets; the fit counts it before 0.29): it is never scheduled — the verdict gives "
        "the --max-model-len that runs")
    assert "never scheduled" not in _fit((0, 29, 0), (10, 10))[1][0]
    # the model's length kept where its 8,192 blocks are the whole 8,192-block pool: the same edge
    assert "takes 8,192 blocks, more than the 8,191 a request can get" in _fit((0, 19, 0), (8_192, 8_192))[1][0]
    assert "never scheduled" not in _fit((0, 19, 0), (8_193, 8_193))[1][0]  # one block to spare: it runs


def test_the_verdict_on_vllm_0_19_names_auto_and_the_length_that_runs():
    # Llama-3.1-8B on an L4, vLLM 0.19.0: the plan's pool is 2,093 blocks of 16 tokens; auto fits 2,093 × 16 = 33,488
    # tokens (every block, the null block counted), and 2,092 × 16 = 33,472 is the longest a request can be given
    from kvledger.api import plan

    p = plan("meta-llama/Llama-3.1-8B", "L4", max_model_len="auto", engine_version="0.19.0")
    assert (p.plan.memory.num_gpu_blocks, p.plan.memory.max_model_len) == (2_093, 33_488)
    msg = p.advice.message
    assert msg == ("fits: vLLM 0.19.0 starts, but --max-model-len auto fits 33,488 tokens, and a request that long can "
                   "never be scheduled: it needs 2,093 blocks, every block of the pool, and block_pool.py gives the "
                   "null block to none (auto's fit and the start-up check count it before 0.29: kv_cache_utils."
                   "_auto_fit_max_model_len estimates from the available KV bytes); --max-model-len 33472 runs (the "
                   "2,092 usable blocks hold it)")
    # given as a number, the same length keeps the words of any length given (no auto to name)
    given = plan("meta-llama/Llama-3.1-8B", "L4", max_model_len=33_488, engine_version="0.19.0").advice.message
    assert given.startswith("fits: vLLM 0.19.0 starts, but a request of max_model_len 33,488 tokens can never be "
                            "scheduled") and "auto" not in given
