"""TensorRT-LLM with a max_seq_len its KV pool cannot hold for one request: it starts and lowers max_seq_len, where vLLM
refuses to start.

Both runtimes clamp rather than refuse. The PyTorch backend's ``KVCacheManager``
(``tensorrt_llm/_torch/pyexecutor/resource_manager.py``) computes ``get_max_atten_window_upper_bound``: with beam width
1 and no sink tokens, blocks_in_primary_pool × tokens_per_block; where max_attention_window (max_seq_len by default) is
above it, it logs "maxAttentionWindow and maxSequenceLen are too large for at least one sequence to fit in kvCache.
They are reduced to N" and sets both to N (an assertion, "Impossible to fit in any sequence in kvCache", only at zero
blocks). The TensorRT-engine executor does the same in C++ (``cpp/tensorrt_llm/batch_manager/
trtGptModelInflightBatching.cpp``, ``getMaxAttentionWindowUpperBound``) and lowers max_input_len to N − 1. Read in
NVIDIA/TensorRT-LLM's source as stored (several snapshots agree), not pinned to one release.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvledger.units import GiB

if TYPE_CHECKING:
    from kvledger.accounting.plan import Plan

__all__ = ["SERVED_AT_LOWER_LEN", "trtllm_reduced_words"]

SERVED_AT_LOWER_LEN = "served_at_lower_len"
"""The verdict: the engine starts but serves only up to a lower length than max_model_len. Exit status 0, as vLLM
before 0.29 that starts with a max_model_len request it can never schedule (``advice_startup_len``): exit 3 says
nothing can start, and this server does."""


def trtllm_reduced_words(p: Plan, need_blocks: int) -> tuple[str, float, int]:
    """(message, shortfall B, the max_seq_len TensorRT-LLM lowers to, tokens) for a max_model_len request that needs
    more blocks than the pool holds (module docstring)."""
    m = p.memory
    tpb, blocks = m.block_size, m.num_gpu_blocks
    window = blocks * tpb  # get_max_atten_window_upper_bound at beam width 1, no sink tokens
    need, have = need_blocks * m.bytes_per_block, blocks * m.bytes_per_block
    msg = (f"served at a lower length: TensorRT-LLM starts, but one {m.max_model_len:,}-token request needs "
           f"{need / GiB:.2f} GiB of KV cache ({need_blocks:,} blocks of {tpb} tokens), more than the {have / GiB:.2f} "
           f"GiB of the pool's {blocks:,} blocks (short by {(need - have) / GiB:.2f} GiB), so it lowers max_seq_len "
           f"and the attention window to blocks × tokens_per_block = {blocks:,} × {tpb} = {window:,} tokens (PyTorch "
           "backend: _torch/pyexecutor/resource_manager.py KVCacheManager.get_max_atten_window_upper_bound, "
           "'maxAttentionWindow and maxSequenceLen are too large for at least one sequence to fit in kvCache'; the "
           f"TensorRT-engine executor: trtGptModelInflightBatching.cpp, with max_input_len {window - 1:,}), so no "
           f"request longer than {window:,} tokens runs.")
    return msg, need - have, window
