"""SLO-boundary search by driving the simulator: the largest request rate, concurrency or max_num_seqs whose attainment
meets a target.

DistServe's goodput (Zhong et al., OSDI 2024 §2): the highest load served with at least a target share of requests
meeting every SLO. Each probe is one deterministic simulation (``sim_ledgers.simulate_run``, same seed and workload
at every load), so the answer is reproducible. When the user gives no bracket, one is found by doubling (or halving)
from 1 req/s, 1 user, and for ``max_num_seqs`` the bracket is [1, the engine default]; then
``kvledger.ledgers.boundary.search_boundary`` bisects it. Like that function, this assumes attainment does not rise
with load, and says when a probe shows it does.

The boundary is a load the engine *sustains*: an open-loop probe whose queue kept growing to its last arrival past
what the trace's own bursts explain (``kvledger.analyses.serving.queue_growth.probe_queue_grew``), or too short to show
its load (``probe_length.probe_too_short``), misses the target whatever its attainment. A probe of a few hundred or
thousand requests above the engine's capacity still scores well (the early arrivals were served before the queue grew
long): Llama-3.1-8B on an H100, azure-conv, TTFT ≤ 500 ms, TPOT ≤ 50 ms: 400-request probes found 32 req/s on TP 1 and
74 on TP 2 by attainment alone, 22.25 and 39 counting the growing queues out; 6,000-request probes find 21 and 39.5.
A closed loop cannot grow its queue and is judged on its attainment alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from kvledger.analyses.serving.attainment_ceiling import AttainmentCeiling, attainment_ceiling
from kvledger.analyses.serving.capacity_bands import CapacityBand
from kvledger.analyses.serving.idle_edge import IdleEdge, check_idle_edge
from kvledger.analyses.serving.itl_budget import itl_budget_note, retell_idle_note
from kvledger.analyses.serving.probe_length import short_notes
from kvledger.analyses.serving.probe_sample import sample_note
from kvledger.analyses.serving.queue_growth import QUEUE_CHECK
from kvledger.analyses.serving.rejections import Rejections, count_rejections
from kvledger.analyses.serving.sim_bracket import find_bracket, guessed_bracket
from kvledger.analyses.serving.sim_document import SimProvenance
from kvledger.analyses.serving.sim_ledgers import SimulatedRun, SyntheticSpec
from kvledger.analyses.serving.sim_prober import SimProber
from kvledger.analyses.serving.sim_setup import SimRequestArgs, load_plan
from kvledger.analyses.serving.unit_layout import unit_layout
from kvledger.dynamics.early_stop import RULE_TEXT
from kvledger.errors import InputError
from kvledger.jsonable import to_jsonable
from kvledger.ledgers.boundary import BoundaryPoint, BoundaryResult, search_boundary, unsustained_note
from kvledger.ledgers.goodput import GoodputResult
from kvledger.ledgers.slo import SLO
from kvledger.ranges import ATTAINMENT_TARGET, check_options

__all__ = ["SEARCH_AXES", "PROBE_NUM_REQUESTS", "MIN_PROBE_REQUESTS", "SimProbe", "SimBoundary", "normalize_axis",
           "search_sim_boundary"]

SEARCH_AXES = {"request_rate": "mean arrival rate, req/s (the trace's gaps rescaled, burstiness kept; or the synthetic "
                               "rate)",
               "concurrency": "closed-loop users, each sending its next request when the last one ends",
               "max_num_seqs": "engine max_num_seqs per replica (the memory plan is rebuilt: vLLM's activation peak "
                               "grows with it)"}
_AXIS_ALIASES = {"rate": "request_rate", "request-rate": "request_rate", "users": "concurrency",
                 "max-num-seqs": "max_num_seqs"}
MIN_PROBE_REQUESTS = 50
"""Requests per probe, at least (``search``'s floor too, kvledger.ranges): a handful of requests measures its drain
tail, not the replica (queue_growth needs 20): 5 per probe found "4,096 req/s" for Llama-3.1-8B on an H100 (19.75)."""
PROBE_NUM_REQUESTS = 2000
"""Requests per probe unless the caller says otherwise (each probe well under a second for an 8B model on an H100)."""


def normalize_axis(axis: str) -> str:
    """``request_rate``, ``concurrency`` or ``max_num_seqs`` (``rate`` accepted). Raises InputError otherwise."""
    a = _AXIS_ALIASES.get(axis.strip().lower(), axis.strip().lower())
    if a not in SEARCH_AXES:
        raise InputError(f"unknown search axis {axis!r}; use one of {', '.join(SEARCH_AXES)} (or 'rate')")
    return a


@dataclass(slots=True)
class SimProbe:
    """One simulated load: its value on the axis, attainment and goodput, whole deployment and per replica / GPU.

    ``phase`` is "bracket" (doubling or halving to find the ends), "bisection" (search_boundary's probes) or "check"
    (the top of a range whose bottom already missed, to tell "nothing meets" from "attainment rises with the value").
    Rates are req/s; tokens/s count output tokens. ``stopped_early``: when the early-stop rule ended the probe
    (kvledger.dynamics.early_stop), its evidence (simulated time, requests certain to miss, ``attainment_upper``); the
    attainment and goodput are then lower bounds over the requests finished by then. None: run to the end.
    ``queue_grew``: its queue kept growing past the trace's own bursts (``queue_growth.probe_queue_grew``), and
    ``too_short``: it was too short to show its load (``probe_length``): either misses the target whatever its
    attainment. Every probe's JSON carries every key: ``queue_grew`` null where not checked, ``too_short`` false where
    long enough.
    """

    order: int
    phase: str
    value: float
    attainment: float
    meets_target: bool
    num_requests: int
    goodput_req_per_s: float | None
    throughput_req_per_s: float | None
    goodput_output_tok_per_s: float | None
    goodput_req_per_s_per_replica: float | None
    goodput_req_per_s_per_gpu: float | None
    offered_rate_req_per_s: float | None
    stopped_early: dict[str, Any] | None = None
    queue_grew: bool | None = None
    too_short: bool = False


@dataclass
class SimBoundary:
    """Outcome of a simulator-driven boundary search.

    Attributes:
        boundary: the bisection's result (its ``points`` include the bracketing probes).
        probes: every simulation run, in the order run, with goodput and throughput.
        boundary_per_replica / boundary_per_gpu: the boundary ÷ replicas / ÷ GPUs (``max_num_seqs``: per replica).
        goodput_at_boundary_req_per_s: goodput of the probe at the boundary (DistServe's per-GPU goodput ÷ GPUs).
        provenance: the simulation inputs of the first probe (the axis value varies).
        goodputs, first_run, boundary_run: each probe's goodput, the first probe's and the boundary's runs; not JSON.
    """

    __json__ = ("axis", "target", "num_requests_per_probe", "replicas", "num_gpus", "boundary_per_replica",
                "boundary_per_gpu", "goodput_at_boundary_req_per_s", "goodput_at_boundary_req_per_s_per_gpu", "notes",
                "provenance", "boundary", "probes", "idle_edge")
    __json_optional__ = ("idle_edge",)
    axis: str
    target: float
    num_requests_per_probe: int
    replicas: int
    num_gpus: int
    boundary: BoundaryResult
    probes: list[SimProbe]
    boundary_per_replica: float | None
    boundary_per_gpu: float | None
    goodput_at_boundary_req_per_s: float | None
    goodput_at_boundary_req_per_s_per_gpu: float | None
    provenance: SimProvenance
    notes: list[str] = field(default_factory=list)
    goodputs: list[GoodputResult] = field(default_factory=list, repr=False)
    first_run: SimulatedRun | None = field(default=None, repr=False)
    boundary_run: SimulatedRun | None = field(default=None, repr=False)
    error_band: CapacityBand | None = None  # the boundary's 80% band on the request-rate axis (set by the caller)
    seed_spread: Any = None  # with --seeds N: seed_spread.CapacitySpread, the search per seed (set by the caller)
    rejections: Rejections | None = None  # the probes' requests the engine refuses (never good), None: none
    attainment_ceiling: AttainmentCeiling | None = None  # the target near what light load attains, None: not
    idle_edge: IdleEdge | None = None  # the target within sampling noise of near-idle attainment: no capacity
    capacity_bound_req_per_s: float | None = None  # where it caps the boundary: cost's sizing (set by the caller)
    bound_req_per_s: float | None = None  # that bound, binding or not; None where none is proven (the caller)
    sized_error_band: CapacityBand | None = None  # then the band of that rate, as cost and search band it (the caller)
    sessions_limit: dict[str, Any] | None = None  # too few sessions carried a rate that met (session_ramp), else None
    tier_report: Any = None  # with a tier: the boundary probe's sim_tier_report.SimTierReport (not in the JSON)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready (without the per-probe GoodputResults, which the CLI prints one per line)."""
        return to_jsonable(self)


def _check_args(args: SimRequestArgs, axis: str, lo: float | None, hi: float | None) -> None:
    taken = {"request_rate": [("rate", "--rate"), ("rate_scale", "--rate-scale"), ("concurrency", "--concurrency")],
             "concurrency": [("concurrency", "--concurrency")], "max_num_seqs": [("max_num_seqs", "--max-num-seqs")]}
    for attr, flag in taken[axis]:
        if getattr(args, attr) is not None:
            raise InputError(f"the search varies {axis}, so {flag} cannot be given too; bound it with --lo/--hi")
    if axis == "concurrency" and (args.rate is not None or args.rate_scale is not None):
        raise InputError("--rate or --rate-scale would pace every probe at one request rate, so past the clients that "
                         "rate needs the attainment would not change with them: the concurrency search runs closed "
                         "loops; drop it, or search --axis request_rate")
    check_options("goodput", {"lo": lo, "hi": hi})  # (0, 1e9], finite: kvledger.ranges
    if args.num_requests is not None and args.num_requests < MIN_PROBE_REQUESTS:
        raise InputError(f"--num-requests {args.num_requests:,} is too few for a capacity search: each probe needs at "
                         f"least {MIN_PROBE_REQUESTS} requests (a handful measures its drain tail, not the replica, "
                         f"and cannot show whether its queue kept up); {PROBE_NUM_REQUESTS:,} is the default")
    for name, v in (("lo", lo), ("hi", hi)):
        if v is not None and axis != "request_rate" and (v != int(v) or v < 1):
            raise InputError(f"--{name} for {axis} must be a whole number ≥ 1, got {v:g}")
    if lo is not None and hi is not None and lo >= hi:
        raise InputError(f"need --lo < --hi, got lo={lo:g}, hi={hi:g}")


def search_sim_boundary(args: SimRequestArgs, slo: SLO, target: float, axis: str = "request_rate", *,
                        lo: float | None = None, hi: float | None = None, tol: float | None = None,
                        synthetic: SyntheticSpec | None = None, max_evals: int = 30, tier: Any = None,
                        early_stop: bool = True, start: float = 1.0, guess: bool = False) -> SimBoundary:
    """The largest value on ``axis`` whose simulated attainment meets ``target`` under ``slo``.

    Args:
        args: the simulation at every probe, except the axis value (``num_requests`` requests per probe).
        lo, hi: the bracket; missing ends are found by doubling / halving (see the module docstring).
        tol: bisection resolution (default 1 % of hi for the rate; 1 for integer axes).
        early_stop: end an open-loop probe once it provably misses the target (kvledger.dynamics.early_stop;
            the boundary is the one full probes give); False runs every probe to the end.
        start: where doubling or halving begins when neither end is given (1 req/s, 1 user by default; a
            configuration search starts at its capacity bound, which a probe there then usually misses).
        guess: on the rate axis without lo, hi or tol, bisect [start/2, start] (and each halving's bracket) before
            its ends are known and leave a high end its probes imply unsimulated (a low end is always probed:
            ``kvledger.analyses.serving.sim_bracket.guessed_bracket``): the same boundary, usually one probe fewer.
        tier: KV tiers (``TierSettings``): every probe is ``goodput --simulate``'s run with them (``SimProber``).

    Raises:
        InputError: an unknown axis, a flag that fixes the varied value, a bad bracket or target, or a simulation that
            cannot run."""
    axis = normalize_axis(axis)
    ATTAINMENT_TARGET.check("attainment target", target)
    _check_args(args, axis, lo, hi)
    integer = axis != "request_rate"
    if axis == "max_num_seqs":
        lo = 1 if lo is None else lo
        hi = hi if hi is not None else load_plan(args)[0].memory.max_num_seqs
        if lo >= hi:
            raise InputError(f"need --lo < --hi for max_num_seqs, got lo={lo:g}, hi={hi:g} (the engine default)")
    p = SimProber(args, synthetic, axis, slo, target, early_stop, tier)
    extra = []
    if guess and axis == "request_rate" and lo is None and hi is None and tol is None:
        blo, bhi, good, bad, implied = guessed_bracket(p, start, max_evals)
        if implied:
            extra.append(f"the rate search started at {start:g} req/s and narrowed the range to [{blo:g}, {bhi:g}] "
                         "by probing inside it (kvledger.analyses.serving.sim_bracket); its high end, not probed, is "
                         f"read from a probe below it, as attainment does not rise with load: {'; '.join(implied)}")
    else:
        blo, bhi = find_bracket(p, lo, hi, integer, start)
        good, bad = blo, bhi
    p.current_phase = "bisection"
    res = search_boundary(p.run_at, slo, target, blo, bhi, axis=axis, integer=integer,
                          tol=tol if tol is not None else (None if integer else bhi / 100.0), max_evals=max_evals,
                          known=(good, bad), queue_grew=p.queue_grew, too_short=p.too_short)
    edge = _checks(p, res, axis, blo, bhi, target, extra)
    sb = _assemble(p, res, axis, target)
    sb.idle_edge, sb.notes, sb.sessions_limit = edge, sb.notes + extra, p.sessions_limit()
    _limits(sb, target, slo)
    return sb


def _checks(p: SimProber, res: BoundaryResult, axis: str, blo: float, bhi: float, target: float,
            extra: list[str]) -> IdleEdge | None:
    """After the bisection: a bracket whose low end missed gets its high end probed (attainment rising with the value is
    said); a rate capacity met only within sampling noise even near idle is withdrawn (``idle_edge``), its edge kept."""
    if res.boundary_value is None and float(bhi) not in p.runs:
        p.current_phase = "check"
        if p.meets(bhi):  # the low end misses but the high end meets: attainment rises with the value here
            extra.append(
                f"attainment rises with {axis} here: {blo:g} misses the target but {bhi:g} meets it "
                + ("(too few running requests queue the rest: TTFT grows); " if axis == "max_num_seqs" else "; ")
                + "the search assumes the opposite, so raise --lo past the region that misses"
            )
    edge = check_idle_edge(p, res.boundary_value, target) if axis == "request_rate" else None
    if edge is not None:
        edge.withdraw(res)
        extra.append(edge.note)
    return edge


def _limits(sb: SimBoundary, target: float, slo: SLO) -> None:
    """What bounds the attainment whatever the load, with its note: the requests the engine refuses (never good), a
    target the lightest load probed barely meets (``attainment_ceiling``), an ITL limit a full chunk's step passes."""
    sb.rejections = count_rejections(sb.first_run.setup)
    sb.attainment_ceiling = attainment_ceiling(sb)
    rejected = sb.rejections.text(target) if sb.rejections is not None else None
    sb.notes += [n for n in (rejected, getattr(sb.attainment_ceiling, "note", None), itl_budget_note(sb, slo)) if n]
    retell_idle_note(sb, slo)  # the "no bisection" note's cause, where the token budget is it


def _probe(order: int, value: float, p: SimProber) -> SimProbe:
    facts, gp, grew = p.runs[value], p.results[value], p.grew[value]
    g = gp.goodput_req_per_s
    return SimProbe(order, p.phase[value], value, gp.attainment, p.meets(value), gp.num_requests, g,
                    gp.throughput_req_per_s, gp.goodput_output_tok_per_s, None if g is None else g / facts.replicas,
                    None if g is None else g / facts.num_gpus, facts.offered_rate_req_per_s, facts.stopped_early, grew,
                    p.too_short(value))


def _assemble(p: SimProber, res: BoundaryResult, axis: str, target: float) -> SimBoundary:
    seen = {pt.value for pt in res.points}
    for value, gp in p.results.items():  # bracketing probes: all below lo met the target, all above hi missed it
        if value not in seen:
            res.points.append(BoundaryPoint(value, gp.attainment, p.meets(value), gp.estimate,
                                            gp.goodput_req_per_s, gp.run_label or gp.source, p.grew[value],
                                            p.too_short(value)))
    res.points.sort(key=lambda pt: pt.value)
    res.notes.extend(unsustained_note(res.points, axis, target, QUEUE_CHECK))
    res.notes.extend(short_notes(p.results, p.short, target, axis) + p.carried_note())
    probes = [_probe(i, v, p) for i, v in enumerate(list(p.runs), start=1)]
    first = p.simulated(next(iter(p.runs)))
    b = res.boundary_value
    per_unit = b is not None and axis != "max_num_seqs"
    at = p.results.get(float(b)) if b is not None else None
    notes = [f"each probe: one simulation of {first.setup.num_requests:,} requests with seed {p.args.seed} "
             f"(same workload at every {axis}); {first.num_gpus} GPU{'' if first.num_gpus == 1 else 's'} = "
             f"{first.replicas:,} replica{'' if first.replicas == 1 else 's'} × {unit_layout(first.setup)}"]
    if axis == "max_num_seqs":
        notes.append("max_num_seqs is a per-replica engine setting: no per-GPU figure; the memory plan is rebuilt at "
                     "each value (vLLM's sampler warm-up, max_num_seqs × vocab logits, sets the activation peak)")
    if axis == "request_rate" and first.synthetic is not None:
        notes.append(getattr(first.synthetic, "rate_note", None) or "synthetic arrivals: the axis value is the "
                     "nominal Poisson/Gamma rate; the offered rate of each probe (its requests ÷ their arrival span) "
                     "is listed next to it")
    notes.extend(sample_note(first))  # a short window of a trace need not look like the trace
    stopped = [pr for pr in probes if pr.stopped_early is not None]
    if stopped:
        notes.append(RULE_TEXT + f"; {len(stopped)} of {len(probes)} probes stopped early")
    goodput_at = at.goodput_req_per_s if at is not None else None
    return SimBoundary(axis, target, first.setup.num_requests, first.replicas, first.num_gpus, res, probes,
                       b / first.replicas if per_unit else None, b / first.num_gpus if per_unit else None,
                       goodput_at, goodput_at / first.num_gpus if goodput_at is not None else None,
                       first.provenance(), notes, [p.results[v] for v in p.runs], first,
                       p.simulated(b) if b is not None else None, tier_report=p.tier_reports.get(b))
