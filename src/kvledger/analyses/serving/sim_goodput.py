"""``kvledger goodput --simulate``'s API: one simulated run's goodput, or the simulator-driven SLO boundary search with
the capacity band of its boundary, each a typed result whose ``lines()`` are the command's JSON lines.

A run's line is its goodput object with the simulation's provenance under ``simulation``. A search writes one line
per probe (the probe's goodput object with ``probe``: axis, value, order, phase, early-stop evidence) and a last line:
``boundary`` (the bisection's result with the per-replica and per-GPU figures), ``probes``, ``simulation`` (the
first probe's inputs), ``notes`` and, on the request-rate axis, ``error_band`` (``capacity_bands.capacity_band``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvledger.analyses.serving.capacity_bands import CapacityBand, capacity_band
from kvledger.analyses.serving.itl_budget import itl_budget_words
from kvledger.analyses.serving.queue_growth import boundary_steadiness
from kvledger.analyses.serving.sim_boundary import SimBoundary, SimProbe, search_sim_boundary
from kvledger.analyses.serving.sim_document import SimProvenance
from kvledger.analyses.serving.sim_ledgers import SimulatedRun, SyntheticSpec, simulate_run
from kvledger.analyses.serving.sim_setup import SimRequestArgs
from kvledger.ledgers.boundary import BoundaryResult
from kvledger.ledgers.goodput import GoodputResult, goodput
from kvledger.ledgers.slo import SLO
from kvledger.records import WARNING_PREFIX

__all__ = ["SimGoodputRun", "ProbeLine", "ProbeWhere", "BoundaryFigures", "BoundaryLine", "SimGoodputSearch",
           "simulated_goodput", "simulated_goodput_search"]


@dataclass(frozen=True)
class SimGoodputRun:
    """One simulated run and its goodput under the SLO; its JSON line: the goodput's keys, then ``simulation``."""

    result: GoodputResult
    sim: SimulatedRun
    tiers: Any = None
    """With a host KV tier: ``sim_tiers.SimTierReport`` (its JSON under ``kv_tiers``, as ``simulate --json``)."""

    __json__ = ("**result", ("simulation", "sim.provenance"), ("kv_tiers", "tiers"))
    __json_optional__ = ("kv_tiers",)

    def lines(self) -> list[Any]:
        return [self]


@dataclass(frozen=True)
class ProbeWhere:
    """Where a probe stood in the search: the axis and its value, the probe's order and phase, and the early-stop
    evidence when the rule ended it (None: run to the end)."""

    axis: str
    value: float
    order: int
    phase: str
    stopped_early: dict[str, Any] | None


@dataclass(frozen=True)
class ProbeLine:
    """One probe's JSON line: its goodput's keys, then ``probe``."""

    goodput: GoodputResult
    probe: ProbeWhere

    __json__ = ("**goodput", "probe")


@dataclass(frozen=True)
class BoundaryFigures:
    """The search's ``boundary`` object: the bisection's keys, then the figures per replica and per GPU."""

    result: BoundaryResult
    boundary_per_replica: float | None
    boundary_per_gpu: float | None
    goodput_at_boundary_req_per_s: float | None
    goodput_at_boundary_req_per_s_per_gpu: float | None
    num_requests_per_probe: int | None
    capacity_bound_req_per_s: float | None = None
    """The deployment's capacity bound where it caps the boundary (``work_bounds``): what ``cost --simulate`` and
    ``search`` size and price on (JSON ``sized_on_req_per_s``); None where it does not bind. Every key is in the
    JSON, null where it does not apply, for a simulated search and a sweep of FILEs alike (``of_sweep``)."""
    bound_req_per_s: float | None = None  # the bound, binding or not (JSON capacity_bound_req_per_s); None: none proven

    __json__ = ("**result", "boundary_per_replica", "boundary_per_gpu", "goodput_at_boundary_req_per_s",
                "goodput_at_boundary_req_per_s_per_gpu", "sustained_good_req_per_s_at_boundary",
                ("sized_on_req_per_s", "capacity_bound_req_per_s"), ("capacity_bound_req_per_s", "bound_req_per_s"),
                "num_requests_per_probe")

    @classmethod
    def of_sweep(cls, result: BoundaryResult) -> BoundaryFigures:
        """The figures of a boundary across measured runs (``goodput FILES --target``): the goodput of the run at the
        boundary (and per GPU where the runs state their GPUs), no replicas (a file's deployment is one server as
        measured: null), no probes, no capacity bound."""
        at = next((p for p in result.points if p.value == result.boundary_value), None)
        good = None if at is None else at.goodput_req_per_s
        per_gpu = (good * result.boundary_per_gpu / result.boundary_value if good is not None
                   and result.boundary_per_gpu is not None and result.boundary_value else None)
        return cls(result, None, result.boundary_per_gpu, good, per_gpu, None)

    def to_dict(self) -> dict[str, Any]:
        from kvledger.jsonable import to_jsonable

        return to_jsonable(self)

    @property
    def sustained_good_req_per_s_at_boundary(self) -> float | None:
        """On the request-rate axis, the boundary rate × its probe's share within the SLO: the good req/s a replica
        fed that rate sustains, which ``cost`` and ``search`` price (``ledgers/sustained_rate.py``); the goodput beside
        it divides by the probe's first arrival → last finish. None on other axes or without a boundary."""
        r = self.result
        if r.axis != "request_rate" or r.boundary_value is None:
            return None
        return next((r.boundary_value * p.attainment for p in r.points if p.value == r.boundary_value), None)


@dataclass(frozen=True)
class BoundaryLine:
    """The search's last JSON line (the module docstring); ``error_band`` null when there is none."""

    boundary: BoundaryFigures
    probes: list[SimProbe]
    simulation: SimProvenance
    notes: list[str]
    error_band: CapacityBand | None
    seed_spread: Any = None
    seed_boundaries: list[dict[str, Any]] | None = None
    not_steady: Any = None
    """The boundary probe's queue growth or too-short record (``queue_growth.boundary_steadiness``), as ``cost
    --json``'s ``capacity_search.not_steady``; None (null) when it held."""

    attainment_ceiling: Any = None
    """``attainment_ceiling.AttainmentCeiling``: the target near what the lightest load probed attains (its note is
    among the notes, a warning); None (null) otherwise."""
    rejections: Any = None
    """``rejections.Rejections``: the probes' requests the engine refuses (never good); None (null): none."""
    idle_edge: Any = None
    """``idle_edge.IdleEdge``: the target met only within sampling noise even near idle, so no capacity; None (null)
    otherwise."""
    sized_error_band: CapacityBand | None = None
    """Where the capacity bound caps the rate found: the band of the bound, the rate ``cost --simulate`` and
    ``search`` size on, as they band it (``capacity_bands.capacity_band``); None (null) otherwise."""
    kv_tier_capacity: dict[str, Any] | None = None
    """With tier flags: the capacity without the tiers beside the one searched with them
    (``report_tier_capacity.capacity_block``, report's ``kv_tiers.capacity``); the key is absent without them."""

    __json_optional__ = ("kv_tier_capacity",)

    # every key is there, null where it does not apply (one seed, a steady boundary, …), as cost --json writes them


@dataclass(frozen=True)
class SimGoodputSearch:
    """A simulator-driven boundary search (``search``, its ``error_band`` set on the request-rate axis)."""

    search: SimBoundary
    not_steady: Any = None  # the boundary probe's QueueGrowth or ShortRun (boundary_steadiness), None when it held
    tier_capacity: dict[str, Any] | None = None  # with tier flags: report_tier_capacity.capacity_block, else None

    def lines(self) -> list[Any]:
        """One ``ProbeLine`` per probe, in probe order, then the ``BoundaryLine``."""
        sb = self.search
        out: list[Any] = [ProbeLine(g, ProbeWhere(sb.axis, p.value, p.order, p.phase, p.stopped_early))
                          for g, p in zip(sb.goodputs, sb.probes)]
        figures = BoundaryFigures(sb.boundary, sb.boundary_per_replica, sb.boundary_per_gpu,
                                  sb.goodput_at_boundary_req_per_s, sb.goodput_at_boundary_req_per_s_per_gpu,
                                  sb.num_requests_per_probe, sb.capacity_bound_req_per_s, sb.bound_req_per_s)
        spread = sb.seed_spread
        return out + [BoundaryLine(figures, sb.probes, sb.provenance, sb.notes, sb.error_band, spread,
                                   None if spread is None else spread.boundaries(), self.not_steady,
                                   sb.attainment_ceiling, sb.rejections, sb.idle_edge, sb.sized_error_band,
                                   self.tier_capacity)]


def simulated_goodput(args: SimRequestArgs, slo: SLO, synthetic: SyntheticSpec | None = None) -> SimGoodputRun:
    """Simulate one run and measure its goodput under ``slo``."""
    sim = simulate_run(args, synthetic)
    res = goodput(sim.run, slo)
    budget = itl_budget_words(sim, slo, res.num_missed.get("itl", 0), "in this run")  # an ITL limit no load can meet
    res.notes += [WARNING_PREFIX + budget] if budget else []
    return SimGoodputRun(res, sim)


def simulated_goodput_with_tier(args: SimRequestArgs, slo: SLO, tiers: Any,
                                synthetic: SyntheticSpec | None = None) -> SimGoodputRun:
    """Simulate one run with the host KV tier ``tiers`` (``accounting.kv_tier_rules.TierSettings``) as ``kvledger
    simulate`` does (``tier_runs.simulate_with_tier``: ``sim_tiers.run_with_tier``, the tier built by
    ``sim_host_tier``; the capacity search with the tier runs the same) and measure its goodput.

    Raises:
        InputError: what ``prepare_run`` or ``run_with_tier`` refuses (tier flags of the other engine, no host tier).
    """
    from kvledger.analyses.serving.tier_runs import simulate_with_tier

    sim, report = simulate_with_tier(args, tiers, synthetic)  # --document-pool: its expected hits in the setup
    return SimGoodputRun(goodput(sim.run, slo), sim, report)


def simulated_goodput_search(args: SimRequestArgs, slo: SLO, target: float, axis: str, *, lo: float | None = None,
                             hi: float | None = None, tol: float | None = None,
                             synthetic: SyntheticSpec | None = None, seeds: int = 1,
                             tier: Any = None) -> SimGoodputSearch:
    """``sim_boundary.search_sim_boundary`` (``tier``: each probe with the KV tiers, ``SimProber``'s), with the 80%
    capacity band of its boundary on the request-rate axis;
    ``seeds`` > 1 repeats the whole search with seeds ``args.seed + 1`` … after the first, one after the other, and
    attaches each seed's capacity and their min–max (``seed_spread.capacity_spread``); the reported search, its
    probes and band stay the first seed's."""
    sb = search_sim_boundary(args, slo, target, axis, lo=lo, hi=hi, tol=tol, synthetic=synthetic, tier=tier)
    if seeds > 1:
        from dataclasses import replace

        from kvledger.analyses.serving.seed_spread import capacity_spread, seed_list, seed_used

        def search_seed(seed: int) -> SimBoundary:
            return search_sim_boundary(replace(args, seed=seed), slo, target, axis, lo=lo, hi=hi, tol=tol,
                                       synthetic=synthetic)

        probe = replace(args, rate=1.0) if sb.axis == "request_rate" else args  # a probe draws as any rate's does
        sb.seed_spread = capacity_spread(sb, seed_list(args.seed, seeds),
                                         search_seed if seed_used(probe, synthetic) else None)
        if sb.seed_spread.note is not None:
            sb.notes.append(sb.seed_spread.note)
    not_steady = None
    if sb.axis == "request_rate":
        sb.error_band = capacity_band(sb.first_run.setup, sb.boundary.boundary_value, sb, slo)
        if sb.boundary_run is not None:  # a boundary probe that never reached steady state: its capacity is optimistic
            not_steady, warning = boundary_steadiness(sb.boundary_run.run, sb.boundary.boundary_value,
                                                      sb.num_requests_per_probe)
            sb.notes.extend(warning)
            _session_steady_state(sb, synthetic)
            _cap_at_bound(sb, args, synthetic)
            if sb.capacity_bound_req_per_s is not None:  # sized on the bound: its band, as cost and search give it
                sb.sized_error_band = capacity_band(sb.first_run.setup, sb.capacity_bound_req_per_s, sb, slo)
    return SimGoodputSearch(sb, not_steady)


def _session_steady_state(sb: SimBoundary, synthetic: Any) -> None:
    """A session workload's capacity at its steady state, as ``search`` judges it (``session_spec.steady_goodput``):
    its check that the boundary probe's sessions carried its rate (``CapacityNotMeasured`` where they did not: raise
    --sessions), and its note on ``sb``: the boundary rate × its attainment, the good req/s the answer gives first and
    cost and search price, against the whole probe's first arrival → last finish. Nothing for another workload."""
    if not hasattr(synthetic, "prepare_setup"):  # sessions, as search tells them (analyses/search/evaluate.py)
        return
    from kvledger.analyses.serving.session_spec import steady_goodput

    b = sb.boundary.boundary_value
    at = next(g for g, p in zip(sb.goodputs, sb.probes) if p.value == b)
    note = steady_goodput(at, b, sb.boundary_run.run if sb.boundary_run is not None else None)[1]
    sb.notes += [note] if note else []  # "": no good request at the boundary, nothing to scale


def _cap_at_bound(sb: SimBoundary, args: SimRequestArgs, synthetic: SyntheticSpec | None) -> None:
    """Where the deployment's capacity bound (``work_bounds.capacity_bound_req_per_s``) caps the rate found, as
    ``cost --simulate`` and ``search`` size on it: the bound on ``sb`` and cost's note (``work_bounds.bound_note``)
    among its notes; the bound itself on ``sb.bound_req_per_s`` either way. The capacity found is kept as found."""
    from kvledger.analyses.serving.work_bounds import bound_note, capacity_bound_req_per_s, capped

    found = sb.boundary.boundary_value
    bound = sb.bound_req_per_s = capacity_bound_req_per_s(args, synthetic, sb.target)
    if bound is not None and capped(found, bound) != found:
        sb.capacity_bound_req_per_s = bound
        sb.notes.append(bound_note(bound, found))
