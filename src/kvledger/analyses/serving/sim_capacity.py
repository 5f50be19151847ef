"""A simulated replica's SLO capacity for the cost ledger: the request-rate boundary search, and the run at the
boundary that the ledger prices.

Pricing a simulated run at the trace's own arrival rate measures the offered load, not what
the GPU can take (the Azure conversation trace offers 5.5 req/s to an H100 whose KV pool it
fills to 2 %). The capacity the cost ledger wants is DistServe's goodput (Zhong et al.,
OSDI 2024 §2): the highest request rate at which ``target`` of the requests meet the SLO.
:func:`search_capacity` finds it with :func:`kvledger.analyses.serving.sim_boundary.search_sim_boundary`
on the ``request_rate`` axis — the same search, probes and seeded workload as
``kvledger goodput --simulate … --target T --axis rate`` — and returns the run at the boundary,
whose goodput then sets the self-hosted capacity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from functools import partial
from typing import Any, ClassVar

from kvledger.analyses.serving.capacity_bands import capacity_band
from kvledger.analyses.serving.itl_budget import idle_cause
from kvledger.analyses.serving.notes import ATTAINMENT_CEILING, ITL_BUDGET
from kvledger.analyses.serving.queue_growth import boundary_steadiness
from kvledger.analyses.serving.rejections import no_capacity_error
from kvledger.analyses.serving.sim_boundary import SimBoundary, search_sim_boundary
from kvledger.analyses.serving.sim_ledgers import SimulatedRun, SyntheticSpec, simulate_run
from kvledger.analyses.serving.sim_setup import SimRequestArgs
from kvledger.analyses.serving.work_bounds import bound_note, capacity_bound_req_per_s, capped
from kvledger.errors import InputError
from kvledger.jsonable import to_jsonable
from kvledger.ledgers.boundary import missed_words
from kvledger.ledgers.goodput import GoodputResult, goodput
from kvledger.ledgers.slo import SLO

__all__ = ["SimCapacity", "search_capacity", "DEFAULT_TARGET", "SizedRun", "SizedFigures", "run_at_sized_rate"]

DEFAULT_TARGET = 0.9
"""Attainment target of the capacity search unless given: 90 % of requests within the SLO (DistServe's usual figure)."""


@dataclass(frozen=True)
class SizedRun:
    """Where the capacity bound caps the rate found: a run of the probes' workload and seed at the rate sized on, so
    that the figures shown beside that rate (attainment, goodput, latencies, the ledger's GPU time) are its own, not
    the probe's at a rate the deployment cannot sustain.

    Attributes:
        run: the simulation at ``rate_req_per_s`` (``sim_ledgers.simulate_run``, deterministic and seeded).
        rate_req_per_s: the rate sized on (the capacity bound), req/s.
        result: its goodput under the SLO (``ledgers.goodput.goodput``).
    """

    run: SimulatedRun
    rate_req_per_s: float
    result: GoodputResult


def run_at_sized_rate(args: SimRequestArgs, synthetic: SyntheticSpec | None, slo: SLO, rate: float) -> SizedRun:
    """The run at ``rate`` of the workload the probes ran (``args`` with only the rate set; token times only where
    the SLO judges gaps, as the probes), run to its end, and its goodput under ``slo``."""
    sim = simulate_run(replace(args, rate=rate), synthetic, record_token_times=slo.itl_s is not None)
    return SizedRun(sim, rate, goodput(sim.run, slo))


class SizedFigures:
    """The run priced and its figures: the run at the rate found (``run``, ``attainment``, ``goodput_req_per_s``), or,
    where the capacity bound caps that rate, the run at the rate sized on (``at_sized``, a ``SizedRun``)."""

    run: Any
    rate_req_per_s: float
    attainment: float
    goodput_req_per_s: float
    at_sized: SizedRun | None

    @property
    def priced_run(self) -> Any:
        """The SimulatedRun the ledger prices and the report's figures read: at the rate sized on."""
        return self.run if self.at_sized is None else self.at_sized.run

    @property
    def attainment_at_sized_rate(self) -> float | None:
        """Share of requests within the SLO in the run at the rate sized on; None where that is the rate found."""
        return None if self.at_sized is None else self.at_sized.result.attainment

    @property
    def goodput_at_sized_rate_req_per_s(self) -> float | None:
        """Good req/s of the run at the rate sized on; None where that is the rate found."""
        return None if self.at_sized is None else self.at_sized.result.goodput_req_per_s

    @property
    def priced_attainment(self) -> float:
        """Share of requests within the SLO in the run priced (``priced_run``)."""
        a = self.attainment_at_sized_rate
        return self.attainment if a is None else a

    @property
    def priced_goodput_req_per_s(self) -> float:
        """Good req/s of the run priced (``priced_run``)."""
        g = self.goodput_at_sized_rate_req_per_s
        return self.goodput_req_per_s if g is None else g

    def priced_clause(self) -> str:
        """How the text ends: what the ledger priced — the rate × the run's share within the SLO, what a replica fed
        that rate sustains (``ledgers/sustained_rate.py``), beside the run's own goodput, whose first arrival → last
        finish holds its drain tail."""
        if self.at_sized is None:
            r, a, g = self.rate_req_per_s, self.attainment, self.goodput_req_per_s
            return (f"priced at {r:,.4g} req/s × {a:.1%} of that run's requests within the SLO = {r * a:,.3f} good "
                    f"req/s per deployment unit (its goodput over first arrival → last finish: {g:,.3f})")
        r, a, g = self.at_sized.rate_req_per_s, self.priced_attainment, self.priced_goodput_req_per_s
        return (f"priced at a run of the same workload and seed at {r:,.4g} req/s: × {a:.1%} of its requests within "
                f"the SLO = {r * a:,.3f} good req/s per deployment unit (its goodput over first arrival → last finish: "
                f"{g:,.3f})")


@dataclass
class SimCapacity(SizedFigures):
    """The SLO capacity of a simulated deployment and the run at it.

    Attributes:
        run: the probe at the boundary rate (its goodput is what the ledger prices, unless ``at_sized``).
        search: the whole search (every probe, the bisection, notes).
        rate_req_per_s: the boundary: highest mean arrival rate whose attainment meets the target, req/s.
        attainment: share of the boundary run's requests that met the SLO.
        goodput_req_per_s: the boundary run's good requests ÷ its duration, req/s (whole deployment unit).
        notes: caveats, e.g. a drain tail long enough that the goodput understates the sustained rate.
    """

    method: ClassVar[str] = "kvledger.analyses.serving.sim_boundary.search_sim_boundary on request_rate"
    __json__ = ("method", ("target", "search.target"), ("slo_capacity_req_per_s", "rate_req_per_s"),
                ("attainment_at_boundary", "attainment"), ("goodput_at_boundary_req_per_s", "goodput_req_per_s"),
                ("sized_on_req_per_s", "binding_bound"), ("capacity_bound_req_per_s", "bound_req_per_s"),
                "attainment_at_sized_rate", "goodput_at_sized_rate_req_per_s",
                ("num_requests_per_probe", "search.num_requests_per_probe"), "error_band", "not_steady",
                ("boundary", "search.boundary"), ("probes", "search.probes"), ("notes", "all_notes"),
                ("attainment_ceiling", "search.attainment_ceiling"), ("rejections", "search.rejections"))
    # every key is there: attainment_ceiling and rejections null where they have nothing to say, sized_on_req_per_s, …
    # null where the bound does not bind, capacity_bound_req_per_s where none is proven
    run: SimulatedRun
    search: SimBoundary
    rate_req_per_s: float
    attainment: float
    goodput_req_per_s: float
    notes: list[str] = field(default_factory=list)
    error_band: Any = None
    """The 80% band of the capacity (``capacity_bands.capacity_band``: the saturation-throughput band of the regime
    that priced the run), None when no measured run stands for it."""
    not_steady: Any = None
    """The boundary run's queue growth (``queue_growth.QueueGrowth``) when its backlog (or, in a probe too short to
    read it, its waiting queue) was still growing at its last arrival: the probe ended before it reached steady state,
    so the rate found is optimistic; ``queue_growth.ShortRun`` when the probe was too short to tell; None when it
    held."""
    bound_req_per_s: float | None = None
    """The deployment's capacity bound (``work_bounds.capacity_bound_req_per_s``): the most req/s its engine can keep
    pace with by the roofline work of the probe's requests; None where none is proven."""
    at_sized: SizedRun | None = None
    """Where the bound caps the rate found: the run at the bound, which the ledger prices (``SizedRun``)."""
    rerun: Any = None
    """rate → ``SizedRun``: the probes' workload and seed run at another rate (``run_at_sized_rate``)."""

    @property
    def sizing_req_per_s(self) -> float:
        """The offered req/s a replica is sized and priced on: the SLO capacity found, but never above the bound (a
        probe short against the SLO's latency budget meets the target at any rate; ``work_bounds.bound_note``)."""
        return capped(self.rate_req_per_s, self.bound_req_per_s)

    @property
    def binding_bound(self) -> float | None:
        """The bound where it caps the capacity found (then also what is sized on), else None: the JSON says nothing
        new where it does not bind."""
        return None if self.sizing_req_per_s == self.rate_req_per_s else self.bound_req_per_s

    def text(self) -> str:
        """One line: the search and what it priced."""
        s, ff = self.search, self.search.boundary.first_failing_value
        grew = any(p.value == ff and p.queue_grew for p in s.probes)
        miss = f"; {ff:g} req/s misses{', its queue growing' if grew else ''}" if ff is not None else ""
        return (f"capacity: SLO-capacity search on the request rate "
                f"(kvledger.analyses.serving.sim_boundary.search_sim_boundary; "
                f"{len(s.probes)} probes of {s.num_requests_per_probe:,} requests, seed {self.run.args.seed}): the "
                f"highest rate with ≥ {s.target:.0%} of requests within the SLO and no queue counted as growing "
                f"is {self.rate_req_per_s:g} req/s "
                f"({self.attainment:.1%} there{miss}); " + self._cap_clause() + self.priced_clause())

    def _cap_clause(self) -> str:
        b = self.binding_bound
        return "" if b is None else (f"sized on {b:,.4g} req/s, the deployment's capacity bound, below the "
                                     f"{self.rate_req_per_s:g} req/s found (see the note), and ")

    def probes_text(self) -> str:
        """The probes in order: ``rate → attainment`` (a probe whose queue grew: ``… (queue grew: a miss)``; a probe
        stopped early: ``rate → lo–hi* (stopped early)``)."""
        return ", ".join(f"{p.value:g} → {p.attainment:.1%}{' (queue grew: a miss)' if p.queue_grew else ''}"
                         if p.stopped_early is None else
                         f"{p.value:g} → {stopped_share_text(p.attainment, p.stopped_early['attainment_upper'])} "
                         "(stopped early)"
                         for p in self.search.probes)

    @property
    def all_notes(self) -> list[str]:
        """This capacity's notes, then the search's not already among them."""
        return self.notes + [n for n in self.search.notes if n not in self.notes]

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the boundary, what was priced, every probe and the search's notes."""
        return to_jsonable(self)


def search_capacity(args: SimRequestArgs, slo: SLO, target: float = DEFAULT_TARGET, *,
                    synthetic: SyntheticSpec | None = None) -> SimCapacity:
    """The SLO capacity of the deployment ``args`` describes, by simulation (module docstring).

    Args:
        args: model, GPU, engine and workload; the load (``rate``, ``rate_scale``, ``concurrency``)
            must be unset — the search varies the rate. ``num_requests`` requests per probe.
        slo: the latency SLO a good request meets.
        target: share of requests that must be good, in (0, 1].
        synthetic: a synthetic workload instead of ``args.trace``.

    Raises:
        InputError: a load flag given (price at it with --at-offered-load instead), a bad target, or a
            simulation that cannot run.
        NoAnswerError: no rate down to the search's floor meets the target (``rejections.no_capacity_error``: the
            requests max_model_len refuses first, where they alone miss it).
    """
    given = [flag for attr, flag in (("rate", "--rate"), ("rate_scale", "--rate-scale"), ("concurrency",
                                                                                          "--concurrency"))
             if getattr(args, attr) is not None]
    if given:
        raise InputError(f"{', '.join(given)} {'fixes' if len(given) == 1 else 'fix'} the load, but cost --simulate "
                         f"prices at the SLO capacity it searches for "
                         "(the highest request rate meeting --target); add --at-offered-load to price the run at the "
                         "load "
                         "you gave, or drop " + ", ".join(given))
    sb = search_sim_boundary(args, slo, target, "request_rate", synthetic=synthetic)
    b = sb.boundary.boundary_value
    if b is None or sb.boundary_run is None or sb.goodput_at_boundary_req_per_s is None:  # no capacity: exit 1
        lowest = min(zip(sb.probes, sb.goodputs), key=lambda pg: pg[0].value)
        raise no_capacity_error(sb.rejections, lowest[0].value, target, slo.describe(), sb.idle_edge,
                                missed_words(lowest[1], slo, idle_cause(sb, slo)))
    at = next(g for g, p in zip(sb.goodputs, sb.probes) if p.value == b)
    cap = SimCapacity(sb.boundary_run, sb, float(b), at.attainment, sb.goodput_at_boundary_req_per_s)
    cap.bound_req_per_s = capacity_bound_req_per_s(args, synthetic, target)
    cap.rerun = partial(run_at_sized_rate, args, synthetic, slo)
    if cap.binding_bound is not None:  # a probe short against the SLO's latency budget: sized on the bound, priced
        cap.notes.append(bound_note(cap.binding_bound, cap.rate_req_per_s))  # and shown at a run there
        cap.at_sized = cap.rerun(cap.binding_bound)
    cap.error_band = capacity_band(sb.boundary_run.setup, cap.sizing_req_per_s, sb, slo)  # a latency's, if it binds
    cap.not_steady, steady_note = boundary_steadiness(sb.boundary_run.run, float(b), sb.num_requests_per_probe)
    n = sb.num_requests_per_probe
    priced, grew = (at, cap.not_steady) if cap.at_sized is None else \
        (cap.at_sized.result, boundary_steadiness(cap.priced_run.run, cap.sizing_req_per_s, n)[0])
    if grew is None:  # a run whose queue grew did not sustain "the good rate while they arrived"
        cap.notes.extend(_drain_note(cap, priced.duration_s))
    cap.notes.extend(steady_note)
    cap.notes.extend(n for n in sb.notes if n.startswith(("unrepresentative sample: ", ATTAINMENT_CEILING, ITL_BUDGET)))
    cap.notes.extend([sb.rejections.text(target)] if sb.rejections else [])  # requests refused: never good
    cap.notes.extend(n for n in sb.notes if n.startswith("early stop"))  # the rule behind probes marked stopped early
    # the probes counted out whatever their attainment: "queue grew" and "too short" (probe_length)
    cap.notes.extend(n for n in sb.boundary.notes if n.startswith(("sustained load only: ", "too short to tell: ")))
    return cap


DRAIN_NOTE_SHARE = 0.9
"""Say so when the boundary run's goodput is below this share of the good rate it sustained while requests arrived."""


def _drain_note(cap: SimCapacity, duration_s: float | None) -> list[str]:
    """A note when the priced run's drain tail (last arrival → last finish) pulls its goodput well below the sustained
    rate.

    Goodput divides by first arrival → last finish; while requests arrive, the run serves ``offered × attainment`` good
    req/s, which is what the ledger prices (``ledgers/sustained_rate.py``). A short run whose last requests take long
    to finish reports a goodput well below that; the note says why the two differ.
    """
    sim, g = cap.priced_run, cap.priced_goodput_req_per_s
    offered = sim.run.metadata.request_rate
    if not offered or not duration_s:
        return []
    sustained = offered * cap.priced_attainment
    if g >= DRAIN_NOTE_SHARE * sustained:
        return []
    n = sim.setup.num_requests
    span = (n - 1) / offered
    where = "at the boundary" if cap.at_sized is None else "at the rate sized on"
    return [f"the run {where} took {duration_s:,.1f} s to finish requests that arrived over {span:,.1f} s: its "
            f"goodput ({g:,.3f} good req/s) is {g / sustained:.0%} of the "
            f"{sustained:,.3f} good req/s it sustained while they arrived, which is what the ledger prices: the drain "
            "after the last arrival is not capacity a replica fed a steady stream loses"]


def stopped_share_text(attainment: float, upper: float) -> str:
    """A probe stopped early: ``lo–hi*``, both to 0.1 % and both rounded down (the upper bound so that one missing a
    90 % target by less than the last digit, 89.95 %, still reads below it; the lower one so that it can never print
    above the upper: 0.8946–0.8949 would read 89.5%–89.4%); when they round alike, one value, ``89.4%*``."""
    ends = (attainment, max(upper, attainment))
    lo, hi = (math.floor(round(x * 1000, 6)) / 10 for x in ends)  # round(): 0.882 × 1000 = 881.99…
    return f"{hi:.1f}%*" if lo == hi else f"{lo:.1f}%–{hi:.1f}%*"
