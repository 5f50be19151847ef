"""A rate search whose target is only just met even near idle: no SLO capacity you can bank on.

When the share of requests within the SLO at the lightest load probed lies within sampling noise of the target, the
bisection no longer follows the load the GPU carries: it follows which side of the target each probe's few misses
fall on (Llama-3.1-70B on 8 L40S, azure-conv, TTFT ≤ 1 s, TPOT ≤ 60 ms, target 90 %: 90.05 % at 0.00195 req/s,
90.0 % at 0.00253, 89.95 % at 0.00256, so the search answered "0.002533 req/s" and ``search`` priced 2,200 GPUs).

The rule: with ``N`` requests per probe and attainment ``a``, the binomial standard error is √(a(1−a)/N); the target
is within noise when a − z·√(a(1−a)/N) < target, z = :data:`NOISE_Z`. A probe at the edge of the load's own cliff
also reads near the target, so before answering "no capacity" the search probes :data:`IDLE_DIVISOR` times lighter:
if that probe is clearly above the target the capacity stands, otherwise there is none you can bank on.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from kvledger.jsonable import to_jsonable

__all__ = ["NOISE_Z", "IDLE_DIVISOR", "IdleEdge", "noise_half_width", "within_noise", "check_idle_edge"]

NOISE_Z = 1.0
"""Standard errors below a probe's attainment that count as "indistinguishable from the target": one, so a near-idle
attainment within a standard error of the target reads as a flat curve at the target (Llama-3.1-70B on 8 L40S:
90.25 % ± 0.66 % over 2,000 requests against 90 %), while a curve that falls from a clearly higher near-idle
attainment keeps its capacity even over few requests (93.3 % ± 3.2 % over 60)."""
IDLE_DIVISOR = 16.0
"""The near-idle check probes the lowest rate probed ÷ this (a threshold of the check, not fitted)."""


def noise_half_width(attainment: float, num_requests: int, z: float = NOISE_Z) -> float:
    """z·√(a(1−a)/N): the binomial noise of an attainment ``a`` over ``N`` requests, a share."""
    return z * math.sqrt(max(attainment * (1.0 - attainment), 0.0) / max(num_requests, 1))


def within_noise(attainment: float, num_requests: int, target: float, z: float = NOISE_Z) -> bool:
    """Whether ``target`` is not clearly below ``attainment``: a − z·√(a(1−a)/N) < target."""
    return attainment - noise_half_width(attainment, num_requests, z) < target


@dataclass(frozen=True)
class IdleEdge:
    """The evidence that even near idle the attainment is at the edge of the target.

    Attributes:
        rate_req_per_s: the near-idle rate probed, req/s.
        attainment: share of its requests within the SLO.
        num_requests: requests in that probe, count.
        target: the attainment target.
        z: standard errors counted as noise.
        half_width: z·√(a(1−a)/N), a share.
        bisected_req_per_s: the rate the bisection settled on (not an answer), req/s.
    """

    rate_req_per_s: float
    attainment: float
    num_requests: int
    target: float
    z: float
    half_width: float
    bisected_req_per_s: float

    @property
    def note(self) -> str:
        return (f"no SLO capacity you can bank on: even near idle ({self.rate_req_per_s:.4g} req/s) only "
                f"≈{self.attainment:.2%} of requests meet the SLO, at the edge of the {self.target:.0%} target "
                f"(±{self.half_width:.2%} sampling noise over {self.num_requests:,} requests, z = {self.z:g}); the "
                f"rate the bisection settled on, {self.bisected_req_per_s:.4g} req/s, is that noise, not a load the "
                "GPU carries: lower --target, loosen the SLO, look at why requests miss at idle, or run more "
                "requests per probe (--num-requests) to narrow the noise")

    def withdraw(self, res: Any) -> None:
        """Withdraw the boundary of ``res`` (``boundary.BoundaryResult``): boundary_value and boundary_per_gpu None,
        and ``largest_passing_note`` says why its largest passing value is not a capacity."""
        res.boundary_value = res.boundary_per_gpu = None
        res.largest_passing_note = (
            f"not a capacity: the target was met up to {res.largest_passing_value:g} only within sampling noise, "
            "even near idle (see idle_edge), so no rate can be banked on (boundary_value is null)")

    def to_dict(self) -> dict[str, Any]:
        return {**to_jsonable(self), "note": self.note}


def check_idle_edge(prober: Any, boundary: float | None, target: float) -> IdleEdge | None:
    """The :class:`IdleEdge` of a request-rate search (``sim_prober.SimProber`` ``prober``) that found ``boundary``
    when the lowest rate probed is within noise of ``target`` and a probe :data:`IDLE_DIVISOR` times lighter is not
    clearly above it; None otherwise (no capacity found, or a clear margin at either probe)."""
    if boundary is None or not prober.runs:
        return None
    low = min(prober.runs)
    gp = prober.results[low]
    if not within_noise(gp.attainment, gp.num_requests, target):
        return None
    prober.current_phase = "check"
    idle = low / IDLE_DIVISOR
    prober.run_at(idle)
    gi = prober.results[float(idle)]
    stopped = prober.runs[float(idle)].stopped_early is not None
    if not stopped and not within_noise(gi.attainment, gi.num_requests, target):
        return None  # clearly above near idle: the lowest probe sat on the load's own cliff, the capacity stands
    return IdleEdge(idle, gi.attainment, gi.num_requests, target, NOISE_Z,
                    noise_half_width(gi.attainment, gi.num_requests), float(boundary))
