"""The step-cost protocol: how long one engine step (one forward pass over a mixed batch) takes.

The simulator asks a ``StepCostModel`` for the duration of each step from the step's
aggregate shape. Implementations: ``FixedStepCost`` (for scheduler tests), the
roofline (``kvledger.accounting.roofline.RooflineStepCost``) and calibrated models
fitted to measurements (``kvledger.accounting.calibrated``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    import numpy as np


__all__ = ["StepShape", "StepCostModel", "FastPricing", "StepPrice", "StepPrices", "step_prices", "shape_price",
           "step_pricer", "FixedStepCost", "decode_steps_by_loop"]


@dataclass(frozen=True, slots=True)
class StepShape:
    """Aggregate shape of one engine step (vLLM v1: prefill chunks and decodes in one batch).

    Attributes:
        num_prefill_tokens: new tokens computed this step for requests still in prefill, tokens.
        num_prefill_seqs: requests contributing a prefill chunk, count.
        prefill_kv_tokens: Σ over prefill chunks of the KV length attended to at the chunk's
            end (tokens computed before the chunk + the chunk), tokens.
        prefill_attn_pairs: Σ over prefill chunks of query×key pairs scored,
            ``c·p + c·(c+1)/2`` for a chunk of ``c`` tokens after ``p`` computed tokens (causal).
        num_decode_seqs: requests decoding one token this step, count.
        decode_kv_tokens: Σ over decoding requests of the KV length each attends to, tokens.
    """

    num_prefill_tokens: int = 0
    num_prefill_seqs: int = 0
    prefill_kv_tokens: int = 0
    prefill_attn_pairs: float = 0.0
    num_decode_seqs: int = 0
    decode_kv_tokens: int = 0

    @property
    def num_tokens(self) -> int:
        """Tokens processed this step (prefill chunk tokens + one per decode), tokens."""
        return self.num_prefill_tokens + self.num_decode_seqs

    @property
    def num_seqs(self) -> int:
        """Requests in the step, count."""
        return self.num_prefill_seqs + self.num_decode_seqs


@runtime_checkable
class StepCostModel(Protocol):
    """Anything that prices an engine step.

    ``step_time_s(shape)`` returns the step's duration in seconds (> 0 for a non-empty step).
    ``decode_steps_s(num_seqs, kv_tokens, num_steps)`` returns, as a float64 array of shape
    ``(num_steps,)``, the durations of ``num_steps`` consecutive pure-decode steps of
    ``num_seqs`` requests whose KV lengths sum to ``kv_tokens + i·num_seqs`` at step ``i``;
    it lets the simulator jump over stretches where the batch does not change.
    """

    name: str

    def step_time_s(self, shape: StepShape) -> float: ...

    def decode_steps_s(self, num_seqs: int, kv_tokens: int, num_steps: int) -> np.ndarray: ...


@runtime_checkable
class FastPricing(Protocol):
    """A step-cost model that also prices in plain Python floats, bit for bit as ``step_time_s`` / ``decode_steps_s``
    (the simulator's hot loop: ``RooflineStepCost``)."""

    def decode_steps_list(self, num_seqs: int, kv_tokens: int, num_steps: int) -> list[float]: ...

    def decode_plain_terms(self, num_seqs: int) -> tuple[float, float, float] | None: ...

    def step_time_of(self, num_prefill_tokens: int, num_prefill_seqs: int, prefill_kv_tokens: int,
                     prefill_attn_pairs: float, num_decode_seqs: int, decode_kv_tokens: int) -> float: ...


StepPrice = Callable[[int, int, int, float, int, int], float]
"""A step's price from ``StepShape``'s six fields, in its field order, s."""


@dataclass(frozen=True, slots=True)
class StepPrices:
    """The pricing calls the simulator's fast paths make, from any step-cost model (``step_prices``).

    Attributes:
        decode_list: ``decode_steps_s`` as a list of floats, s.
        decode_plain: ``(gemm s, KV bytes per token, bandwidth B/s)`` of a plain-form decode price, or None per batch
            size; None when the model has no plain form.
        step_price: a step's price from ``StepShape``'s six fields, s; None → build a StepShape for ``step_time_s``.
    """

    decode_list: Callable[[int, int, int], list[float]]
    decode_plain: Callable[[int], tuple[float, float, float] | None] | None
    step_price: StepPrice | None


def step_prices(cost: StepCostModel) -> StepPrices:
    """The fast pricing calls of ``cost``: its own when it is a ``FastPricing`` model, else ``decode_steps_s``."""
    if isinstance(cost, FastPricing):
        return StepPrices(cost.decode_steps_list, cost.decode_plain_terms, cost.step_time_of)
    return StepPrices(lambda n, kv_tokens, k: cost.decode_steps_s(n, kv_tokens, k).tolist(), None, None)


def shape_price(cost: StepCostModel, num_prefill_tokens: int, num_prefill_seqs: int, prefill_kv_tokens: int,
                prefill_attn_pairs: float, num_decode_seqs: int, decode_kv_tokens: int) -> float:
    """``cost.step_time_s`` of the step with these six fields, s: the price of a model without ``step_time_of``."""
    return cost.step_time_s(StepShape(num_prefill_tokens, num_prefill_seqs, prefill_kv_tokens, prefill_attn_pairs,
                                      num_decode_seqs, decode_kv_tokens))


def step_pricer(cost: StepCostModel, prices: StepPrices | None = None) -> StepPrice:
    """A step's price from ``StepShape``'s six fields, s: the model's own ``step_time_of`` where it is a
    ``FastPricing`` model, else its ``step_time_s`` through a ``StepShape`` (``shape_price``). ``prices``: the model's
    ``step_prices`` where the caller holds them already (the simulator's replica). Call it once, outside a step loop:
    the price it returns is the model's own bound method where it has one (the fast paths compare it with
    ``cost.step_time_of``)."""
    own = (step_prices(cost) if prices is None else prices).step_price
    return own if own is not None else partial(shape_price, cost)


def decode_steps_by_loop(model: StepCostModel, num_seqs: int, kv_tokens: int, num_steps: int) -> np.ndarray:
    """Reference implementation of ``decode_steps_s`` by calling ``step_time_s`` once per step."""
    import numpy as np

    out = np.empty(num_steps, dtype=np.float64)
    for i in range(num_steps):
        out[i] = model.step_time_s(StepShape(num_decode_seqs=num_seqs, decode_kv_tokens=kv_tokens + i * num_seqs))
    return out


@dataclass(frozen=True, slots=True)
class FixedStepCost:
    """A step costs ``per_step_s + per_token_s × tokens`` (a stand-in for scheduler tests, not a performance model).

    Attributes:
        per_step_s: fixed time per non-empty step, s.
        per_token_s: time per token processed (prefill or decode), s.
    """

    per_step_s: float = 0.01
    per_token_s: float = 0.0
    name: str = "fixed"

    def step_time_s(self, shape: StepShape) -> float:
        if shape.num_tokens == 0:
            return 0.0
        return self.per_step_s + self.per_token_s * shape.num_tokens

    def decode_steps_s(self, num_seqs: int, kv_tokens: int, num_steps: int) -> np.ndarray:
        import numpy as np

        t = 0.0 if num_seqs == 0 else self.per_step_s + self.per_token_s * num_seqs
        return np.full(num_steps, t, dtype=np.float64)
