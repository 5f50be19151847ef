"""What a measured run's per-request times say about the engine that served it, before any step cost is fitted.

Three facts a V0 vLLM run (prefill-only steps) carries in its records:

* **Its prompt batches.** A V0 prompt step ends with one first token per prompt in it, recorded within a few
  milliseconds of each other (DistServe's vLLM fork stamps each request's tokens with ``time.perf_counter()`` while it
  processes the step's outputs, request after request), whereas two steps lie at least one step time apart (≥ 24 ms
  for OPT-13B on an A100). Grouping first tokens closer than ``same_step_s`` gives each prompt step's prompt lengths,
  and with them the padding vLLM 0.2.2+ caps at ``max_paddings`` (``core/scheduler.py``: batch × longest prompt −
  Σ prompts ≤ ``max_paddings``). A step whose padding exceeds the cap was not scheduled under it.
* **The KV blocks it held.** Between its first token and its last a request holds ``ceil((prompt + generated) /
  block_size)`` blocks, ``generated`` read as growing linearly from 1 to its output length over that interval (the
  records give no per-token times). The peak over time of the sum is a model-free reading of how much KV the engine
  held at once; compared with the same reading of a replay (same estimator, same bias), it says whether the replay's
  pool is the engine's (``benchmarks/distserve_evidence.py``).
* **Its decode steps.** Between a request's first token and its last, a V0 engine ran ``output − 1`` decode steps and
  every prompt step that ended in that interval (its own prompt step ended at its first token). With those prompt
  steps priced (by a profile's prompt terms), what is left is the time its decode steps took: their mean, against the
  mean number of requests decoding meanwhile, is a reading of the decode step's cost per decoding request that no
  replay enters (``benchmarks/distserve_decode_readoff.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from kvledger.errors import InputError
from kvledger.records import RequestRecord

__all__ = ["PromptStep", "prompt_steps", "kv_blocks_held", "decode_steps_read", "SAME_STEP_S"]

#: first tokens closer than this belong to one prompt step, s (well under one step, well over one step's bookkeeping)
SAME_STEP_S = 0.005


@dataclass(frozen=True, slots=True)
class PromptStep:
    """One prompt step read off the records: when it ended (its first first-token time, s) and its prompts' lengths."""

    end_s: float
    prompt_tokens: tuple[int, ...]

    @property
    def padding_tokens(self) -> int:
        """vLLM 0.2.x's padding of this batch: batch × longest prompt − Σ prompts, tokens."""
        return len(self.prompt_tokens) * max(self.prompt_tokens) - sum(self.prompt_tokens)


def _done(records: list[RequestRecord]) -> list[RequestRecord]:
    return [r for r in records if r.ok and r.first_token_s is not None and r.finish_s is not None]


def prompt_steps(records: list[RequestRecord], same_step_s: float = SAME_STEP_S) -> list[PromptStep]:
    """The prompt steps of a prefill-only (V0) run, in time order: first tokens less than ``same_step_s`` apart
    (each from the previous one) form one step.

    Raises:
        InputError: ``same_step_s`` not positive.
    """
    if not same_step_s > 0:
        raise InputError(f"same_step_s must be > 0 s, got {same_step_s!r}")
    recs = sorted(_done(records), key=lambda r: r.first_token_s)
    steps: list[list[RequestRecord]] = []
    for r in recs:
        if steps and r.first_token_s - steps[-1][-1].first_token_s < same_step_s:
            steps[-1].append(r)
        else:
            steps.append([r])
    return [PromptStep(s[0].first_token_s, tuple(r.num_prompt_tokens for r in s)) for s in steps]


def kv_blocks_held(records: list[RequestRecord], block_size: int, grid_s: float = 0.05) -> np.ndarray:
    """KV blocks the run's requests held at each time ``t = k·grid_s`` (k = 0, 1, … up to the last finish), blocks
    (module docstring: ``ceil((prompt + generated(t)) / block_size)`` per request from its first token to its
    finish, ``generated`` linear from 1 to the output length). Shape ``(num_times,)``, float64.

    Raises:
        InputError: ``block_size`` < 1 or ``grid_s`` not positive.
    """
    if isinstance(block_size, bool) or not isinstance(block_size, int) or block_size < 1:
        raise InputError(f"block_size must be an integer ≥ 1, got {block_size!r}")
    if not grid_s > 0:
        raise InputError(f"grid_s must be > 0 s, got {grid_s!r}")
    recs = _done(records)
    if not recs:
        return np.zeros(0)
    t = np.arange(0.0, max(r.finish_s for r in recs) + grid_s, grid_s)
    held = np.zeros_like(t)
    for r in recs:
        a, b = r.first_token_s, r.finish_s
        m = (t >= a) & (t < b)
        gen = 1.0 + (r.num_output_tokens - 1) * (t[m] - a) / max(b - a, 1e-12)
        held[m] += np.ceil((r.num_prompt_tokens + np.floor(gen)) / block_size)
    return held


def decode_steps_read(records: list[RequestRecord], prompt_step_s: Callable[[PromptStep], float],
                      min_output_tokens: int = 30) -> np.ndarray:
    """Per finished request with at least ``min_output_tokens`` output tokens, in first-token order, a row
    (decoding, decode step s, prompt steps per decode step) (module docstring): ``decoding`` is the time-mean number of
    requests between their first token and their finish over the request's own interval (itself included); the
    decode step is (finish − first token − Σ ``prompt_step_s`` of the prompt steps that ended after its first token
    and by its finish) / (output − 1). Shape ``(n, 3)``, float64.

    Raises:
        InputError: ``min_output_tokens`` < 2 (one output token has no decode step).
    """
    if isinstance(min_output_tokens, bool) or not isinstance(min_output_tokens, int) or min_output_tokens < 2:
        raise InputError(f"min_output_tokens must be an integer ≥ 2, got {min_output_tokens!r}")
    recs = sorted(_done(records), key=lambda r: r.first_token_s)
    first = np.array([r.first_token_s for r in recs])
    finish = np.array([r.finish_s for r in recs])
    steps = prompt_steps(recs)
    ends = np.array([s.end_s for s in steps])
    price = np.array([prompt_step_s(s) for s in steps])
    rows = []
    for r in recs:
        if r.num_output_tokens < min_output_tokens or not r.finish_s > r.first_token_s:
            continue
        a, b = r.first_token_s, r.finish_s
        inside = (ends > a) & (ends <= b)
        overlap = np.clip(np.minimum(finish, b) - np.maximum(first, a), 0.0, None).sum()
        n = r.num_output_tokens - 1
        rows.append((overlap / (b - a), (b - a - price[inside].sum()) / n, inside.sum() / n))
    return np.array(rows, dtype=np.float64).reshape(-1, 3)
