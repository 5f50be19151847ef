"""SGLang with a context length its KV pool cannot hold for one request: it starts and serves shorter requests, where
vLLM refuses to start. The verdict is TensorRT-LLM's in the same case (``advice_trtllm_len.SERVED_AT_LOWER_LEN``).

Every release read (0.4.0, 0.5.3, 0.5.10, 0.5.14, 0.5.16, 0.5.17, 0.5.20, 0.5.21, 0.5.22, 0.5.23: ``managers/
tp_worker.py``, ``TpModelWorker.__init__``, from 0.5.14 also ``get_worker_info``) sets ``max_req_len = min(context_len
− 1, max_total_num_tokens − 1)`` and ``max_req_input_len = max_req_len − 5`` and asserts only that both are positive
("Memory pool size is too small"); the context length itself stays. The scheduler then aborts a prompt of
``max_req_input_len`` tokens or more (``managers/utils.py`` ``validate_input_length``; the scheduler's own check
before 0.5.x's helper) and caps max_new_tokens at ``max_req_len − prompt − 1`` (``scheduler.py``), so a request of
up to max_req_len − 1 tokens runs, as with --context-length set to the pool's tokens. 0.5.23 alone also logs a warning
("KV pool holds N tokens, fewer than --context-length M"); none refuses to start.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvledger.units import GiB

if TYPE_CHECKING:
    from kvledger.accounting.plan import Plan

__all__ = ["SGLANG_INPUT_MARGIN_TOKENS", "sglang_reduced_words"]

SGLANG_INPUT_MARGIN_TOKENS = 5
"""``max_req_input_len = max_req_len − 5`` (``managers/tp_worker.py``, 0.4.0–0.5.23), tokens."""

SGLANG_LEN_RULE = " = min(context_len − 1, pool tokens − 1)"
SGLANG_INPUT_RULE = f" (max_req_input_len = max_req_len − {SGLANG_INPUT_MARGIN_TOKENS})"
SGLANG_OUTPUT_CAP = " at max_req_len − prompt − 1"
"""The lower-length verdict's rules, each as the message words it (the short plan leaves them to --verbose)."""


def sglang_reduced_words(p: Plan, need_blocks: int) -> tuple[str, float, int] | None:
    """(message, shortfall B, the context length SGLang in effect serves: the pool's tokens) for a max_model_len
    request that needs more of the pool than it holds (module docstring); None where no prompt can run
    (max_req_input_len ≤ 0: SGLang's assertion stops the start-up)."""
    m = p.memory
    pool = m.pool_tokens
    max_req_len = min(m.max_model_len, pool) - 1
    max_input = max_req_len - SGLANG_INPUT_MARGIN_TOKENS
    if max_input <= 0:
        return None
    need, have = need_blocks * m.bytes_per_block, pool * m.bytes_per_block / m.block_size
    msg = (f"served at a lower length: SGLang starts, but one {m.max_model_len:,}-token request needs "
           f"{need / GiB:.2f} GiB of KV cache, more than the {have / GiB:.2f} GiB of the pool's {pool:,} token slots "
           f"(short by {(need - have) / GiB:.2f} GiB), so max_req_len{SGLANG_LEN_RULE} = "
           f"{max_req_len:,} (managers/tp_worker.py, every release 0.4.0–0.5.23; 0.5.23 logs a warning): prompts of "
           f"{max_input:,} tokens or more{SGLANG_INPUT_RULE} are aborted "
           f"and outputs are capped{SGLANG_OUTPUT_CAP} (managers/utils.py validate_input_length, "
           f"scheduler.py), so no request longer than {max_req_len - 1:,} tokens runs, as with --context-length "
           f"{pool}.")
    return msg, need - have, pool
