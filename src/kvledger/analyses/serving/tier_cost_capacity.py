"""The SLO capacity ``cost --simulate --kv-tier-host SIZE`` prices: the same deployment served with a host KV tier of
SIZE GiB per GPU in the simulator (vLLM's native ``OffloadingConnector``, ``--kv-offloading-size`` = SIZE × TP, vLLM's
size being over all TP ranks), found on the one path ``report`` and ``goodput --simulate --target`` take with tier
flags (``report_tier_capacity.capacity_with_tier``: the request-rate search of the capacity without the tier, from
1 req/s on the same seeded workload, SLO and target, every probe ``goodput --simulate``'s run with the tier flags,
``tier_runs.simulate_with_tier``; the tier built by ``sim_tiers.host_tier_for`` as ``simulate`` builds it), so the
three commands give one capacity, one band and one TTFT for the same inputs (its ``kv_tier_capacity`` block is theirs).

Before, cost ran ``search --offload``'s tier probe (``analyses/search/tier_probe.py``): the same runs, but bisected
from the capacity without the tier to 1 % of the bracket's low end, a different probe sequence (57.6875 req/s where
report finds 57.5 on its 8 GiB document-pool case). A disk tier (``--kv-tier-nvme``) is priced, not simulated: vLLM's
native connector has none. The capacity is sized on the deployment's capacity bound (``work_bounds``) where that caps
the rate found.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any, ClassVar

from kvledger.analyses.serving.report_tier_capacity import METHOD, WithoutTier, capacity_with_tier
from kvledger.analyses.serving.sim_capacity import SimCapacity, SizedFigures, SizedRun
from kvledger.analyses.serving.work_bounds import bound_note, capped
from kvledger.errors import InputError, NoAnswerError
from kvledger.jsonable import to_jsonable

__all__ = ["TierCapacity", "tier_search_capacity", "TIER_RULE"]

TIER_RULE = "vLLM's native OffloadingConnector rule (write-through LRU host tier, dynamics/offload_sim.py)"
"""The engine rule the tier is simulated by, as the notes name it."""
HICACHE_RULE = ("SGLang HiCache rule (write-through backup of radix-tree segments, loaded back at admission, "
                "dynamics/offload_sim.py)")
"""The rule under ``--policy sglang``: SGLang's host tier is HiCache's (``sim_tiers._RULES``)."""


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

    method: ClassVar[str] = METHOD
    __json__ = ("method", "target", "tier_gib_per_gpu", "rule", ("slo_capacity_req_per_s", "rate_req_per_s"),
                ("attainment_at_boundary", "attainment"), ("goodput_at_boundary_req_per_s", "goodput_req_per_s"),
                ("sized_on_req_per_s", "binding_bound"), ("capacity_bound_req_per_s", "without_tier.bound_req_per_s"),
                "attainment_at_sized_rate", "goodput_at_sized_rate_req_per_s", "first_failing_req_per_s",
                "lower_bound", "host_hit_tokens_at_boundary", "error_band", "tier", "probes",
                ("without_tier", "without_tier_dict"), ("kv_tier_capacity", "block"),
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
    engine_flags: str = ""  # the engine's flags for the tier simulated (vLLM's size over TP; SGLang's --hicache-size)
    notes: list[str] = field(default_factory=list)
    at_sized: SizedRun | None = None
    rerun: Any = None  # rate → SizedRun: the run with the tier at another rate (``_rerun``)
    error_band: Any = None  # the capacity's 80% band (``capacity_bands.capacity_band`` of the search), cost's
    block: Any = None  # report_tier_capacity.capacity_block: report's kv_tiers.capacity, goodput's kv_tier_capacity

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
                f"KV tier in the simulator ({self.method}; {self.rule}; {len(self.probes)} probes of "
                f"{self.run.setup.num_requests:,} requests, seed {self.run.args.seed}, from 1 req/s as the capacity "
                f"without the tier, {w.rate_req_per_s:g} req/s, was searched): the highest rate with ≥ "
                f"{self.target:.0%} of requests within the SLO is {self.rate_req_per_s:g} req/s "
                f"({self.attainment:.1%} there{miss}); "
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
    """The SLO capacity of ``args`` with a host KV tier of ``host_gib_per_gpu`` GiB per GPU (module docstring) at
    ``without``'s target, beside ``without``.

    Raises:
        InputError: a simulation that cannot run.
        NoAnswerError: no rate down to the search's halving limit meets the target with the tier (no capacity: exit 1).
    """
    target = without.search.target
    args, tier, flags, rule = engine_tier(args, host_gib_per_gpu)
    found, block = capacity_with_tier(args, slo, tier, WithoutTier.of_capacity(without), synthetic=synthetic)
    sb = found.search
    b = sb.boundary.boundary_value
    if b is None or sb.boundary_run is None:
        low = min(p.value for p in sb.probes)
        raise NoAnswerError(f"with a {host_gib_per_gpu:g} GiB per GPU host KV tier no request rate down to {low:g} "
                            f"req/s has {target:.0%} of requests within the SLO ({slo.describe()}), though "
                            f"{without.rate_req_per_s:g} req/s does without it: the tier's loads delay TTFT; price "
                            "without --kv-tier-host, or loosen the SLO")
    rep = sb.tier_report
    host = None if rep is None else rep.tier("host_dram")
    plan_t = None if rep is None else rep.plan.tier("host_dram")
    tier_d = {} if plan_t is None else {
        "tier": plan_t.name, "capacity_bytes": plan_t.capacity_bytes, "capacity_tokens": plan_t.capacity_tokens,
        "num_ranks": plan_t.num_ranks, "total_capacity_bytes": plan_t.total_capacity_bytes,
        "read_bytes_per_s": plan_t.read_bytes_per_s, "capacity_rule": plan_t.capacity_rule,
        "bandwidth_source": plan_t.bandwidth_source}
    notes = [f"the tier's capacity: {tier_d['capacity_rule']}"] if tier_d.get("capacity_rule") else []
    hits = 0 if host is None else int(host.hit_tokens)
    if not hits:
        notes.append(f"the tier served no prompt token at the capacity found, {b:g} req/s (no block was loaded back "
                     "from it there): the run there equals the run without the tier at that rate, and the tier adds "
                     "cost only")
    first_failing = sb.boundary.first_failing_value
    at = next(p for p in sb.probes if p.value == b)
    cap = TierCapacity(sb.boundary_run, float(b), at.attainment, float(sb.goodput_at_boundary_req_per_s),
                       first_failing, first_failing is None and capped(b, without.bound_req_per_s) == b,
                       sorted([p.value, p.attainment] for p in sb.probes), tier_d, host_gib_per_gpu, target, without,
                       hits, rule, notes=notes + [n for n in sb.notes if n not in without.search.notes], block=block,
                       engine_flags=flags)
    if cap.lower_bound:
        cap.notes.append("with the tier the target was still met at the last doubling: the capacity is at least this")
    return _sized(cap, sb, (args, tier, synthetic), slo)


def engine_tier(args: Any, gib_per_gpu: float) -> tuple[Any, Any, str, str]:
    """(the args of the runs with the tier, its ``TierSettings``, the engine's flags for it, the rule's words) for a
    host tier of ``gib_per_gpu`` GiB per GPU: vLLM's native connector with ``--kv-offloading-size`` = GiB × TP (the
    flag is over the TP ranks); under ``--policy sglang`` HiCache with ``--hicache-size`` in whole GB (10^9 B) per GPU,
    the GiB floored to them (SGLang's flag is an int, server_args.py ``hicache_size``), HiCache's prefill-graph rule on
    (``cli.tier_opts.with_hicache``'s).

    Raises:
        InputError: a tier under 1 GB under SGLang.
    """
    from kvledger.accounting.kv_tier_rules import TierSettings

    sglang = args.policy == "sglang"  # a prefix cache of the other engine: sim_tiers.host_tier_for refuses it
    if not sglang:
        tier = TierSettings(kv_offloading_size_gib=gib_per_gpu * args.tp, kv_offloading_backend="native")
        return args, tier, f"vLLM --kv-offloading-size {gib_per_gpu * args.tp:,.4g} GiB over TP {args.tp}", TIER_RULE
    gb = int(gib_per_gpu * 2**30 // 10**9)
    if gb < 1:
        raise InputError(f"--kv-tier-host {gib_per_gpu:g} GiB under --policy sglang: SGLang's --hicache-size takes "
                         "whole GB (10^9 B) per GPU, and this is under 1 GB; give at least 1 GB (0.932 GiB)")
    tier = TierSettings(enable_hierarchical_cache=True, hicache_size_gb=gb, engine_flag="--policy")
    flags = f"SGLang --enable-hierarchical-cache --hicache-size {gb}: whole GB per GPU"
    given_gb = gib_per_gpu * 2**30 / 1e9
    flags += "" if gb == given_gb else f", {gib_per_gpu:g} GiB being {given_gb:,.4g} GB"
    return replace(args, enable_hierarchical_cache=True), tier, flags, HICACHE_RULE


def _sized(cap: TierCapacity, sb: Any, run: tuple[Any, Any, Any], slo: Any) -> TierCapacity:
    """``cap`` with its rerun (the run with the tier at any rate, as a ``SizedRun``), the band of the rate sized on
    (``capacity_band`` of the search ``sb``, the block's, as report and goodput give it; ``run``: the args, tier and
    synthetic workload), and, where the capacity bound caps the rate found, its note and the
    run with the tier at the bound, which the ledger prices."""
    from kvledger.analyses.serving.capacity_bands import capacity_band
    from kvledger.analyses.serving.tier_runs import simulate_with_tier
    from kvledger.ledgers.goodput import goodput

    args, tier, synthetic = run

    def rerun(rate: float) -> SizedRun:
        sim, _rep = simulate_with_tier(replace(args, rate=rate), tier, synthetic, record_token_times=False,
                                       compare=False)
        return SizedRun(sim, rate, goodput(sim.run, slo))

    cap.rerun = rerun
    cap.error_band = capacity_band(sb.boundary_run.setup, cap.sizing_req_per_s, sb, slo)
    if cap.sizing_req_per_s != cap.rate_req_per_s:
        bound = cap.sizing_req_per_s
        cap.notes.append(bound_note(bound, cap.rate_req_per_s))
        cap.at_sized = cap.rerun(bound)
    return cap
