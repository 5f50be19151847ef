"""The fused-MoE GEMM rows of one MoE layer on the busiest GPU: an expert's rows after ``moe_align_block_size`` pads its
token count to the block (mean and variance), and under expert parallelism the busiest rank's padded rows.

* One expert: a step over T tokens under uniform top-k routing gives an expert c ~ Binomial(T, k/E) tokens (each token
  picks k distinct experts); ``moe_align_block_size`` pads c up to a multiple of B = BLOCK_SIZE_M, P = ⌈c/B⌉·B rows.
  Mean and variance of P exactly, over the pmf within mean ± 12 σ (the rest is below 1e-30).
* A rank under expert parallelism over g ranks holds n₀ = ⌈E/g⌉ whole experts (vLLM's linear placement; r = E mod g
  ranks hold that many, all g when g divides E). Its rows are the sum of its n₀ experts' P: mean n₀·E[P], variance
  n₀·Var[P]·(E − n₀)/(E − 1) — the finite-population correction of n₀ experts drawn from E, exact for the
  pair count of one token (hypergeometric) and ≈ for padded rows. The step waits for the busiest of the r fullest
  ranks: ≈ mean + σ·√(2 ln r) (Gaussian extreme value), at most n₀·⌈T/B⌉·B. Without expert parallelism every GPU holds
  1/TP of every expert: the E experts' mean rows, no imbalance.

The busiest rank's rows per local expert m_b set both the GEMM FLOPs (2 · the rank's expert weights · m_b) and the
GEMM efficiency η(m_b) of ``moe_kernel.moe_layer_s``: a rank with more rows runs its tiles fuller, so the part of the
GEMM term that does not grow with the rows (the m½ of η) is paid once, not scaled by the imbalance.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from kvledger.catalog.expert_placement import local_experts

__all__ = ["block_m", "tuned_block", "padded_rows_moments", "busiest_rank_rows", "tail"]


def block_m(tokens: float, experts: int) -> int:
    """vLLM's default BLOCK_SIZE_M of the fused-MoE GEMMs for a step of ``tokens`` tokens (``get_default_config``:
    16 when M ≤ E, else 64), rows. ``experts`` is the rank's local count: vLLM 0.11.0's
    ``fused_moe.py::try_get_optimal_moe_config`` passes E = ``w2_shape[0]``, the first dimension of the layer's w2,
    which ``fused_moe/layer.py::FusedMoE.__init__`` creates with ``local_num_experts`` (``determine_expert_map``: all E
    without expert parallelism, ⌈E / EP⌉ on rank 0 with it), not ``global_num_experts``."""
    return 16 if tokens <= experts else 64


def tuned_block(tuned: bool) -> int:
    """BLOCK_SIZE_M to price a config at: 16 rows for a tuned config, 0 (``block_m``'s default rule) otherwise.

    A tuned file's block is the fastest of those ``benchmark_moe.py --tune`` timed (16 among them) at that M: where it
    keeps a larger block (E=32,N=2048 on H200 in FP8 128-blocks: BLOCK_SIZE_M 64 from M = 64) it ran no slower than
    16, so the padding it adds costs nothing the 16-row price misses. Priced so, the tuned table among the fused-MoE
    kernel timings (Mixtral on H100) fits better: module docstring of moe_kernel.py."""
    return 16 if tuned else 0


@functools.lru_cache(maxsize=65536)
def padded_rows_moments(tokens: int, top_k: int, experts: int, local: int = 0, block: int = 0) -> tuple[float, float]:
    """(E[P], Var[P]) of one expert's padded rows P = ⌈c/B⌉·B, c ~ Binomial(tokens, k/E) (module docstring), rows and
    rows²; B = ``block``, or 0: ``block_m`` over the rank's ``local`` experts (0: all E, no expert parallelism)."""
    if tokens <= 0:
        return 0.0, 0.0
    b, p = block or block_m(tokens, local or experts), top_k / experts
    if p >= 1:
        return float(math.ceil(tokens / b) * b), 0.0
    mu, sd = tokens * p, math.sqrt(tokens * p * (1 - p))
    lo, hi = max(0, int(mu - 12 * sd - 2)), min(tokens, int(mu + 12 * sd + 2 + b))
    c = np.arange(lo, hi + 1, dtype=np.float64)
    # log pmf: lgamma at lo, then the ratio pmf(j+1)/pmf(j) = (T − j)/(j + 1) · p/(1 − p) accumulated
    lp0 = (math.lgamma(tokens + 1) - math.lgamma(lo + 1) - math.lgamma(tokens - lo + 1) + lo * math.log(p)
           + (tokens - lo) * math.log1p(-p))
    steps = np.log((tokens - c[:-1]) / (c[:-1] + 1)) + math.log(p / (1 - p))
    pmf = np.exp(lp0 + np.concatenate(([0.0], np.cumsum(steps))))
    pmf, rows = pmf / pmf.sum(), np.ceil(c / b) * b
    mean = float((pmf * rows).sum())
    return mean, max(0.0, float((pmf * rows * rows).sum()) - mean * mean)


def tail(ranks: int) -> float:
    """√(2 ln r), the Gaussian extreme-value factor of the largest of ``ranks`` draws (0 for one)."""
    return math.sqrt(2.0 * math.log(ranks)) if ranks > 1 else 0.0


def busiest_rank_rows(tokens: int, top_k: int, experts: int, ep: int, block: int = 0) -> float:
    """The busiest rank's padded rows per local expert, m_b (module docstring), rows; ``ep`` ≤ 1: the mean E[P].
    ``block``: BLOCK_SIZE_M, or 0 for ``block_m`` over the rank's local experts."""
    if ep <= 1:
        return padded_rows_moments(tokens, top_k, experts, 0, block)[0]
    n0 = local_experts(experts, ep)
    mean, var = padded_rows_moments(tokens, top_k, experts, n0, block)
    if n0 >= experts or tokens <= 0:
        return mean
    b = block or block_m(tokens, n0)
    sd = math.sqrt(n0 * var * (experts - n0) / (experts - 1))
    top = min(n0 * mean + sd * tail((experts % ep) or ep), n0 * math.ceil(tokens / b) * b)
    return top / n0
