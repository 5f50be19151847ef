"""When two candidates at one monthly bill differ in USD per Mtok of good tokens by less than the probe can tell.

Sized for a load, each candidate's good tokens are counted in a run of the same seeded workload at the load each of
its replicas carries (``capacity.at_volume_load``, ``ledgers/load_share.py``): the volume is the same for every
candidate, so at one bill USD per Mtok of good tokens differs only by which of the run's requests met the SLO. With
n requests a run measures its attainment p to a binomial standard error of √(p(1 − p)/n); two runs' attainments differ
by sampling alone within the standard error of a difference of two proportions,

    SE = √(p̄ (1 − p̄) (1/n_a + 1/n_b)),   p̄ = (good_a + good_b) ÷ (n_a + n_b)  (the pooled attainment),

and the rule here treats them as one when |p_a − p_b| ≤ :data:`Z_TIED` × SE (the two-proportion z-test does not
tell them apart at about 95%). A fresh-user trial (DeepSeek-V3 on H200, 500 requests): 500/500 against 499/500,
p̄ = 0.999, SE = √(0.999 × 0.001 × 2/500) = 0.0019990, 2 SE = 0.0040 ≥ 0.0020: tied — one request had decided the
winner. All good in both (p̄ = 1, SE = 0, a difference of 0) is tied too.

A run priced at the boundary instead (no load given, or a load each replica carries at its sized rate) counts its good
tokens at its own utilization, which differs between candidates for reasons other than sampling: no noise tie there,
only an exact one (``order.price_key``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

__all__ = ["Z_TIED", "AttainmentTie", "good_counts", "noise_tie"]

Z_TIED = 2.0
"""Standard errors of a difference of two binomial proportions within which two attainments are one (≈ 95%)."""


def good_counts(entry: dict[str, Any]) -> tuple[int, int] | None:
    """(requests within the SLO, requests) of the run that counted the entry's good tokens at the load each replica
    carries (``capacity.at_volume_load``); None where no such run priced it."""
    at = (entry.get("capacity") or {}).get("at_volume_load")
    if not at or not at.get("num_requests"):
        return None
    return int(at["num_good"]), int(at["num_requests"])


@dataclass(frozen=True)
class AttainmentTie:
    """Two candidates' attainments at the load within :data:`Z_TIED` standard errors: their ids, each run's requests
    within the SLO and requests, the difference of the attainments and the limit it is within (both fractions)."""

    ids: tuple[str, str]
    good: tuple[int, int]
    requests: tuple[int, int]
    difference: float
    limit: float


def noise_tie(a: dict[str, Any], b: dict[str, Any]) -> AttainmentTie | None:
    """The tie of ``a`` and ``b``'s attainments at the load (module doc), None where either was not priced at the load
    or they differ by more than :data:`Z_TIED` standard errors."""
    ca, cb = good_counts(a), good_counts(b)
    if ca is None or cb is None:
        return None
    (ga, na), (gb, nb) = ca, cb
    pooled = (ga + gb) / (na + nb)
    se = math.sqrt(pooled * (1.0 - pooled) * (1.0 / na + 1.0 / nb))
    diff = abs(ga / na - gb / nb)
    limit = Z_TIED * se
    return AttainmentTie((a["id"], b["id"]), (ga, gb), (na, nb), diff, limit) if diff <= limit + 1e-12 else None
