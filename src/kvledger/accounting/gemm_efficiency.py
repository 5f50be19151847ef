"""Matmul efficiency against token count and GEMM shape: a property of the GPU, measured, not fitted to a model.

The roofline's compute term of the weight matmuls is ``FLOPs / (peak · f)`` with one flat share ``f``. Measured GEMMs
do not reach one share: on an H100 SXM the four weight GEMMs of a Llama-2-7B layer (TP 1) run at 0.75 of the BF16
peak at 4,096 tokens but 0.40–0.52 at 256–384 tokens, near the roofline's ridge (295 FLOP/B), where neither the
FLOPs nor the weight read explains their time; and a smaller GEMM (a higher TP, a smaller model) is less efficient
at the same token count. This module reads that curve off public measurements and gives the achieved share of peak
FLOP/s as a function of the step's tokens ``M`` and the layer's weight-GEMM size ``N·K`` (Σ over QKV, output, MLP
up/gate and down projections, per GPU), for the roofline (``RooflineStepCost(gemm_curve=...)``) to scale by its fitted
FLOP fraction: compute term = FLOPs / (peak · f · e(M, N·K)), f = 1 meaning "as measured".

Data: Vidur's operator profiles (microsoft/vidur, MIT; ``data/profiling/vidur/compute/<gpu>/*/mlp_median.csv``, see
SOURCES.md): the median time of each linear op of one layer against ``num_tokens`` (1 … 4,096) at TP 1, 2, 4, 8, for
6–8 model shapes per GPU; for the RTX PRO 6000, LLMServingSim's profiles of vLLM 0.19 (``op_profiles``: two models at
TP 1 and 2, 1 … 2,048 tokens); the GPU's peak and bandwidth from the catalog (``gpus.csv``).

Derivation, per (model shape, TP) and token count M (duplicate rows averaged):

* F(M) = 2·M·ΣNK FLOP, t(M) = Σ of the four GEMM ops' medians (s), W(M) = 2·ΣNK + 2·M·Σ(N + K) bytes (BF16 weights
  read once, activations in and out);
* the shape's achieved bandwidth share at one token, b₁ = W(1) / (BW · t(1)) (a GEMV: the weight read alone);
* a point (M, ΣNK, e = F / (peak · t)) is kept only where the measured time exceeds 1.1 × the weight read at b₁:
  where it does not, the time is the weight read, which the roofline's bandwidth term already prices, and the compute
  side of the kernel is not observed (keeping such points would price the weight read twice);
* per token count on a log grid (``GRID_M``: points within a factor √1.5 pooled), e is regressed on log2(ΣNK) over
  every shape's kept points: e(M, NK) = a(M) + s(M)·(log2 NK − 27) (least squares; a grid point with fewer than
  ``MIN_POINTS`` points or fewer than three shapes — all of a GPU's shapes where it has fewer, the RTX PRO 6000's two
  at two TPs each — is skipped);
* the grid starts at 192 tokens, the first grid point whose pooled window keeps every profiled point: below it many
  points are bound by the weight read and left out, so the few kept are the slowest shapes' and a window's e would
  be biased low (on the H100 6 of 63 points kept at 48 tokens, 19 of 63 at 64, 59 of 105 at 96, 92 of 126 at 128);
* between grid points, linear in log2 M; below the lowest grid point the efficiency is held at that point's (the
  compute term then grows as M and stays under the weight read) and above the highest at that point's; N·K is
  clamped to the measured range; e is clipped to [0.02, 1].

The fit's error is the mean absolute difference between e and the curve over the kept points (in points of peak), in
sample and leaving each model's shape (all its TPs) out (``GemmCurve.loso_abs``). Only the BF16 weight GEMMs of
dense models are priced by the curve (``RooflineStepCost``): FP8 GEMMs and MoE grouped GEMMs were not measured.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
from pathlib import Path

from kvledger.accounting.layer_kernels import LayerKernels, kernels_apply, layer_kernel_fit
from kvledger.accounting.vidur_profiles import SAME_DIE, VIDUR_GPU, bundled_fit, vidur_profile_dir

__all__ = ["GemmCurve", "MeasuredGemm", "gemm_curve", "fit_gemm_curve", "curve_points", "fit_curve", "GEMM_MODES",
           "VIDUR_GPU", "SAME_DIE", "GRID_M", "curve_applies",
           "curve_prices", "curve_span", "vidur_profile_dir"]

GEMM_MODES = ("flat", "measured", "carried")  # carried: flat, priced as a GPU nobody profiled (carried_kernels)
GRID_M = (192, 256, 384, 512, 768, 1024, 1536, 2048, 3072, 4096)
MIN_POINTS = 6
READ_MARGIN = 1.1  # a point is kept where the measured time exceeds this × the weight read at the GEMV's bandwidth
_X0 = 27.0  # log2 of the reference N·K (1.3e8: a 7B layer's GEMMs at TP 2)
_OPS = ("attn_pre_proj", "attn_post_proj", "mlp_up_proj", "mlp_down_proj")


@dataclass(frozen=True)
class GemmCurve:
    """A GPU's weight-GEMM efficiency against tokens and GEMM size (module docstring).

    Attributes:
        gpu: the catalog id it prices. grid: the token counts fitted. coef: per grid point (a, s): e = a + s·(log2 NK −
        27). nk_lo / nk_hi: the measured ΣNK range (clamp). source: the files, in words. shapes: the model shapes.
        num_points: kept points. fit_abs / loso_abs: mean |e − curve| in sample / leaving each model shape out,
        fraction of peak. loso_rel: the same as mean |curve/e − 1|.
    """

    gpu: str
    grid: tuple[int, ...]
    coef: tuple[tuple[float, float], ...]
    nk_lo: float
    nk_hi: float
    source: str
    shapes: tuple[str, ...]
    num_points: int
    fit_abs: float = 0.0
    loso_abs: float = 0.0
    loso_rel: float = 0.0

    def efficiency(self, m_tokens: float, nk: float) -> float:
        """Achieved share of peak FLOP/s of a layer's weight GEMMs over ``m_tokens`` tokens, ΣNK = ``nk``, 0.02–1."""
        x = math.log2(min(max(nk, self.nk_lo), self.nk_hi)) - _X0
        g = self.grid
        m = min(max(m_tokens, g[0]), g[-1])
        i = 0
        while i < len(g) - 2 and m > g[i + 1]:
            i += 1
        (a0, s0), (a1, s1) = self.coef[i], self.coef[i + 1]
        w = (math.log2(m) - math.log2(g[i])) / (math.log2(g[i + 1]) - math.log2(g[i]))
        e = (1 - w) * (a0 + s0 * x) + w * (a1 + s1 * x)
        return min(max(e, 0.02), 1.0)

    def efficiency_array(self, m_tokens, nk: float):
        """``efficiency`` over a numpy array of token counts, equal to it within rounding (the step split's
        attribution, not a price)."""
        import numpy as np

        x = math.log2(min(max(nk, self.nk_lo), self.nk_hi)) - _X0
        m = np.clip(np.asarray(m_tokens, dtype=float), self.grid[0], self.grid[-1])
        grid_e = np.array([a + s * x for a, s in self.coef])
        return np.clip(np.interp(np.log2(m), np.log2(np.asarray(self.grid, dtype=float)), grid_e), 0.02, 1.0)


def _gemm_dims(r: dict[str, str], tp: int) -> list[tuple[int, int]]:
    """(N, K) per GPU of the four weight GEMMs of a profile row (QKV, output, up(+gate), down); the head size is the
    row's ``head_dim`` where it states one (``op_profiles``), else hidden ÷ heads (Vidur's)."""
    d, h, kvh = int(r["n_embd"]), int(r["n_head"]), int(r["n_kv_head"])
    hd, ff = int(r.get("head_dim") or d // h), int(r["n_expanded_embd"])
    up = (2 if r.get("use_gated_mlp") == "True" else 1) * ff // tp
    return [((h + 2 * kvh) * hd // tp, d), (d, h * hd // tp), (up, d), (d, ff // tp)]


def curve_points(path: Path, peak: float, bw: float) -> list[tuple[int, float, float, str]]:
    """The kept (M, ΣNK, e, shape) points of one Vidur ``mlp_median.csv`` (module docstring), for every TP in it."""
    from kvledger.accounting.vidur_grid import read_rows

    return rows_points(read_rows(path), f"{path.parent.parent.name}/{path.parent.name}", peak, bw)


def rows_points(rows: list[dict[str, str]] | tuple[dict[str, str], ...], shape: str, peak: float,
                bw: float) -> list[tuple[int, float, float, str]]:
    """The kept (M, ΣNK, e, shape) points of one model shape's profile rows (``op_profiles``'s layout), every TP."""
    from kvledger.accounting.vidur_grid import mean_by_key, num

    times = mean_by_key([((int(r["num_tensor_parallel_workers"]), int(r["num_tokens"])),
                          sum(num(r[f"time_stats.{op}.median"]) for op in _OPS) * 1e-3) for r in rows])
    dims = {int(r["num_tensor_parallel_workers"]): _gemm_dims(r, int(r["num_tensor_parallel_workers"])) for r in rows}
    out = []
    for tp, nks in sorted(dims.items()):
        nk = sum(n * k for n, k in nks)
        nplusk = sum(n + k for n, k in nks)
        if (tp, 1) not in times:
            continue
        b1 = (2 * nk + 2 * nplusk) / (bw * times[(tp, 1)])
        for (t_tp, m), t in sorted(times.items()):
            if t_tp != tp or t <= READ_MARGIN * (2 * nk + 2 * m * nplusk) / (bw * b1):
                continue
            out.append((m, float(nk), 2 * m * nk / (peak * t), shape))
    return out


def _regress(pts: list[tuple[int, float, float, str]], min_shapes: int = 3) -> tuple[float, float] | None:
    if len(pts) < MIN_POINTS or len({p[3] for p in pts}) < min_shapes:
        return None
    xs = [math.log2(p[1]) - _X0 for p in pts]
    ys = [p[2] for p in pts]
    mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
    sxx = sum((x - mx) ** 2 for x in xs)
    s = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx > 0 else 0.0
    return my - s * mx, s


def fit_curve(gpu: str, pts: list[tuple[int, float, float, str]], source: str = "") -> GemmCurve:
    """The curve through the kept points (module docstring), without its errors.

    Raises:
        ValueError: fewer than two grid points could be fitted.
    """
    grid, coef = [], []
    min_shapes = min(3, len({p[3] for p in pts}))  # a GPU profiled on fewer shapes: all of them (its TPs vary NK)
    for g in GRID_M:
        got = _regress([p for p in pts if g / 1.5 ** 0.5 <= p[0] < g * 1.5 ** 0.5], min_shapes)
        if got is not None:
            grid.append(g)
            coef.append(got)
    if len(grid) < 2:
        raise ValueError(f"{gpu}: too few measured GEMM points for an efficiency curve")
    nks = [p[1] for p in pts]
    return GemmCurve(gpu, tuple(grid), tuple(coef), min(nks), max(nks), source, tuple(sorted({p[3] for p in pts})),
                     len(pts))


def _errors(pairs: list[tuple[float, float]]) -> tuple[float, float]:
    """Mean |curve − measured| (fraction of peak) and mean |curve/measured − 1| over (curve, measured) pairs."""
    return sum(abs(c - e) for c, e in pairs) / len(pairs), sum(abs(c / e - 1) for c, e in pairs) / len(pairs)


def fit_gemm_curve(gpu_id: str) -> GemmCurve | None:
    """The curve fitted afresh from the operator profiles of a catalog GPU id (``op_profiles.PROFILED_GPU``), with
    its in-sample and leave-one-shape-out errors; None for a GPU no profile measured. ``gemm_curve`` reads the same
    curve from the bundled ``data/gemm_curves.json`` (written by benchmarks/build_gemm_curves.py; a test checks the
    two agree)."""
    from kvledger.accounting.op_profiles import profile_shapes, source_words

    shapes = profile_shapes(gpu_id)
    if not shapes:
        return None
    from dataclasses import replace

    from kvledger.catalog.gpus import get_gpu

    spec = get_gpu(gpu_id)
    pts = [p for org, name, rows in shapes
           for p in rows_points(rows, f"{org}/{name}", spec.bf16_flops_per_s, spec.hbm_bandwidth_bytes_per_s)]
    src = source_words(gpu_id, shapes, "kvledger.accounting.gemm_efficiency")
    curve = fit_curve(gpu_id, pts, src)
    errs = []
    for shape in curve.shapes:
        held = [p for p in pts if p[3] == shape]
        rest = fit_curve(gpu_id, [p for p in pts if p[3] != shape])
        errs += [(rest.efficiency(m, nk), e) for m, nk, e, _ in held]
    loso_abs, loso_rel = _errors(errs)
    fit_abs = _errors([(curve.efficiency(m, nk), e) for m, nk, e, _ in pts])[0]
    return replace(curve, fit_abs=fit_abs, loso_abs=loso_abs, loso_rel=loso_rel)


@functools.lru_cache(maxsize=8)
def gemm_curve(gpu_id: str) -> GemmCurve | None:
    """The measured curve for a catalog GPU id, as ``fit_gemm_curve`` fits it, read from the bundled fit (a start-up
    of a few milliseconds, not the fit's 0.3 s); a ``SAME_DIE`` GPU gets its profiled twin's, so named; None for a GPU
    no operator profile measured (``op_profiles.PROFILED_GPU``) nor shares a die with one that did."""
    if gpu_id in SAME_DIE:
        from dataclasses import replace

        twin = gemm_curve(SAME_DIE[gpu_id])
        return replace(twin, gpu=gpu_id, source=f"{twin.source}; taken for {gpu_id}: the same die, SM count and "
                                                f"BF16 peak as {twin.gpu}, its own bandwidth")
    d = bundled_fit("gemm_curves.json", "curves", gpu_id)
    if d is None:
        return None
    return GemmCurve(**{**d, "grid": tuple(d["grid"]), "coef": tuple(tuple(c) for c in d["coef"]),
                        "shapes": tuple(d["shapes"])})


def curve_applies(model, gpu) -> bool:
    """Whether the curve prices this model's weight GEMMs on ``gpu``: dense, unquantized weights in BF16 GEMMs (MoE
    grouped GEMMs, FP8 GEMMs and weight-only quantized kernels such as Marlin's were not measured, so they keep the
    flat fraction, 0.7 by default)."""
    from kvledger.accounting.fp8_block import compute_dtype

    return not model.is_moe and model.quant.method == "none" and compute_dtype(model, gpu) == "bf16"


def curve_prices(model, gpu, bundled: bool = True) -> bool:
    """Whether, without a flag, the measured curve prices this model's weight GEMMs on ``gpu``: the GPU has a curve
    (its own or its die's), the model's GEMMs are what it measured (``curve_applies``) and, with ``bundled``, no
    flat bundled GPU profile prices the GPU by default (the RTX PRO 6000's; False: the caller knows none does)."""
    if gemm_curve(gpu.gpu_id) is None or not curve_applies(model, gpu):
        return False
    if not bundled:
        return True
    from kvledger.accounting.gpu_profile import bundled_gpu_profile

    prof = bundled_gpu_profile(gpu.name)
    return prof is None or prof.gemm_efficiency == "measured"


def curve_span(model, gpu, nk: float, bundled: bool = True) -> tuple[float, float] | None:
    """The least and greatest efficiency the GPU's curve gives a layer of ΣN·K ``nk`` (its grid's ends), where it
    prices this model by default (``curve_prices``, ``bundled`` as there); else None."""
    if not curve_prices(model, gpu, bundled):
        return None
    c = gemm_curve(gpu.gpu_id)
    return c.efficiency(c.grid[0], nk), c.efficiency(c.grid[-1], nk)


class MeasuredGemm:
    """The roofline's use of the curve (mixed into ``RooflineStepCost``, whose ``model``, ``dtype``, ``matmul_params``
    and ``flops_fraction`` it reads): the weight GEMMs' efficiency per step tokens, and attention's FLOP share — the
    fraction × the curve's 4,096-token plateau (an assumption: no attention kernel was measured against the curve)."""

    def _init_gemm_curve(self, model, curve: GemmCurve | None) -> None:
        """The curve where it applies (dense, BF16 weights), the layer's ΣN·K per GPU, attention's FLOP share (without a
        curve ``flops_fraction``) and the layer kernels wherever the GPU's tables were offered (``curve``), whatever
        the weights' dtype (layer_kernels: an FP8 model's norms are the BF16 one's, as carried_kernels prices them)."""
        self.gemm_curve = curve if curve is not None and curve_applies(model, self.gpu) else None
        fit = (layer_kernel_fit(self.gpu.gpu_id) if curve else self.carried_fit) if kernels_apply(model) else None
        self.layer_kernels = fit and LayerKernels(fit, model, self.tp, self.bw * self.bandwidth_fraction)
        self.gemm_nk = self.matmul_params / max(model.num_layers, 1)  # Σ N·K of one layer's weight GEMMs per GPU
        self._eff_cache: dict[float, float] = {}
        self.attn_fraction = self.flops_fraction if self.gemm_curve is None else (
            self.flops_fraction * self.gemm_curve.efficiency(self.gemm_curve.grid[-1], self.gemm_nk))

    def peak_matmul_efficiency(self) -> float:
        """The most the curve gives this layer at any token count (1.0 without a curve): linear in log2 M between
        grid points and held beyond them, so its largest value is at a grid point. A step's weight GEMMs take at
        least FLOPs ÷ (peak · f · this), whatever its tokens (``work_bounds``'s lower bounds)."""
        if self.gemm_curve is None:
            return 1.0
        return max(self.gemm_curve.efficiency(m, self.gemm_nk) for m in self.gemm_curve.grid)

    def layer_kernels_s(self, num_tokens: int) -> float:
        """The layers' norm, RoPE, activation (and unfused add) kernels in a step over ``num_tokens`` tokens
        (``layer_kernels.py``), s; 0.0 without the curve."""
        return 0.0 if self.layer_kernels is None else self.layer_kernels.step_s(num_tokens)

    def matmul_efficiency(self, num_tokens: float) -> float:
        """The measured share of peak of the weight GEMMs over ``num_tokens`` tokens (1.0 without a curve)."""
        if self.gemm_curve is None:
            return 1.0
        e = self._eff_cache.get(num_tokens)
        if e is None:
            e = self._eff_cache[num_tokens] = self.gemm_curve.efficiency(num_tokens, self.gemm_nk)
        return e
