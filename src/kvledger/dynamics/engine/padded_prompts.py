"""vLLM 0.2.x's padded prompt batches (``EngineConfig.max_paddings``; the ``vllm_v0`` rule of scheduler.py)."""

from __future__ import annotations

from kvledger.dynamics.engine.request_state import SimRequest

__all__ = ["padded_prompt_shape"]


def padded_prompt_shape(plan: list[tuple[SimRequest, int]]) -> tuple[int, int, float]:
    """A V0 prompt step as vLLM 0.2.x computed it (``max_paddings`` set), padded to [batch, longest prompt].

    Returns (prefill tokens, prefill KV tokens, causal attention pairs) of the padded batch:
    ``B·L``, ``B·L`` and ``B·L·(L+1)/2`` for ``B`` prompts of longest length ``L``, tokens
    (``worker/model_runner.py::_prepare_prompt`` pads every prompt to the longest).
    """
    longest = max(n for _, n in plan)
    padded = len(plan) * longest
    return padded, padded, padded * (longest + 1) / 2
