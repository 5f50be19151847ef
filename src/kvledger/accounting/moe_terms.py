"""The MoE terms of a step beyond FLOPs and bytes: tokens per expert, grouped-GEMM efficiency at that many tokens,
expert load imbalance across expert-parallel ranks, and expert parallelism's all-to-all.

* Tokens per expert: a step over T tokens routes T·k token-expert pairs over E experts: m = T·k/E on average.
* Grouped-GEMM efficiency: an expert's GEMM has m rows; below a few dozen rows a tensor-core tile is mostly
  padding, so the FLOP rate falls: η(m) = m / (m + m½), with m½ the tokens per expert at which the grouped GEMM
  reaches half its large-m rate. m½ is a property of the GPU and kernel (fit it: ``GpuProfile``); 0 means η = 1.
* Imbalance: with expert parallelism over g ranks (E/g experts each), a rank receives Binomial(T·k, 1/g) pairs under
  uniform routing; the step waits for the busiest rank. With μ = T·k/g and σ² = T·k·(1/g)(1 − 1/g), the expected
  maximum of g ranks is ≈ μ + σ·√(2 ln g) (the Gaussian extreme-value approximation), so the expert work takes
  (μ + σ·√(2 ln g))/μ times the mean rank's. Under TP alone every GPU holds a slice of every expert: no imbalance.
* All-to-all: each token's hidden state goes to its k experts' ranks and back (dispatch and combine), the share
  (g − 1)/g of them off-rank: 2·T·k·hidden·bytes·(g − 1)/g bytes per step over the link.
"""

from __future__ import annotations

import math

__all__ = ["tokens_per_expert", "grouped_gemm_efficiency", "ep_imbalance", "ep_all_to_all_bytes"]


def tokens_per_expert(num_tokens: float, experts_per_token: int, num_experts: int) -> float:
    """Mean token-expert pairs per expert in a step: T·k/E, tokens."""
    return num_tokens * experts_per_token / num_experts if num_experts else 0.0


def grouped_gemm_efficiency(tokens_per_expert_: float, half_tokens: float) -> float:
    """η(m) = m/(m + m½), 0–1; 1 when ``half_tokens`` is 0 (no small-GEMM penalty modelled)."""
    if half_tokens <= 0:
        return 1.0
    if tokens_per_expert_ <= 0:
        return 0.0
    return tokens_per_expert_ / (tokens_per_expert_ + half_tokens)


def ep_imbalance(num_tokens: float, experts_per_token: int, ep: int) -> float:
    """Expected busiest-rank load ÷ mean rank load over ``ep`` expert-parallel ranks (module docstring), ≥ 1."""
    if ep <= 1 or num_tokens <= 0:
        return 1.0
    pairs = num_tokens * experts_per_token
    mu = pairs / ep
    sigma = math.sqrt(pairs * (1.0 / ep) * (1.0 - 1.0 / ep))
    return (mu + sigma * math.sqrt(2.0 * math.log(ep))) / mu


def ep_all_to_all_bytes(num_tokens: float, experts_per_token: int, hidden_size: int, dtype_bytes: float,
                        ep: int) -> float:
    """Bytes one rank sends and receives in a step's dispatch and combine: 2·T·k·hidden·bytes·(g − 1)/g, B."""
    if ep <= 1:
        return 0.0
    return 2.0 * num_tokens * experts_per_token * hidden_size * dtype_bytes * (ep - 1) / ep
