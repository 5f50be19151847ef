"""The cost side of the FP8 KV cache: the overhead model, its default, and the fit that calibrates it from a measured
bf16-vs-fp8 decode table.

Model (docs/engine-model.md §6.5): with ``--kv-cache-dtype fp8`` a decode step reads half the KV
bytes, and pays extra time

    overhead_s = L_attn × per_layer_s + elements × ns_per_element × 1e-9

where ``L_attn`` is the number of layers keeping KV and ``elements`` the K and V scalars the step reads
and writes (one byte each in fp8, so ``elements`` = the fp8 step's KV bytes). The fixed term stands for
work done once per layer per step whatever the batch: quantising the new K/V as separate kernels
(sglang #30815 names "multiple kernel launches per layer per step" as the cause of its Hopper slowdown),
converting the query for an FP8 attention kernel (FlashAttention 3 quantises queries too, vLLM docs
"Quantized KV Cache"). The per-element term stands for the FP8 attention path reading K/V less
efficiently than its bf16 twin (dequantisation not hidden behind memory traffic).

Fit (``fit_fp8_overhead``): a table of per-sequence decode rates at (context, batch), bf16 and fp8, on one
model and GPU. Step time = 1 / (tokens/s per sequence). First the bf16 rows fix the baseline
``t = a·bytes + t0`` (least squares: ``1/a`` is the effective bandwidth, ``t0`` the per-step time not
explained by HBM traffic, e.g. CPU and launch overhead); then the fp8 rows' excess over
``a·bytes_fp8 + t0`` is fitted by non-negative least squares to ``[L_attn, elements]``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kvledger.accounting.kvcache import kv_ledger
from kvledger.accounting.roofline import RooflineStepCost
from kvledger.accounting.roofline_breakdown import decode_shape
from kvledger.catalog.gpus import GpuSpec
from kvledger.catalog.modelspec import ModelSpec
from kvledger.errors import InputError
from kvledger.jsonable import to_jsonable

__all__ = ["Fp8Overhead", "Fp8Measurement", "Fp8Calibration", "VLLM_DOCS_L4_QWEN3_4B", "VLLM_DOCS_L4_SOURCE",
           "DEFAULT_FP8_OVERHEAD", "fit_fp8_overhead", "kv_layers", "fitted_step_cost"]


@dataclass(frozen=True)
class Fp8Overhead:
    """Extra time the FP8 KV path adds to one step.

    Attributes:
        per_layer_s: fixed time per KV-holding layer per step, s.
        ns_per_element: time per K or V scalar read or written, ns (one element = one byte in fp8).
        source: where the two values come from.
    """

    per_layer_s: float
    ns_per_element: float
    source: str

    def __post_init__(self) -> None:
        for name in ("per_layer_s", "ns_per_element"):
            v = getattr(self, name)
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v >= 0):
                raise InputError(f"FP8 overhead {name} must be a finite number ≥ 0, got {v!r}")

    def step_s(self, num_kv_layers: int, elements: float) -> float:
        """Overhead of one step with ``elements`` K/V scalars read + written over ``num_kv_layers`` layers, s."""
        return num_kv_layers * self.per_layer_s + elements * self.ns_per_element * 1e-9


@dataclass(frozen=True)
class Fp8Measurement:
    """One row of a bf16-vs-fp8 decode table.

    Attributes:
        context_tokens: KV length per sequence, tokens. batch: sequences decoding together, count.
        bf16_tok_per_s / fp8_tok_per_s: decode rate per sequence, tok/s (1 / step time; an aggregate rate over
            the batch, what ``vllm bench`` reports, is this × batch: ``fp8_measurements_csv`` divides it).
    """

    context_tokens: int
    batch: int
    bf16_tok_per_s: float
    fp8_tok_per_s: float

    def __post_init__(self) -> None:
        if self.context_tokens < 1 or self.batch < 1:
            raise InputError(f"measurement {self}: context_tokens and batch must be ≥ 1")
        if not (self.bf16_tok_per_s > 0 and self.fp8_tok_per_s > 0):
            raise InputError(f"measurement {self}: decode rates must be > 0 tok/s")


# the table came with vLLM's PR #49050
VLLM_DOCS_L4_SOURCE = ("vLLM docs, 'Quantized KV Cache' → 'Performance Considerations': vLLM 0.25.1, "
                       "Qwen3-4B on one NVIDIA L4, batch-1 decode, prefix caching off")
VLLM_DOCS_L4_QWEN3_4B = (
    Fp8Measurement(2048, 1, 29.1, 29.4),
    Fp8Measurement(8192, 1, 26.4, 27.9),
    Fp8Measurement(16384, 1, 23.6, 26.2),
    Fp8Measurement(32768, 1, 19.4, 23.4),
)
"""The published table (tok/s per sequence at batch 1); Apache-2.0 documentation, numbers copied as data."""

DEFAULT_FP8_OVERHEAD = Fp8Overhead(
    per_layer_s=6.5e-6, ns_per_element=5.3e-5,
    source="fitted by fit_fp8_overhead (least squares) to the L4 / Qwen3-4B table of vLLM 0.25.1's quantized-KV "
           "docs (batch-1 decode, bf16 vs fp8 tok/s at 4 context lengths; the only first-party measurement found); "
           "transferring it to another GPU or attention backend is an assumption — calibrate with your own "
           "bf16-vs-fp8 runs")
"""Default overhead: 6.5 µs per layer per step + 5.3e-5 ns (0.053 ps) per K/V element (the L4 fit, rounded to two
significant figures; it reproduces the four fp8 rows within 0.2%). See the module docstring."""


def kv_layers(model: ModelSpec) -> int:
    """Layers that keep a KV cache (full, sliding, chunked, MLA; not Mamba/linear state), count."""
    return sum(1 for layer in model.layers if layer is not None and layer.kind != "state")


@dataclass(frozen=True)
class Fp8Calibration:
    """The result of ``fit_fp8_overhead``.

    Attributes:
        overhead: the fitted FP8 overhead.
        effective_bandwidth_bytes_per_s: 1/a of the bf16 baseline fit, B/s; bandwidth_fraction: that ÷ the datasheet.
        step_fixed_s: t0 of the baseline fit (per-step time not explained by HBM traffic), s.
        rows: per measurement: measured and fitted step times (bf16 and fp8), s, and the fp8 error, %.
        max_abs_error_pct: worst fp8 step-time error of the fitted model, %.
        model / gpu / source: what was measured, and where the table comes from. notes: caveats.
    """

    overhead: Fp8Overhead
    effective_bandwidth_bytes_per_s: float
    bandwidth_fraction: float
    step_fixed_s: float
    rows: tuple[dict[str, float], ...]
    max_abs_error_pct: float
    model: str
    gpu: str
    source: str
    notes: tuple[str, ...] = field(default_factory=tuple)

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


def _lstsq2(x1: list[float], x2: list[float], y: list[float]) -> tuple[float, float]:
    """Least squares y ≈ p·x1 + q·x2 (normal equations); a singular system fits p alone."""
    s11 = sum(a * a for a in x1)
    s22 = sum(b * b for b in x2)
    s12 = sum(a * b for a, b in zip(x1, x2))
    s1y = sum(a * c for a, c in zip(x1, y))
    s2y = sum(b * c for b, c in zip(x2, y))
    det = s11 * s22 - s12 * s12
    if abs(det) <= 1e-12 * max(s11 * s22, 1e-300):
        return (s1y / s11 if s11 else 0.0), 0.0
    return (s1y * s22 - s2y * s12) / det, (s2y * s11 - s1y * s12) / det


def _nnls2(x1: list[float], x2: list[float], y: list[float]) -> tuple[float, float]:
    """Non-negative least squares in two unknowns: the best of the unconstrained, the two one-term and the zero fit."""
    def sse(p: float, q: float) -> float:
        return sum((c - p * a - q * b) ** 2 for a, b, c in zip(x1, x2, y))
    cands = [(0.0, 0.0)]
    p, q = _lstsq2(x1, x2, y)
    if p >= 0 and q >= 0:
        cands.append((p, q))
    s11, s22 = sum(a * a for a in x1), sum(b * b for b in x2)
    if s11:
        cands.append((max(0.0, sum(a * c for a, c in zip(x1, y)) / s11), 0.0))
    if s22:
        cands.append((0.0, max(0.0, sum(b * c for b, c in zip(x2, y)) / s22)))
    return min(cands, key=lambda pq: sse(*pq))


def _check_bandwidth(bw: float, gpu: GpuSpec, source: str) -> None:
    """Refuse a bf16 baseline that reads KV and weights faster than the GPU's HBM can (a fit above 100% of the
    datasheet bandwidth): the rates are not per-sequence decode rates of this GPU, most likely aggregate tok/s."""
    frac = bw / gpu.hbm_bandwidth_bytes_per_s
    if frac > 1.0:
        raise InputError(
            f"the calibration {source} does not fit: its bf16 rows imply an effective bandwidth of {bw / 1e9:,.0f} "
            f"GB/s, {frac:.0%} of the {gpu.name}'s {gpu.hbm_bandwidth_bytes_per_s / 1e9:,.0f} GB/s of HBM, more than "
            "the GPU can read. The likely cause is a unit mix-up: aggregate tok/s (all sequences together, what vllm "
            "bench reports as output token throughput) in per-sequence columns; name the columns "
            "bf16_tok_per_s_aggregate,fp8_tok_per_s_aggregate for those, or check --calibration-model and "
            "--calibration-gpu")


def fit_fp8_overhead(rows: Iterable[Fp8Measurement], model: ModelSpec, gpu: GpuSpec, *, tp: int = 1,
                     source: str = "user measurements") -> Fp8Calibration:
    """Fit the FP8 overhead (and the bf16 baseline it is measured against) to a decode table.

    Args:
        rows: measurements on ``model`` and ``gpu`` (at least two distinct contexts or batches).
        model, gpu, tp: what was measured.
        source: the table's provenance, carried into the result.

    Raises:
        InputError: fewer than two rows, rows whose bf16 KV bytes are all equal (baseline not identifiable), or a
            baseline faster than the GPU's HBM bandwidth (per-sequence rates that are aggregate ones).
    """
    rows = list(rows)
    if len(rows) < 2:
        raise InputError(f"fitting the FP8 overhead needs at least 2 measurements, got {len(rows)}")
    rb = RooflineStepCost(model, gpu, kv_ledger(model, "auto", tp), tp)
    rf = RooflineStepCost(model, gpu, kv_ledger(model, "fp8", tp), tp)
    cb = [rb.costs(decode_shape(r.batch, r.context_tokens)) for r in rows]
    cf = [rf.costs(decode_shape(r.batch, r.context_tokens)) for r in rows]
    if len({c.bytes for c in cb}) < 2:
        raise InputError(
            "the measurements all have the same KV bytes per step: vary context or batch to fit a baseline"
        )
    tb = [1 / r.bf16_tok_per_s for r in rows]
    tf = [1 / r.fp8_tok_per_s for r in rows]
    a, t0 = _lstsq2([c.bytes for c in cb], [1.0] * len(rows), tb)
    if a <= 0:
        raise InputError("the bf16 step times do not grow with KV bytes: the baseline fit failed (check the table)")
    _check_bandwidth(1 / a, gpu, source)
    L = kv_layers(model)
    elements = [c.kv_bytes - 2 * rf.state_bytes * r.batch for c, r in zip(cf, rows)]
    excess = [t - (a * c.bytes + t0) for t, c in zip(tf, cf)]
    f, x = _nnls2([float(L)] * len(rows), elements, excess)
    ov = Fp8Overhead(f, x * 1e9, f"fitted to {len(rows)} measurements: {source}")
    out, worst = [], 0.0
    for r, c_b, c_f, t_b, t_f, el in zip(rows, cb, cf, tb, tf, elements):
        pb, pf = a * c_b.bytes + t0, a * c_f.bytes + t0 + ov.step_s(L, el)
        err = 100 * (pf - t_f) / t_f
        worst = max(worst, abs(err))
        out.append({"context_tokens": r.context_tokens, "batch": r.batch, "bf16_measured_s": t_b, "bf16_fitted_s": pb,
                    "fp8_measured_s": t_f, "fp8_fitted_s": pf, "fp8_error_pct": err})
    notes = []
    compute = [c.flops / (rb.peak_flops * rb.flops_fraction) for c in cb]
    if any(ct > a * c.bytes for ct, c in zip(compute, cb)):
        notes.append("some rows look compute-bound on the roofline; the memory-bound baseline fit is then only "
                     "approximate")
    return Fp8Calibration(ov, 1 / a, (1 / a) / gpu.hbm_bandwidth_bytes_per_s, t0, tuple(out), worst, model.name,
                          gpu.name, source, tuple(notes))


def fitted_step_cost(rc: RooflineStepCost, fit: str) -> dict[str, Any]:
    """The step cost of a judgment priced by a calibration's fit (``fit``: it in words), in ``simulate``'s fields:
    deliberately the bare roofline, not ``simulate``'s step cost, since the fitted fixed time already holds the
    measured engine's host time (``accounting/host_overhead.py``: a model-scope fit is not given the host term)."""
    return {"name": "roofline", "scope": "model (your bf16-vs-fp8 runs)", "flops_fraction": rc.flops_fraction,
            "bandwidth_fraction": rc.bandwidth_fraction, "cpu_overhead_s": rc.cpu_overhead_s,
            "source": f"the bare roofline, deliberately (not simulate's step cost): weight matmuls then attention at "
                      f"{rc.flops_fraction:.0%} of peak FLOP/s and {rc.bandwidth_fraction:.0%} of peak bandwidth + the "
                      f"fitted fixed step time "
                      f"{rc.cpu_overhead_s * 1e3:.3g} ms in series, as {fit} fitted them; that fixed time holds the "
                      "measured engine's host time, so no host term is added"}
