"""The 80% prediction interval of a simulator error from errors measured on other deployments, counting each
deployment once.

Split-conformal ranks (Vovk et al.; Lei et al., "Distribution-free predictive inference for regression", JASA 2018):
from n exchangeable errors, the ⌈0.9(n + 1)⌉-th smallest is an upper end that a new error stays under with probability
≥ 0.9 whatever their distribution, and mirrored for the lower end, so the pair covers ≥ 80%. The errors a validation
holds are not exchangeable one by one, though: a load sweep gives 1–5 stages of one deployment whose errors move
together (the same model, GPU, set-up and client), and a new deployment's errors are a new draw of that whole group.

With groups, the ranks are taken on the pooled distribution in which each of the k deployments weighs 1/k, shared
equally among its values (the "pooled CDF" of Dunn, Wasserman and Ramdas, "Distribution-free prediction sets for
two-layer hierarchical models", JASA 2022): the upper end is the smallest error t whose pooled share at or below it
reaches 0.9(k + 1)/k, the conformal level with the new deployment counted as the (k + 1)-th. Where deployments are
exchangeable, this covers a value drawn from one stage of a new deployment with probability ≥ 80% (the hierarchical
conformal bound of Lee, Barber and Willett, "Distribution-free inference with hierarchical data", 2023: the quantile
at that level of the k deployments' pooled errors is at least the 0.9 quantile over all k + 1). With one value per
deployment this is exactly the ungrouped rank above; a deployment with five stages no longer counts five times. Where
0.9(k + 1)/k reaches 1 (k ≤ 9), the ends are the smallest and largest errors, the widest the data give, which cover
at least (k − 1)/(k + 1) — 80% at k = 9, less below —, and the band says how many deployments stand behind it.

Below nine deployments no rank reaches 80% ((k − 1)/(k + 1) < 0.8), so :func:`few_groups_interval` widens that
smallest … largest error to the 80% prediction interval of a new deployment's value with ln(1 + e) normal, each
deployment weighted once (the pooled mean and spread, Student's t with k − 1 degrees of freedom, ± t·s·√(1 + 1/k)): a
parametric band where the distribution-free one cannot reach its level, never narrower than the errors seen.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

__all__ = ["conformal_interval", "conformal_level", "conformal_upper", "few_groups_interval", "T90"]

#: Student's t one-sided 90% quantile for 1 … 9 degrees of freedom (two-sided 80%)
T90 = (3.078, 1.886, 1.638, 1.533, 1.476, 1.440, 1.415, 1.397, 1.383)
#: an error at or below −100% has no ln(1 + e): floored here (a figure predicted 100 times too small)
_FLOOR = -0.99


def conformal_level(num_groups: int, coverage: float = 0.8) -> float:
    """The pooled share each end must reach: (1 + coverage)/2 · (k + 1)/k, capped at 1 (k ≤ 9 at 80%)."""
    if num_groups < 1:
        raise ValueError("conformal_level needs at least one group")
    return min(1.0, (1 + coverage) / 2 * (num_groups + 1) / num_groups)


def _upper(values: Sequence[float], weights: Sequence[float], level: float) -> float:
    """The smallest value whose cumulative weight (values in ascending order) reaches ``level``; a small tolerance
    absorbs the float sum of the 1/(k·n_j) shares."""
    order = sorted(range(len(values)), key=lambda i: values[i])
    total = 0.0
    for i in order:
        total += weights[i]
        if total >= level - 1e-9:
            return values[i]
    return values[order[-1]]


def _weights(n: int, groups: Sequence[str] | None) -> tuple[list[float], int]:
    """Each value's pooled share 1/(k·n_j) and the number of groups k."""
    labels = list(groups) if groups is not None else [str(i) for i in range(n)]
    if len(labels) != n:
        raise ValueError(f"{n} values but {len(labels)} group labels")
    sizes: dict[str, int] = {}
    for g in labels:
        sizes[g] = sizes.get(g, 0) + 1
    k = len(sizes)
    return [1.0 / (k * sizes[g]) for g in labels], k


def conformal_upper(values: Sequence[float], groups: Sequence[str] | None = None, coverage: float = 0.8) -> float:
    """The one-sided conformal upper end at ``coverage``: the smallest value whose pooled share reaches
    coverage·(k + 1)/k (capped at 1), as for the magnitude of an error in a symmetric band."""
    if not values:
        raise ValueError("conformal_upper needs at least one value")
    weights, k = _weights(len(values), groups)
    return _upper(values, weights, min(1.0, coverage * (k + 1) / k))


def conformal_interval(values: Sequence[float], groups: Sequence[str] | None = None,
                       coverage: float = 0.8) -> tuple[float, float]:
    """(low, high): the conformal prediction interval of a new group's value at ``coverage`` (module docstring);
    ``groups`` names each value's deployment (None: every value its own)."""
    if not values:
        raise ValueError("conformal_interval needs at least one value")
    weights, k = _weights(len(values), groups)
    level = conformal_level(k, coverage)
    high = _upper(values, weights, level)
    low = -_upper([-v for v in values], weights, level)
    return low, high


def few_groups_interval(values: Sequence[float], groups: Sequence[str] | None = None) -> tuple[float, float]:
    """(low, high) of an 80% band from k ≤ 10 deployments (``lodo_bands`` uses it below nine, and below ten values
    whatever k; module docstring): the smallest …
    largest error widened to the t prediction interval of ln(1 + e) with each of the k deployments weighted once; the
    smallest … largest alone where k < 2 (no spread between deployments to scale).

    Raises:
        ValueError: no values, or more than ten deployments (the t table's reach; the conformal ranks reach 80% from
            nine).
    """
    if not values:
        raise ValueError("few_groups_interval needs at least one value")
    weights, k = _weights(len(values), groups)
    if k > len(T90) + 1:
        raise ValueError(f"{k} deployments: use conformal_interval")
    low, high = min(values), max(values)
    if k < 2:
        return low, high
    z = [math.log1p(max(v, _FLOOR)) for v in values]
    mean = sum(w * x for w, x in zip(weights, z))
    var = sum(w * (x - mean) ** 2 for w, x in zip(weights, z)) * k / (k - 1)
    half = T90[k - 2] * math.sqrt(var) * math.sqrt(1 + 1 / k)
    return min(low, math.expm1(mean - half)), max(high, math.expm1(mean + half))
