"""The simulator's step cost under ``--pp P`` (vLLM ``--pipeline-parallel-size``): each stage's share of a step and the
sends between stages, around the whole model's step cost at TP ``tp`` (the plan's roofline, or another model).

A stage runs its layers only (vLLM ``distributed/utils.py::get_pp_indices``, ``vllm_profile.pp_stages``): its compute
is the step's compute × its layers / all layers (the embedding on the first stage and the LM head and sampler on the
last are priced with the layers, as the whole step prices them). Between stage b and b + 1 the batch's intermediate
tensors are sent (``pipeline_pass.PipelineSends.boundary_s``: the same send the plan's roofline adds to a pass). A pass
(``step_time_s``) is every stage in turn plus every send: the plan's pipeline roofline, one batch at a time. The
simulator's engine loop (``dynamics/pipeline.py``) instead overlaps up to P batches, one per stage, through
``stage_times_s`` and ``send_s``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kvledger.accounting.pipeline_pass import PipelineSends
from kvledger.accounting.stepcost import StepShape

__all__ = ["PipelineStepCost"]

_NOT_DELEGATED = frozenset({"step_time_of", "decode_steps_list", "decode_plain_terms"})
"""The inner model's fast pricing calls, which leave the sends out: not taken from it (``step_prices`` then prices
through ``decode_steps_s``, and the C core's roofline form does not apply)."""


class PipelineStepCost:
    """The whole model's step cost ``inner`` split over ``len(layers)`` stages with ``sends`` between them.

    Args:
        inner: the step cost of all layers at TP ``tp`` (a ``StepCostModel``).
        sends: the pass's stage-to-stage sends (``pipeline_pass.pipeline_sends``).
        layers: each stage's decoder layers, count (``vllm_profile.pp_stages``).
        overlapping: vLLM keeps up to P batches in flight, each request in one (True: without async scheduling), or
            runs one pass at a time (False: the V1 model runner's async scheduling under PP, module doc of
            ``analyses/serving/sim_pp.py``).
        staggered: the V2 model runner's async loop (``dynamics/pipeline_v2.py``: P + 1 batches in flight, each
            request's decodes P scheduler steps apart); with ``overlapping``.
    """

    def __init__(self, inner: Any, sends: PipelineSends, layers: tuple[int, ...], overlapping: bool,
                 staggered: bool = False) -> None:
        self.inner, self.sends, self.overlapping, self.staggered = inner, sends, overlapping or staggered, staggered
        self.pp = len(layers)
        total = sum(layers)
        self.shares = tuple(n / total for n in layers)
        self.layers = tuple(layers)
        self.name = getattr(inner, "name", type(inner).__name__)

    def stage_times_s(self, shape: StepShape) -> list[float]:
        """Each stage's compute for this step, s: the whole step's × the stage's share of the layers."""
        whole = self.inner.step_time_s(shape)
        return [whole * f for f in self.shares]

    def send_s(self, tokens: int, b: int) -> float:
        """The send from stage ``b`` to ``b`` + 1 of a step of ``tokens`` tokens, s."""
        return self.sends.boundary_s(tokens, b)

    def step_time_s(self, shape: StepShape) -> float:
        """One pass through every stage in turn, s (the plan's pipeline roofline: compute + every send)."""
        return self.inner.step_time_s(shape) + self.sends.seconds(shape.num_tokens)

    def decode_steps_s(self, num_seqs: int, kv_tokens: int, num_steps: int) -> np.ndarray:
        """``num_steps`` pure-decode passes (``StepCostModel``), s each."""
        return self.inner.decode_steps_s(num_seqs, kv_tokens, num_steps) + self.sends.seconds(num_seqs)

    def __getattr__(self, name: str) -> Any:  # the inner model's figures (gpu, model, fractions) for notes and bands
        if name in _NOT_DELEGATED or name == "inner" or name.startswith("__"):
            raise AttributeError(name)
        return getattr(self.inner, name)
