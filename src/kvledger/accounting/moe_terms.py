"""The MoE terms of a step beyond FLOPs and bytes: tokens per expert, grouped-GEMM efficiency at that many tokens,
expert load imbalance across expert-parallel ranks, and expert parallelism's all-to-all.

* Tokens per expert: a step over T tokens routes T·k token-expert pairs over E experts: m = T·k/E on average.
* Grouped-GEMM efficiency: an expert's GEMM has m rows; below a few dozen rows a tensor-core tile is mostly
  padding, so the FLOP rate falls: η(m) = m / (m + m½), with m½ the tokens per expert at which the grouped GEMM
  reaches half its large-m rate. m½ is a property of the GPU and kernel (fit it: ``GpuProfile``); 0 means η = 1.
* Imbalance: with expert parallelism over g ranks, vLLM places experts linearly (``determine_expert_map``): n₀ =
  ⌈E/g⌉ experts on the first r = E mod g ranks (on all g when g divides E), one fewer on the rest. Under uniform
  routing such a rank receives Binomial(T·k, n₀/E) token-expert pairs; the step waits for the busiest. With
  μ = T·k·n₀/E and σ² = T·k·(n₀/E)(1 − n₀/E), the expected maximum of the r ranks is ≈ μ + σ·√(2 ln r) (the
  Gaussian extreme-value approximation), so the expert GEMMs take (μ + σ·√(2 ln r)) / (T·k/g) times TP's even share
  (g dividing E: (μ + σ·√(2 ln g))/μ).
* The weights read wait for the busiest rank too: each expert is touched with p = 1 − (1 − k/E)^T, a rank reads the
  touched experts among its own n₀, n₀·p on average with variance n₀·p(1 − p)·(E − n₀)/(E − 1) (n₀ of E experts:
  the finite-population correction, exact at one token, where the count is hypergeometric); the busiest of r ranks
  reads ≈ min(n₀, n₀·p + √(that variance)·√(2 ln r)) experts — at one decode token of k = 8 from 128 experts over 8
  ranks, 1 + √(15/16 · 112/127)·√(2 ln 8) = 2.85 experts' weights against 1. Under TP alone every GPU holds a slice
  of every expert: no imbalance. The GEMM rows of the busiest rank: moe_rows.py.
* All-to-all: each token's hidden state goes to its k experts' ranks and back (dispatch and combine), the share
  (g − 1)/g of them off-rank: 2·T·k·hidden·bytes·(g − 1)/g bytes per step over the link.
"""

from __future__ import annotations

import math

from kvledger.catalog.expert_placement import local_experts

__all__ = ["tokens_per_expert", "touched_fraction", "grouped_gemm_efficiency", "ep_imbalance", "ep_read_imbalance",
           "ep_all_to_all_bytes", "tail"]


def tokens_per_expert(num_tokens: float, experts_per_token: int, num_experts: int) -> float:
    """Mean token-expert pairs per expert in a step: T·k/E, tokens."""
    return num_tokens * experts_per_token / num_experts if num_experts else 0.0


def touched_fraction(num_tokens, experts_per_token: int, num_experts: int):
    """Share of a layer's experts ``num_tokens`` tokens touch under uniform top-k routing, 1 − (1 − k/E)^T, 0–1 (a
    float, or elementwise for an array of token counts)."""
    return 1 - (1 - experts_per_token / num_experts) ** num_tokens


def grouped_gemm_efficiency(tokens_per_expert_: float, half_tokens: float) -> float:
    """η(m) = m/(m + m½), 0–1; 1 when ``half_tokens`` is 0 (no small-GEMM penalty modelled)."""
    if half_tokens <= 0:
        return 1.0
    if tokens_per_expert_ <= 0:
        return 0.0
    return tokens_per_expert_ / (tokens_per_expert_ + half_tokens)


def _busiest(num_experts: int, ep: int) -> tuple[float, int]:
    """(share of the experts on the fullest rank, how many ranks hold that many) under vLLM's linear placement; an
    unknown expert count (0) is taken as divisible."""
    if num_experts <= 0:
        return 1.0 / ep, ep
    return local_experts(num_experts, ep) / num_experts, (num_experts % ep) or ep


def tail(ranks: int) -> float:
    """√(2 ln r), the Gaussian extreme-value factor of the largest of ``ranks`` draws (0 for one)."""
    return math.sqrt(2.0 * math.log(ranks)) if ranks > 1 else 0.0


def ep_imbalance(num_tokens: float, experts_per_token: int, ep: int, num_experts: int = 0) -> float:
    """The busiest rank's expected token-expert pairs ÷ TP's even share T·k/ep over ``ep`` expert-parallel ranks
    (module docstring; ``num_experts`` 0: taken as divisible by ``ep``), ≥ 1."""
    if ep <= 1 or num_tokens <= 0:
        return 1.0
    pairs = num_tokens * experts_per_token
    share, ranks = _busiest(num_experts, ep)
    mu = pairs * share
    sigma = math.sqrt(pairs * share * (1.0 - share))
    return max(1.0, (mu + sigma * tail(ranks)) / (pairs / ep))


def ep_read_imbalance(num_tokens: float, experts_per_token: int, num_experts: int, ep: int) -> float:
    """The busiest rank's expected touched experts ÷ the fullest rank's mean, n₀·p (module docstring), ≥ 1: the factor
    on the expert bytes a step reads under expert parallelism (1 without it)."""
    if ep <= 1 or num_tokens <= 0 or num_experts <= 0:
        return 1.0
    n0, p = local_experts(num_experts, ep), touched_fraction(num_tokens, experts_per_token, num_experts)
    mu = n0 * p
    if mu <= 0:
        return 1.0
    fpc = (num_experts - n0) / (num_experts - 1) if num_experts > 1 else 0.0  # n₀ of E experts: finite population
    top = min(float(n0), mu + math.sqrt(n0 * p * (1.0 - p) * fpc) * tail((num_experts % ep) or ep))
    return max(1.0, top / mu)


def ep_all_to_all_bytes(num_tokens: float, experts_per_token: int, hidden_size: int, dtype_bytes: float,
                        ep: int) -> float:
    """Bytes one rank sends and receives in a step's dispatch and combine: 2·T·k·hidden·bytes·(g − 1)/g, B."""
    if ep <= 1:
        return 0.0
    return 2.0 * num_tokens * experts_per_token * hidden_size * dtype_bytes * (ep - 1) / ep
