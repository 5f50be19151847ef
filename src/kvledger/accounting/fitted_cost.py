"""The step-cost model ``kvledger calibrate`` fits: affine in a step's shape, plus a per-step CPU/serving overhead,
overlapped or not.

A step's GPU time is

    gpu = fixed_s + prefill_token_s·Σc + prefill_pair_s·pairs + decode_seq_s·B + decode_kv_token_s·ΣK
          + prefill_step_s·[Σc > 0]

(Σc prefill chunk tokens, pairs the causal query×key pairs of the chunks, B decoding requests,
ΣK the KV tokens they attend to: ``StepShape``'s fields). The CPU/serving overhead per step
(scheduling, input preparation, detokenisation, streaming) either runs between GPU steps —
``overlap=False``: step = gpu + cpu_overhead_s, as in a synchronous engine (vLLM V0, v1 without
async scheduling) — or overlaps the previous step's GPU work — ``overlap=True``: step =
max(gpu, cpu_overhead_s), as with vLLM v1's async scheduling (``--async-scheduling``,
``vllm/v1/engine/core.py::EngineCore.step_with_batch_queue``). In a synchronous engine the
overhead and ``fixed_s`` add up, and the data cannot tell them apart: a fit then puts both in
``fixed_s`` and leaves ``cpu_overhead_s`` at 0.

``prefill_step_s`` is the prefill regime's own fixed time: a step that computes any prefill chunk pays it on top of
``fixed_s`` (launching the prefill attention and the varlen/padded path; vLLM V0 runs prefill and decode as separate
batches). With it, the prefill and decode regimes are fitted apart: low-load TTFT (a prefill step's cost) no longer
has to share its intercept with the decode steps that set TPOT and the knee.

``frontend_s`` is not a step cost: it is the latency a client sees outside the engine (HTTP,
tokenisation, streaming the first chunk back), the same for every request. Replays against a
measured run (``kvledger validate``/``calibrate``) add it to each request's TTFT and E2E;
``kvledger simulate`` reports engine-side times without it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from kvledger.accounting.stepcost import StepShape

__all__ = ["LinearStepCost", "GPU_TERMS", "NUM_GPU_TERMS", "step_features"]

#: the GPU terms, in the order of ``step_features``' columns: (field, unit, what it prices)
GPU_TERMS: tuple[tuple[str, str, str], ...] = (
    ("fixed_s", "s per step", "fixed time of every non-empty step"),
    ("prefill_token_s", "s per prefill token", "weight matmuls and the rest of the per-token work of prefill chunks"),
    ("prefill_pair_s", "s per attention pair", "prefill attention, per causal query×key pair"),
    ("decode_seq_s", "s per decoding request", "per-request work of a decode (matmul rows, sampling)"),
    ("decode_kv_token_s", "s per KV token read", "decode attention: reading each decoding request's KV cache"),
    ("prefill_step_s", "s per step with prefill", "the prefill regime's fixed time, on top of fixed_s"),
)
NUM_GPU_TERMS = len(GPU_TERMS)


def step_features(shape: StepShape) -> tuple[float, ...]:
    """The GPU terms' multipliers for one step (1 for the fixed term; all 0 for an empty step)."""
    if shape.num_tokens == 0:
        return (0.0,) * NUM_GPU_TERMS
    return (1.0, float(shape.num_prefill_tokens), float(shape.prefill_attn_pairs), float(shape.num_decode_seqs),
            float(shape.decode_kv_tokens), 1.0 if shape.num_prefill_tokens else 0.0)


@dataclass(frozen=True, slots=True)
class LinearStepCost:
    """A fitted step-cost model (module docstring); every coefficient ≥ 0, in seconds per unit.

    Attributes:
        fixed_s, prefill_token_s, prefill_pair_s, decode_seq_s, decode_kv_token_s, prefill_step_s: GPU terms
            (``GPU_TERMS``).
        cpu_overhead_s: CPU/serving time per step, s.
        overlap: True when that overhead overlaps GPU work (async scheduling), else it adds to each step.
        name: how the simulator's outputs name the model (the calibration profile's file or label).
        frontend_s: per-request latency outside the engine, s (module docstring).
    """

    fixed_s: float
    prefill_token_s: float
    prefill_pair_s: float
    decode_seq_s: float
    decode_kv_token_s: float
    prefill_step_s: float = 0.0
    cpu_overhead_s: float = 0.0
    overlap: bool = False
    name: str = "fitted"
    frontend_s: float = 0.0

    def __post_init__(self) -> None:
        for k in ("fixed_s", "prefill_token_s", "prefill_pair_s", "decode_seq_s", "decode_kv_token_s",
                  "prefill_step_s", "cpu_overhead_s", "frontend_s"):
            v = getattr(self, k)
            if not isinstance(v, (int, float)) or isinstance(v, bool) or not np.isfinite(v) or v < 0:
                raise ValueError(f"{k} must be a finite number ≥ 0, got {v!r}")
            object.__setattr__(self, k, float(v))

    @property
    def gpu_coefficients(self) -> np.ndarray:
        """The GPU terms as an array in ``GPU_TERMS`` order."""
        return np.array([self.fixed_s, self.prefill_token_s, self.prefill_pair_s, self.decode_seq_s,
                         self.decode_kv_token_s, self.prefill_step_s], dtype=np.float64)

    def gpu_time_s(self, shape: StepShape) -> float:
        """The step's GPU time alone, s."""
        if shape.num_tokens == 0:
            return 0.0
        return (self.fixed_s + self.prefill_token_s * shape.num_prefill_tokens
                + self.prefill_pair_s * shape.prefill_attn_pairs + self.decode_seq_s * shape.num_decode_seqs
                + self.decode_kv_token_s * shape.decode_kv_tokens
                + (self.prefill_step_s if shape.num_prefill_tokens else 0.0))

    def step_time_s(self, shape: StepShape) -> float:
        if shape.num_tokens == 0:
            return 0.0
        g = self.gpu_time_s(shape)
        return max(g, self.cpu_overhead_s) if self.overlap else g + self.cpu_overhead_s

    def step_times_of(self, pf_tok: np.ndarray, pf_seqs: np.ndarray, pf_kv: np.ndarray, pairs: np.ndarray,
                      dec: np.ndarray, dec_kv: np.ndarray) -> np.ndarray:
        """``step_time_s`` over arrays of StepShape's fields, s (accounting/step_split.py prices many steps' parts at
        once)."""
        g = (self.fixed_s + self.prefill_token_s * pf_tok + self.prefill_pair_s * pairs + self.decode_seq_s * dec
             + self.decode_kv_token_s * dec_kv + np.where(pf_tok > 0, self.prefill_step_s, 0.0))
        t = np.maximum(g, self.cpu_overhead_s) if self.overlap else g + self.cpu_overhead_s
        return np.where(pf_tok + dec > 0, t, 0.0)

    def decode_steps_s(self, num_seqs: int, kv_tokens: int, num_steps: int) -> np.ndarray:
        if num_seqs == 0:
            return np.zeros(num_steps, dtype=np.float64)
        kv = kv_tokens + num_seqs * np.arange(num_steps, dtype=np.float64)
        g = self.fixed_s + self.decode_seq_s * num_seqs + self.decode_kv_token_s * kv
        return np.maximum(g, self.cpu_overhead_s) if self.overlap else g + self.cpu_overhead_s

    def coefficients(self) -> dict[str, Any]:
        """The coefficients and the overlap switch as a JSON-ready dict (``from_coefficients`` reads it back)."""
        d = asdict(self)
        d.pop("name")
        return d

    @classmethod
    def from_coefficients(cls, d: dict[str, Any], name: str = "fitted") -> LinearStepCost:
        """Build from ``coefficients()``' dict; raises KeyError/ValueError/TypeError on a malformed one."""
        keys = [t[0] for t in GPU_TERMS if t[0] != "prefill_step_s"]  # profiles written before it lack it: 0
        overlap = d.get("overlap", False)
        if not isinstance(overlap, bool):
            raise ValueError(f"overlap must be true or false, got {overlap!r}")
        return cls(*(d[k] for k in keys), prefill_step_s=d.get("prefill_step_s", 0.0),
                   cpu_overhead_s=d.get("cpu_overhead_s", 0.0), overlap=overlap, name=name,
                   frontend_s=d.get("frontend_s", 0.0))
