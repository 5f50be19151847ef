"""The fused-MoE kernel of one MoE layer, fitted to published kernel timings: a per-layer floor, the touched experts'
weights read at a fitted share of HBM bandwidth, and the grouped GEMMs at a fitted FLOP efficiency that falls with
few tokens per expert.

Data (``data/fused_moe_kernels.csv``, sources in ``data/SOURCES.md``): the "Kernel time" tables of vLLM's
``benchmarks/kernels/benchmark_moe.py`` and SGLang's ``tuning_fused_moe_triton.py`` posted in pull requests — top-k,
token align/sort, the two grouped GEMMs, the activation and the combine of one MoE layer on one GPU, random routing
— for Mixtral-8x7B BF16 (H100, TP 2), Qwen3-30B-A3B FP8 (H100, TP 1; L40S, TP 1) and Qwen3-235B-A22B FP8 (H200,
TP 8): 4 tables, 3 GPUs, 2 dtypes. Rows whose touched expert bytes fit in the GPU's L2 are left out (the benchmark
re-reads the same weights, so they come from L2, where a served model's other layers evict them).

Model, per MoE layer and GPU, for T tokens, k of E experts, expert weights W bytes and 2·T·k·(3·H·I/TP) FLOPs::

    t(T) = t0 + max(W·(1 − (1 − k/E)^T) / (β · HBM), FLOPs_pad / (η(m) · P16)),   η(m) = η∞ · m / (m + m½)

with P16 the GPU's 16-bit tensor peak for BF16 and FP8 experts alike (the FP8 tables do not run faster per FLOP than
the BF16 one: Triton's w8a8 fused MoE at these widths). Fitted by least squares on log(predicted / measured).

Padding, from vLLM 0.11.0's ``fused_moe.py``: ``moe_align_block_size`` pads each expert's token count up to a multiple
of ``BLOCK_SIZE_M`` and the grouped GEMMs run on the padded rows; ``get_default_config`` takes BLOCK_SIZE_M = 16 when
the step's tokens M ≤ E, else 64, E the rank's local experts under expert parallelism (``block_m``; the tuned tables
move it with M the same way); a tuned config is priced at BLOCK_SIZE_M 16, the least padding its tuner timed
(``moe_rows.tuned_block``: a larger block it kept ran no slower). FP8 experts below sm89 and MXFP4 experts where vLLM
picks Marlin (vllm_mxfp4_backend.py; below Hopper always) run the Marlin MoE kernel, whose block grows with the rows
per expert (``moe_rows.marlin_block``: 8 … 64); MXFP4 under Triton runs triton_kernels' matmul_ogs, padded to
``moe_rows.ogs_block`` (16 … 128). Under uniform top-k routing an expert's count is c ~ Binomial(T, k/E), so a layer's
padded rows are E · E[⌈c/B⌉·B], computed exactly (the pmf over mean ± 12 σ; under EP the busiest rank's, moe_rows.py).
FLOPs_pad = 2 · (3·H·I/TP) · those rows, and m = the padded rows per expert. Errors (mean / worst |predicted /
measured − 1| per table; LOSO: the table priced by a fit to the other three), 49 of the 53 rows kept:

    ============================  ================  ================  ================  ================
    variant                       padded (used)                       unpadded (T·k rows, m = T·k/E)
    table                         in-sample         LOSO              in-sample         LOSO
    ============================  ================  ================  ================  ================
    Qwen3-235B FP8, H200, TP 8    11.9% / 19.4%     12.5% / 23.4%     10.9% / 17.2%     12.8% / 26.8%
    Mixtral BF16, H100, TP 2      14.4% / 55.9%     23.2% / 69.9%     18.5% / 65.7%     30.7% / 90.4%
    Qwen3-30B FP8, H100, TP 1     14.0% / 32.0%     21.9% / 54.2%     16.7% / 39.0%     23.7% / 55.6%
    Qwen3-30B FP8, L40S, TP 1     19.2% / 74.4%     26.1% / 101.9%    17.7% / 78.3%     25.1% / 110.5%
    all rows                      15.2% / 74.4%     22.4% / 101.9%    16.9% / 78.3%     25.1% / 110.5%
    ============================  ================  ================  ================  ================

Padded: t0 42.6 µs, β 0.859, η∞ 0.331, m½ 5.40, tuned Mixtral at 16-row blocks (at ``block_m``'s: 15.7% in-sample,
22.9% LOSO); unpadded: t0 40.8 µs, β 0.822, η∞ 0.307, m½ 7.84. Padding narrowed the Mixtral/Qwen3 opposition (LOSO
signed mean +26% / −21%, from +31% / −21%) without closing it. Not used: an η∞ growing as (N·K)^γ (13.6% in-sample,
fixed by Mixtral alone, which it misses by 70–79% held out), FP8 experts at the FP8 peak (LOSO 34.1%).

In the roofline (``FusedMoePrices``): every MoE layer's routed experts are priced by this term instead of the plain
roofline, t0 per MoE layer; β scales with the roofline's bandwidth fraction and η∞ with its FLOP fraction, each
relative to the defaults the fit stands beside (0.8, 0.7), so the uncalibrated roofline prices the fit itself and a
GPU profile's fitted fractions move it in proportion; the floor does not scale.

Tuned or default config (moe_config.py): Mixtral's table ran a tuned config, the other three the default; the fit
pools them, and where the release ships no tuned config for a layer's shape and GPU the term is × the default/tuned
factor (×1.0315, 87 published pairs). A fit on tuned-equivalent times (in-sample 14.7%, LOSO 21.2%) does worse end to
end (the 18 public MoE serving points 39.9% mean |error| against 38.1% pooled, 2026-12-05): the pooled fit is kept.
"""

from __future__ import annotations

import csv
import functools
import math
import re
from dataclasses import dataclass
from importlib import resources

import numpy as np

from kvledger.accounting import moe_rows
from kvledger.accounting.moe_rows import block_m, busiest_rank_rows, marlin_block, padded_rows_moments, tuned_block
from kvledger.accounting.moe_terms import ep_read_imbalance, touched_fraction
from kvledger.catalog.expert_placement import local_experts

__all__ = ["MoeKernelRow", "MoeKernelFit", "load_rows", "fit_moe_kernel", "moe_kernel_fit", "moe_layer_s",
           "moe_layer_count", "block_m", "padded_rows_per_expert", "touched_fraction", "FIT_FLOPS_FRACTION",
           "FIT_BANDWIDTH_FRACTION"]

FIT_FLOPS_FRACTION, FIT_BANDWIDTH_FRACTION = 0.7, 0.8  # the roofline's defaults: there the fit applies unscaled


@dataclass(frozen=True)
class MoeKernelRow:
    """One published kernel timing: ``source`` (table), GPU, per-layer expert weight bytes and FLOPs per token on one
    GPU, experts, top-k, tokens, measured s."""

    source: str
    gpu: str
    expert_bytes: float
    flops_per_token: float
    experts: int
    top_k: int
    tokens: int
    time_s: float
    l2_bytes: float
    tuned: bool = True  # the table ran a tuned config (else the default; the fit pools both)


@dataclass(frozen=True)
class MoeKernelFit:
    """Fitted constants (module docstring) and their errors: mean |predicted / measured − 1| over the fitted rows
    (``err_in``) and over each source's rows priced by a fit without that source (``err_loso``), with the worst row."""

    floor_s: float
    read_fraction: float
    gemm_efficiency: float
    half_tokens: float
    rows: int
    sources: int
    err_in: float
    err_in_max: float
    err_loso: float = float("nan")
    err_loso_max: float = float("nan")
    by_source: tuple = ()  # (source, in-sample mean, worst, LOSO mean, worst) per table
    padded: bool = True


def load_rows() -> list[MoeKernelRow]:
    """The bundled timings, L2-resident rows left out (module docstring)."""
    text = resources.files("kvledger.accounting").joinpath("data/fused_moe_kernels.csv").read_text()
    out = []
    for r in csv.DictReader(text.splitlines()):
        per_expert = 3 * int(r["hidden"]) * int(r["moe_intermediate"]) / int(r["tp"])
        row = MoeKernelRow(r["source"], r["gpu"], int(r["experts"]) * per_expert * float(r["weight_bytes"]),
                           2 * int(r["top_k"]) * per_expert, int(r["experts"]), int(r["top_k"]), int(r["tokens"]),
                           float(r["kernel_us"]) * 1e-6, float(r["gpu_l2_mb"]) * 1e6, r["config"] == "tuned")
        if touched_fraction(row.tokens, row.top_k, row.experts) * row.expert_bytes > row.l2_bytes:
            out.append(row)
    return out


def padded_rows_per_expert(tokens: int, top_k: int, experts: int, local: int = 0) -> float:
    """E[⌈c/B⌉·B] for c ~ Binomial(tokens, k/E), B = ``block_m`` over the rank's ``local`` experts (0: all E, no
    expert parallelism): an expert's rows after ``moe_align_block_size`` pads its count to the block, rows
    (``moe_rows.padded_rows_moments``)."""
    return padded_rows_moments(tokens, top_k, experts, local)[0]


def moe_layer_s(p: tuple[float, float, float, float], read_bytes: float, flops: float, tokens_per_expert: float,
                bw: float, peak16: float) -> float:
    """t0 + max(read bytes / (β·bw), FLOPs / (η(m)·peak)) for p = (t0 s, β, η∞, m½), s."""
    t0, beta, eta, half = p
    if flops <= 0:
        return t0 + read_bytes / (beta * bw)
    e = eta * tokens_per_expert / (tokens_per_expert + half)
    return t0 + max(read_bytes / (beta * bw), flops / (e * peak16))


def _residuals(q: np.ndarray, X: list[tuple]) -> np.ndarray:
    p = tuple(math.exp(v) for v in q)
    return np.array([math.log(moe_layer_s(p, *x[:5]) / x[5]) for x in X])


def _features(rows: list[MoeKernelRow], padded: bool = True) -> list[tuple]:
    """(read B, GEMM FLOPs, rows per expert, HBM B/s, 16-bit peak FLOP/s, measured s) per row: FLOPs and rows on the
    padded counts (module docstring), or with ``padded=False`` on T·k rows."""
    from kvledger.catalog.gpus import get_gpu

    out = []
    for r in rows:
        g = get_gpu(r.gpu)
        m = padded_rows_moments(r.tokens, r.top_k, r.experts, 0, tuned_block(r.tuned))[0] if padded \
            else r.tokens * r.top_k / r.experts
        out.append((r.expert_bytes * touched_fraction(r.tokens, r.top_k, r.experts),
                    r.flops_per_token / r.top_k * r.experts * m, m, g.hbm_bandwidth_bytes_per_s, g.bf16_flops_per_s,
                    r.time_s))
    return out


def _least_squares(X: list[tuple]) -> tuple[float, float, float, float]:
    """Levenberg–Marquardt on log residuals over log parameters (all positive), numerical Jacobian."""
    q, lam = np.log([30e-6, 0.6, 0.4, 4.0]), 1e-3
    r = _residuals(q, X)
    for _ in range(200):
        J = np.empty((len(r), len(q)))
        for j in range(len(q)):
            d = np.zeros_like(q)
            d[j] = 1e-6
            J[:, j] = (_residuals(q + d, X) - r) / 1e-6
        A, g = J.T @ J, J.T @ r
        step = np.linalg.solve(A + lam * np.diag(np.diag(A) + 1e-12), -g)
        r2 = _residuals(q + step, X)
        if r2 @ r2 < r @ r:
            done = r @ r - r2 @ r2 < 1e-12
            q, r, lam = q + step, r2, lam / 3
            if done:
                break
        else:
            lam *= 4
    return tuple(float(math.exp(v)) for v in q)


def _errors(p: tuple, X: list[tuple]) -> np.ndarray:
    return np.array([moe_layer_s(p, *x[:5]) / x[5] - 1 for x in X])


def fit_moe_kernel(rows: list[MoeKernelRow], loso: bool = True, padded: bool = True) -> MoeKernelFit:
    """Fit the constants to ``rows`` (``padded``: FLOPs on the block-padded rows, module docstring); with ``loso``
    also each source left out in turn, priced by the fit to the others."""
    X = _features(rows, padded)
    p = _least_squares(X)
    e = np.abs(_errors(p, X))
    fit = MoeKernelFit(*p, len(rows), len({r.source for r in rows}), float(e.mean()), float(e.max()), padded=padded)
    if not loso:
        return fit
    out, by = [], []
    for s in sorted({r.source for r in rows}):
        q = _least_squares([x for x, r in zip(X, rows) if r.source != s])
        held = np.abs(_errors(q, [x for x, r in zip(X, rows) if r.source == s]))
        own = np.abs(_errors(p, [x for x, r in zip(X, rows) if r.source == s]))
        by.append((s, float(own.mean()), float(own.max()), float(held.mean()), float(held.max())))
        out += list(held)
    return MoeKernelFit(*p, fit.rows, fit.sources, fit.err_in, fit.err_in_max, float(np.mean(out)), float(max(out)),
                        tuple(by), padded)


@functools.lru_cache(maxsize=1)
def moe_kernel_fit() -> MoeKernelFit:
    """The fit to the bundled rows, once per process (leave-one-source-out included)."""
    return fit_moe_kernel(load_rows())


def moe_layer_count(model) -> int:
    """Decoder layers with routed experts (``layers.<i>.`` of the expert weights)."""
    return len({m.group(1) for w in model.weights if w.expert and (m := re.search(r"layers\.(\d+)\.", w.path))})


class FusedMoePrices:
    """Mixed into ``RooflineStepCost`` (roofline.py): ``_init_moe`` and ``moe_kernel_s``, a step's fused-MoE term."""

    def _init_moe(self, model, tp: int, ep: int, half_tokens: float, moe_config=None, mxfp4_moe: str = "") -> None:
        """Routed-expert FLOP parameters per token, the MoE layers the fused-MoE term prices, whether the MoE terms
        (moe_terms.py, this module) change any step, ``moe_config`` (moe_config.py: tuned or default config) and the
        MXFP4 experts' backend (vllm_mxfp4_backend.py; "": by GPU, below)."""
        from kvledger.accounting.fp8_block import expert_mma_dtype
        from kvledger.accounting.tp_comm import link_bytes_per_s

        self.ep, self.grouped_gemm_half_tokens, self.moe_config = ep, half_tokens, moe_config
        self._config_factor = moe_config.factor if moe_config is not None else 1.0
        # the all-to-all's link, once: the TP group's all-reduce link (tp_network.allreduce_terms: over the nodes'
        # NICs where the group spans nodes, else the scale-up link at its share); none without expert parallelism
        self._a2a_link_Bps = (self.link_bytes_per_s or link_bytes_per_s(self.gpu, self.allreduce_link_share)) \
            if self.all_to_all else 0.0
        # routed experts at their own kernel's MMA peak (fp8_block.py: FP8 Triton MoE beside BF16 Marlin linears)
        self.expert_peak_flops = self.gpu.fp8_flops_per_s if expert_mma_dtype(model, self.gpu) == "fp8" \
            else self.peak_flops
        self.moe_layers = moe_layer_count(model) if model.is_moe else 0
        # the experts' kernel and so the block their rows are padded to (moe_rows.expert_kernel: Marlin MoE's
        # marlin_block, matmul_ogs' ogs_block by its triton_kernels rule, else Triton fused_moe's); ``mxfp4_moe`` the
        # release's own choice for MXFP4 experts (plan_roofline.mxfp4_moe_kernel: vllm_mxfp4_backend.py's backend)
        kernel = moe_rows.expert_kernel(model.quant.method, self.gpu.arch, mxfp4_moe)
        self.marlin_moe, self.ogs_moe, self.ogs_ragged = kernel == "marlin", kernel[:3] == "ogs", kernel == "ogs_ragged"
        # Marlin's MXFP4 experts run and are read at their padded shape (hidden to 256, each rank's intermediate share
        # to 128: mxfp4.py create_weights, read in 0.10.1, 0.11.0 and 0.18.0): ×(H'·I')/(H·I) on reads and FLOPs
        h, i = model.hidden_size, -(-(model.intermediate_size or 0) // (1 if ep > 1 else tp))
        self.expert_pad = -(-h // 256) * 256 * -(-i // 128) * 128 / (h * i) \
            if kernel == "marlin" and model.quant.method == "mxfp4" and i else 1.0
        self._moe_terms = model.is_moe and (self.moe_layers > 0 or ep > 1 or half_tokens > 0
                                            or self.expert_peak_flops != self.peak_flops)
        frac = model.experts_per_token / model.num_experts if model.is_moe else 0.0
        self.expert_params_per_token = frac * sum(w.numel for w in model.weights if w.expert) / tp

    @property
    def split_vectorisable(self) -> bool:
        """Whether ``step_split.roofline_prefill_fraction`` (numpy) prices this roofline's steps as ``costs`` does:
        no MoE terms, or the fused-MoE term without expert parallelism (its imbalance is priced step by step)."""
        return not self._moe_terms or (self.moe_layers > 0 and self.ep == 1)

    def moe_kernel_s(self, num_tokens: float) -> float:
        """The fused-MoE kernels of a step over ``num_tokens`` tokens, all MoE layers, on the busiest GPU, s (module
        docstring): 0.0 for a model without MoE layers. Under expert parallelism the GEMMs run on the busiest rank's
        padded rows (``moe_rows.busiest_rank_rows``: its FLOPs and η at its rows per expert) and the expert bytes
        read wait for its touched experts (``moe_terms.ep_read_imbalance``)."""
        if not self.moe_layers or num_tokens <= 0:
            return 0.0
        f, m = moe_kernel_fit(), self.model
        p = (f.floor_s * self.moe_layers, f.read_fraction * self.bandwidth_fraction / FIT_BANDWIDTH_FRACTION,
             f.gemm_efficiency * self.flops_fraction / FIT_FLOPS_FRACTION,
             self.grouped_gemm_half_tokens or f.half_tokens)
        k, e, ep = m.experts_per_token, m.num_experts, self.ep
        read = self.expert_bytes * self.experts_touched_fraction(num_tokens) * ep_read_imbalance(num_tokens, k, e, ep) \
            * self.expert_pad
        block = (marlin_block(num_tokens, k, local_experts(e, ep)) if self.marlin_moe else
                 moe_rows.ogs_block(num_tokens, k, e, self.ogs_ragged) if self.ogs_moe else
                 tuned_block(self.moe_config is not None and self.moe_config.tuned))
        rows = busiest_rank_rows(int(math.ceil(num_tokens)), k, e, ep, block)
        # the GPU's expert weights (params per token × E/k): 1/TP of all E, or n₀ whole experts = TP·n₀/E of that
        held = e / k * (self.tp * local_experts(e, ep) / e if ep > 1 else 1.0)
        flops = 2 * self.expert_params_per_token * held * rows * self.expert_pad
        return self._config_factor * moe_layer_s(p, read, flops, rows, self.bw,
                                                 self.gpu.bf16_flops_per_s or self.peak_flops)

    def moe_kernel_s_array(self, num_tokens: np.ndarray) -> np.ndarray:
        """``moe_kernel_s`` of each step's tokens (no expert parallelism: imbalance 1), s; one price per distinct
        count, so each equals the scalar's float."""
        u, inv = np.unique(np.asarray(num_tokens, dtype=np.float64), return_inverse=True)
        return np.array([self.moe_kernel_s(float(t)) for t in u])[inv.reshape(-1)]
