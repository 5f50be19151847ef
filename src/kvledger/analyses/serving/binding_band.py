"""Which SLO limit binds a capacity found by simulation below saturation, and how that metric's error moves the
capacity: the band of a latency-bound capacity comes from the latency's error, not the saturation throughput's.

A capacity where the boundary probe still served what it was offered (≥ ``KEPT_UP`` of it) is bound by a latency
limit (the one most of its missing requests missed), not by the engine's throughput; the throughput's band, measured
on runs past saturation, says nothing of it. Where that limit is TPOT — a step time, whose band holds at any load
below saturation — its 80% band (``setup_band``: measured ÷
simulated = k in [low, high] on 80% of the points below saturation) is carried to the rate by time rescaling: an
engine whose step times are k × the simulated ones serves a load r as the simulator serves k·r, every time × k. So it
meets the limit where k · q(k·x) = q(C), q being the metric's quantile at the target attainment over a probe's
requests, taken linear in the rate between the first probe (r₁, q₁) and the capacity (C, q_C):

    x(k) = (r₁ + (q_C / k − q₁) · (C − r₁) / (q_C − q₁)) / k,   x(1) = C

and the capacity band is x(high)–x(low) (a slower engine, k > 1, meets the limit at a lower rate), none above what the
engine serves at all: the most the simulator served on the search's axis ÷ k (the linear q understates its growth near
saturation). That ceiling is in the axis's units, the nominal rate: never below C, which its probe kept up with, and a
probe's throughput (its requests over first arrival → last finish, drain included) taken to the axis by its value ÷
offered rate; a throughput itself, below a short probe's nominal rate by its draw and its drain, would cap x(1) under C.
A TTFT-bound capacity keeps the throughput band: TTFT near a capacity is mostly the queue's wait, which grows as
1/(1 − utilisation), and its band was not measured there (``validate`` gives no TTFT band at a stage's knee either).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["KEPT_UP", "Binding", "binding_metric", "latency_binding", "search_view"]

#: a boundary probe that served this share of its offered rate kept up with its arrivals: below saturation (the
#: share ``validate`` calls served, calibration.sweep_bands.SERVED)
KEPT_UP = 0.9
_LATENCIES = ("tpot",)  # the latencies whose band is carried to the rate (module docstring: not TTFT)


@dataclass(frozen=True)
class Binding:
    """The latency limit that binds a capacity (``metric``: "ttft" or "tpot"), and its quantile at the target
    attainment (s) at the first probe's rate and at the capacity's (req/s): ``first`` and ``at``, (rate, quantile)."""

    metric: str
    quantile: float
    first: tuple[float, float]
    at: tuple[float, float]
    saturation_req_per_s: float  # the most the simulator served on the axis (≥ C), req/s: a k× engine serves ÷ k

    def rate_at(self, k: float) -> float:
        """The capacity of an engine whose step times are ``k`` × the simulated ones (module docstring), req/s: ≥ 0,
        and no more than what it serves at all (the probes' largest throughput ÷ k)."""
        (r1, q1), (c, qc) = self.first, self.at
        return min(max(0.0, (r1 + (qc / k - q1) * (c - r1) / (qc - q1)) / k), self.saturation_req_per_s / k)

    def words(self) -> str:
        """How the band was carried to the rate, in words."""
        name = self.metric.upper()
        (r1, q1), (c, qc) = self.first, self.at
        return (f"{name} binds there, below saturation: the band is {name}'s error carried to the rate through the "
                f"probes' p{self.quantile * 100:g} {name}, {q1 * 1e3:.4g} ms at {r1:.4g} req/s and {qc * 1e3:.4g} ms "
                f"at {c:.4g} req/s (linear between them; a k× slower engine serves r as the simulator serves k·r)")


def _quantile(run: Any, metric: str, q: float) -> float | None:
    """The ``q`` quantile of ``metric`` (TTFT, or TPOT over requests of two tokens or more) over the run's completed
    requests, s; None without any."""
    vals = []
    for r in run.records:
        if r.first_token_s is None or r.finish_s is None:
            continue
        if metric == "ttft":
            vals.append(r.first_token_s - r.arrival_s)
        elif r.num_output_tokens > 1:
            vals.append((r.finish_s - r.first_token_s) / (r.num_output_tokens - 1))
    return float(np.quantile(vals, q)) if vals else None


def binding_metric(sb: Any, slo: Any) -> str | None:
    """The latency whose band is carried to the rate (TPOT) where it binds the boundary of the request-rate search
    ``sb`` under ``slo`` (the limit most of the boundary probe's missing requests missed, the probe below saturation:
    served ≥ ``KEPT_UP`` of its offered rate), else None. It reads the boundary probe alone, which every search that
    finds that boundary has run alike."""
    c = sb.boundary.boundary_value
    probe = next((p for p in sb.probes if p.value == c), None)
    if c is None or probe is None or sb.boundary_run is None:
        return None
    if not probe.offered_rate_req_per_s or (probe.throughput_req_per_s or 0) < KEPT_UP * probe.offered_rate_req_per_s:
        return None
    res = sb.goodputs[sb.probes.index(probe)]
    limits = dict(slo.constraints())
    missed = {m: k for m, k in (res.num_missed or {}).items() if k and m in limits}
    metric = max(missed, key=missed.get) if missed else None
    return metric if metric in _LATENCIES else None


def latency_binding(sb: Any, slo: Any) -> Binding | None:
    """The latency limit binding the capacity of a request-rate search ``sb`` (``sim_boundary.SimBoundary``) under
    ``slo``, or None: no capacity, a boundary probe past saturation (served < ``KEPT_UP`` of its offered rate), a
    binding limit other than TPOT, a first probe not below the capacity, or a quantile that did not grow from
    the first probe to the capacity (the rate does not move it)."""
    c, metric = sb.boundary.boundary_value, binding_metric(sb, slo)
    if metric is None or sb.first_run is None:
        return None
    r1 = sb.probes[0].value
    if not r1 < c:
        return None
    q1, qc = (_quantile(run, metric, sb.target) for run in (sb.first_run.run, sb.boundary_run.run))
    if q1 is None or qc is None or not qc > q1:
        return None
    return Binding(metric, sb.target, (float(r1), q1), (float(c), qc), _served_on_axis(sb.probes, float(c)))


def _served_on_axis(probes: Any, capacity: float) -> float:
    """The most the simulator served, on the search's axis (nominal req/s): each probe's throughput × its value ÷ its
    offered rate (the throughput in the axis's units), and never below ``capacity``, whose probe kept up with its
    arrivals (module docstring)."""
    on_axis = (p.value * p.throughput_req_per_s / p.offered_rate_req_per_s for p in probes
               if p.throughput_req_per_s and p.offered_rate_req_per_s)
    return max([capacity, *on_axis])


def search_view(rows: list[tuple[float, float, float, Any]], boundary: float, target: float, first_run: Any,
                boundary_run: Any) -> Any:
    """Probes run outside ``sim_boundary`` read as the request-rate search this module reads (``SimBoundary``'s
    ``boundary``, ``probes``, ``goodputs``, ``first_run``, ``boundary_run``, ``target``): ``rows`` in the order run,
    each (rate req/s, offered rate req/s, throughput req/s, goodput), ``boundary`` req/s the rate found."""
    from types import SimpleNamespace

    probes = [SimpleNamespace(value=r, offered_rate_req_per_s=o, throughput_req_per_s=t) for r, o, t, _ in rows]
    return SimpleNamespace(boundary=SimpleNamespace(boundary_value=boundary), probes=probes,
                           goodputs=[g for *_, g in rows], first_run=first_run, boundary_run=boundary_run,
                           target=target)
