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
