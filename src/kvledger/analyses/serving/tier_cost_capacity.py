"""The SLO capacity ``cost --simulate --kv-tier-host SIZE`` prices: the same deployment served with a host KV tier of
SIZE GiB per GPU in the simulator, found by the search's tier probe (``analyses/search/tier_probe.py``: vLLM's
native ``OffloadingConnector`` rule, ``dynamics/offload_sim.py``; ``--kv-offloading-size`` = SIZE × TP, vLLM's size
being over all TP ranks).

The probe starts at the capacity without the tier (``sim_capacity.search_capacity``, found first), doubles the rate
while the target is met (halves it while missed) and bisects to 1 % of the bracket's low end; each probe is one
simulation of the same seeded workload with the tier. A disk tier (``--kv-tier-nvme``) is not simulated here: the
probe models one tier below HBM, and vLLM's native connector has none on disk. The doubling stops once a rate met is
at or above the capacity bound of the deployment (``work_bounds``), which the capacity is then sized on.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from kvledger.analyses.search.offload_axis import OffloadOption
from kvledger.analyses.search.tier_probe import TierProber, tier_capacity
from kvledger.analyses.serving.sim_capacity import SimCapacity, SizedFigures, SizedRun
from kvledger.analyses.serving.work_bounds import bound_note, capped
from kvledger.errors import InputError, NoAnswerError
from kvledger.jsonable import to_jsonable

__all__ = ["TierCapacity", "tier_search_capacity", "TIER_RULE"]

TIER_RULE = "vLLM's native OffloadingConnector rule (write-through LRU host tier, dynamics/offload_sim.py)"
"""The engine rule the tier is simulated by, as the notes name it."""


@dataclass
class TierCapacity(SizedFigures):
    """The SLO capacity of a deployment with a host KV tier, and the run at it (priced as ``SimCapacity``'s).

    Attributes:
        run: the simulated run at the boundary rate, with the tier.
        rate_req_per_s: the highest rate found meeting the target with the tier, req/s.
        attainment / goodput_req_per_s: that run's share of requests within the SLO, and its good req/s.
        first_failing_req_per_s: the lowest rate found to miss (None: still met after the last doubling).
        probes: [rate req/s, attainment] of every probe with the tier, by rate.
        tier: the plan's tier (name, capacity bytes and tokens, read bandwidth, capacity rule).
        tier_gib_per_gpu / target / without_tier: the tier's size, the attainment target, the capacity without it.
        host_hit_tokens_at_boundary: prompt tokens loaded back from the tier in the run at the boundary, tokens.
        at_sized: where the capacity bound caps the rate found, the run with the tier at the bound, which the ledger
            prices (``sim_capacity.SizedRun``); None otherwise.
        error_band: the 80% band of the rate sized on (``tier_band``: TPOT's, carried through the tier's probes,
            where TPOT binds it below saturation; else the throughput's), None without one.
    """

    method: ClassVar[str] = "kvledger.analyses.search.tier_probe.tier_capacity (search --offload's tier probe)"
    __json__ = ("method", "target", "tier_gib_per_gpu", "rule", ("slo_capacity_req_per_s", "rate_req_per_s"),
                ("attainment_at_boundary", "attainment"), ("goodput_at_boundary_req_per_s", "goodput_req_per_s"),
                ("sized_on_req_per_s", "binding_bound"), ("capacity_bound_req_per_s", "without_tier.bound_req_per_s"),
                "attainment_at_sized_rate", "goodput_at_sized_rate_req_per_s", "first_failing_req_per_s",
                "lower_bound", "host_hit_tokens_at_boundary", "error_band", "tier", "probes",
                ("without_tier", "without_tier_dict"),
                ("notes", "all_notes"))
    # sized_on_req_per_s, attainment_at_sized_rate, goodput_at_sized_rate_req_per_s: always there, null where the bound
    # does not bind; capacity_bound_req_per_s, the bound, null where none is proven (as SimCapacity writes them)
    run: Any
    rate_req_per_s: float
    attainment: float
    goodput_req_per_s: float
    first_failing_req_per_s: float | None
    lower_bound: bool
    probes: list[list[float]]
    tier: dict[str, Any]
    tier_gib_per_gpu: float
    target: float
    without_tier: SimCapacity
    host_hit_tokens_at_boundary: int
    rule: str = TIER_RULE
    notes: list[str] = field(default_factory=list)
    at_sized: SizedRun | None = None
    rerun: Any = None  # rate → SizedRun: the tier prober's run at another rate (``TierProber.sized_run``)
    error_band: Any = None  # the capacity's 80% band (``tier_band.tier_capacity_band``), which cost prices at

    @property
    def sizing_req_per_s(self) -> float:
        """The offered req/s a replica is sized and priced on: the rate found, never above the capacity bound of the
        deployment (``work_bounds``, read without the tier: loading blocks back adds work, and a prompt that may share a
        cached prefix is already counted as one token)."""
        return capped(self.rate_req_per_s, self.without_tier.bound_req_per_s)

    @property
    def binding_bound(self) -> float | None:
        """The bound where it caps the rate found (then what is sized on), else None."""
        return None if self.sizing_req_per_s == self.rate_req_per_s else self.sizing_req_per_s

    @property
    def without_tier_dict(self) -> dict[str, Any]:
        w = self.without_tier
        return {"slo_capacity_req_per_s": w.rate_req_per_s, "goodput_at_boundary_req_per_s": w.goodput_req_per_s,
                "attainment_at_boundary": w.attainment, "capacity_search": w.to_dict()}

    def text(self) -> str:
        """One line: the search with the tier, against the capacity without it."""
        w = self.without_tier
        miss = (f"; {self.first_failing_req_per_s:g} req/s misses" if self.first_failing_req_per_s is not None
                else "; still met after the last doubling, so at least this")
        return (f"capacity: SLO-capacity search on the request rate with a {self.tier_gib_per_gpu:g} GiB per GPU host "
                f"KV tier in the simulator ({self.method}; {TIER_RULE}; {len(self.probes)} probes of "
                f"{self.run.setup.num_requests:,} requests, seed {self.run.args.seed}, from the capacity without the "
                f"tier, {w.rate_req_per_s:g} req/s): the highest rate with ≥ {self.target:.0%} of requests within "
                f"the SLO is {self.rate_req_per_s:g} req/s ({self.attainment:.1%} there{miss}); "
                + ("" if self.at_sized is None else f"sized on {self.sizing_req_per_s:,.4g} req/s, the deployment's "
                   f"capacity bound, below the {self.rate_req_per_s:g} req/s found (see the note), and ")
                + f"{self.priced_clause()} (without the tier: {w.goodput_req_per_s:,.3f})")

    def probes_text(self) -> str:
        """The probes with the tier, by rate: ``rate → attainment``."""
        return ", ".join(f"{r:g} → {a:.1%}" for r, a in self.probes)

    @property
    def all_notes(self) -> list[str]:
        return list(self.notes)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the boundary with the tier, the tier, every probe and the capacity without the tier."""
        return to_jsonable(self)


def tier_search_capacity(args: Any, synthetic: Any, slo: Any, host_gib_per_gpu: float,
                         without: SimCapacity) -> TierCapacity:
    """The SLO capacity of ``args`` with a host KV tier of ``host_gib_per_gpu`` GiB per GPU (module docstring),
    searched from ``without``'s boundary at ``without``'s target.

    Raises:
        InputError: a simulation that cannot run.
        NoAnswerError: no rate down to the start ÷ 64 meets the target with the tier (no capacity: exit 1).
    """
    if "sglang" in (args.policy, args.prefix_caching_policy):
        raise InputError("cost --simulate --kv-tier-host simulates vLLM's native CPU offloading (--kv-offloading-size, "
                         "the search's tier probe); with SGLang's policy, price the tier without simulating it "
                         "(--at-offered-load) or see simulate --enable-hierarchical-cache for HiCache's hits")
    target = without.search.target
    opt = OffloadOption("cpu", host_gib_per_gpu * args.tp)  # the prober's size is per replica, as vLLM's flag
    p = TierProber(args, synthetic, opt, slo, target)
    b, first_failing = tier_capacity(p, without.rate_req_per_s, without.bound_req_per_s)  # no doubling past the bound
    if b is None:
        raise NoAnswerError(f"with a {host_gib_per_gpu:g} GiB per GPU host KV tier no request rate down to "
                         f"{first_failing:g} req/s has {target:.0%} of requests within the SLO ({slo.describe()}), "
                         f"though {without.rate_req_per_s:g} req/s does without it: the tier's loads delay TTFT; "
                         "price without --kv-tier-host, or loosen the SLO")
    notes = [f"the tier's capacity: {p.tier.get('capacity_rule', '')}"] if p.tier.get("capacity_rule") else []
    if not any(p.host_hit_tokens.values()):
        # nothing loaded back: every probe equals the run without the tier at its rate, so the capacity is the one
        # found without it (a different probe sequence could only land elsewhere where attainment is not monotone)
        notes.append(f"the tier served no prompt token in any of the {len(p.runs)} probes (no block was loaded back "
                     "from it): each run equals the run without the tier at the same rate, so the capacity is the one "
                     f"without it, {without.rate_req_per_s:g} req/s, and the tier adds cost only")
        return _noted(p, TierCapacity(without.run, without.rate_req_per_s, without.attainment,
                                      without.goodput_req_per_s, without.search.boundary.first_failing_value, False,
                                      p.probes(), dict(p.tier), host_gib_per_gpu, target, without, 0, notes=notes))
    gp = p.goodputs[b]
    if p.lower_bound:
        notes.append("with the tier the target was still met at the last doubling: the capacity is at least this")
    notes.extend(p.notes())
    return _noted(p, TierCapacity(p.sims[b], float(b), gp.attainment, float(gp.goodput_req_per_s), first_failing,
                                  p.lower_bound, p.probes(), dict(p.tier), host_gib_per_gpu, target, without,
                                  p.host_hit_tokens[b], notes=notes))


def _noted(p: TierProber, cap: TierCapacity) -> TierCapacity:
    """``cap`` with the note of the capacity bound where it caps the rate found, and then the run with the tier at the
    bound (``p``'s own run, after its probes were listed), which the ledger prices."""
    from kvledger.analyses.serving.tier_band import tier_capacity_band

    cap.rerun = p.sized_run
    cap.error_band = tier_capacity_band(p, cap.rate_req_per_s, cap.sizing_req_per_s, p.slo,
                                        cap.without_tier.error_band)  # before the run at the bound joins the probes
    if cap.sizing_req_per_s != cap.rate_req_per_s:
        bound = cap.sizing_req_per_s
        cap.notes.append(bound_note(bound, cap.rate_req_per_s))
        cap.at_sized = cap.rerun(bound)
    return cap
