"""A search candidate served with a KV tier below HBM: the tier the plan gives it, its runs at request rates with the
tier in the simulator, and its SLO capacity with the tier.

``cpu:SIZE`` is vLLM's native ``OffloadingConnector`` with ``--kv-offloading-size`` SIZE (per replica, summed over the
TP ranks, as vLLM's flag is; the plan's ``host_dram`` tier: capacity by the engine's rule, read bandwidth over the host
link, ``accounting/kv_tiers.py``); ``disk:SIZE`` a local NVMe tier of SIZE per replica, SIZE ÷ TP per GPU (the plan's
``nvme`` tier, 7 GB/s read assumed) simulated by the same
write-through LRU host-tier model with the disk's capacity and bandwidth — an approximation: vLLM's native connector
has no disk tier (LMCache's ``local_disk`` has).

Capacity: the same seeded workload as the candidate's search, at request rates from a start (the candidate's own
boundary, or its lowest probe when it met the SLO at no rate), doubled while the target is met (halved while it is
missed), then ``ledgers.boundary.search_boundary`` to 1 % of the bracket's low end; each probe one simulation with the
tier (``dynamics.offload_sim.offload_kv_factory``). A rate whose queue kept growing misses the target whatever its
attainment, as in every capacity search (``analyses.serving.queue_growth.probe_queue_grew``). The doubling stops at
the deployment's capacity bound (``analyses.serving.work_bounds``, read without the tier: loading blocks back adds
work, and prompts that may share a prefix are already counted as one computed token there): a tier cannot make a
replica compute faster than the roofline work of its requests allows, so the variant is sized and priced on the bound
where the rate found is above it, as its base candidate is.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kvledger.analyses.serving.probe_length import probe_too_short, short_notes
from kvledger.analyses.serving.queue_growth import QUEUE_CHECK, probe_queue_grew
from kvledger.analyses.serving.session_ramp import not_carried, not_carried_note, sessions_limit
from kvledger.errors import InputError

__all__ = ["TIER_OF", "TierProber", "tier_capacity"]

TIER_OF = {"cpu": ("host", "host_dram"), "disk": ("nvme", "nvme")}
"""``--offload`` kind → (the cost ledger's tier kind, the plan's tier name)."""
_MAX_DOUBLINGS = 6


def _host_tier(setup: Any, ranks: int, opt: Any) -> tuple[Any, dict[str, Any]]:
    from kvledger.accounting.kv_tier_rules import OFFLOAD_PROMPT_ONLY_FROM, TierSettings, rules_version
    from kvledger.accounting.kv_tiers import build_tier_plan
    from kvledger.analyses.serving.plan_pricing import priced_by_run
    from kvledger.dynamics.engine.offload import HostTier

    settings = (TierSettings(kv_offloading_size_gib=opt.size_gib, kv_offloading_backend="native")
                if opt.kind == "cpu" else TierSettings(nvme_gib=opt.gib_per_gpu(ranks)))
    plan = build_tier_plan(setup.plan, settings, step_cost=setup.cost, priced_by=priced_by_run(setup.cost_info))
    t = plan.tier(TIER_OF[opt.kind][1])
    if t is None:
        raise InputError(f"the plan has no {opt.kind} tier for --offload {opt.label}")
    host = HostTier(t.capacity_tokens // setup.config.block_size, plan.bytes_per_token, t.read_bytes_per_s,
                    t.write_bytes_per_s, prompt_only=rules_version(setup.plan.memory.engine_version) >=
                    OFFLOAD_PROMPT_ONLY_FROM)  # the native connector's rule (offload.py HostTier)
    return host, {"tier": t.name, "capacity_bytes": t.capacity_bytes, "capacity_tokens": t.capacity_tokens,
                  "num_ranks": t.num_ranks, "total_capacity_bytes": t.total_capacity_bytes,
                  "read_bytes_per_s": t.read_bytes_per_s, "capacity_rule": t.capacity_rule,
                  "bandwidth_source": t.bandwidth_source}


class TierProber:
    """Runs (and remembers) a workload with the tier at a request rate, and each run's goodput: ``args`` /
    ``synthetic`` the simulation (``analyses.serving.sim_ledgers``) at any rate, ``opt`` the tier (GiB per replica),
    ``slo`` and ``target`` the attainment the capacity must meet. ``search --offload``'s variants
    (``for_candidate``), bisected from the candidate's capacity (``tier_entries.WARM_START`` says how that differs
    from ``cost --simulate --kv-tier-host``, ``report`` and ``goodput --simulate --target``)."""

    def __init__(self, args: Any, synthetic: Any, opt: Any, slo: Any, target: float) -> None:
        self.args, self.synthetic, self.opt, self.slo, self.target = args, synthetic, opt, slo, target
        self.sims: dict[float, Any] = {}  # the SimulatedRun of each rate
        self.runs: dict[float, Any] = {}
        self.host_hit_tokens: dict[float, int] = {}  # prompt tokens loaded back from the tier in each rate's run
        self.goodputs: dict[float, Any] = {}
        self.grew: dict[float, bool | None] = {}  # the rate's probe did not sustain its load (queue_growth)
        self.short: dict[float, Any] = {}  # the rate's probe was too short to show its load (probe_length)
        self.uncarried: dict[float, Any] = {}  # a session probe whose sessions never carried its rate (session_ramp)
        self.tier: dict[str, Any] = {}
        self.lower_bound = False

    @classmethod
    def for_candidate(cls, spec: Any, cand: Any, opt: Any, slo: Any) -> TierProber:
        """The prober of a search candidate: the spec's seeded workload with the candidate's settings."""
        from kvledger.analyses.search.screen import sim_args

        return cls(sim_args(spec, cand), spec.synthetic, opt, slo, spec.target)

    def run_at(self, rate: float) -> Any:
        from kvledger.analyses.serving.sim_ledgers import prepare_run, run_prepared
        from kvledger.dynamics.offload_sim import offload_kv_factory
        from kvledger.ledgers.goodput import goodput

        if rate not in self.runs:
            args = replace(self.args, rate=rate)
            setup = prepare_run(args, self.synthetic)
            host, self.tier = _host_tier(setup, args.tp, self.opt)  # GiB per replica, over the TP ranks (no PP here)
            managers: list[Any] = []
            self.sims[rate] = run_prepared(setup, args, self.synthetic, record_token_times=False,
                                           kv_manager_factory=offload_kv_factory(host, managers))
            self.host_hit_tokens[rate] = sum(m.host_hit_tokens for m in managers)
            self.runs[rate] = self.sims[rate].run
            self.goodputs[rate] = goodput(self.runs[rate], self.slo)
            mode = str(self.sims[rate].setup.workload_info.get("mode", ""))
            self.grew[rate] = probe_queue_grew(self.runs[rate], mode)
            d = self.sims[rate].setup.client_latency  # the engine's arrivals are d later (probe_too_short)
            self.short[rate] = probe_too_short(self.runs[rate], mode, d.seconds if d else 0.0)
            self.uncarried[rate] = not_carried(self.runs[rate])  # a session probe that never carried its rate
        return self.runs[rate]

    def sized_run(self, rate: float) -> Any:
        """The run with the tier at ``rate`` (deterministic and seeded, remembered) as a ``sim_capacity.SizedRun``: the
        ``rerun`` of a search tier variant's run at the volume's load."""
        from kvledger.analyses.serving.sim_capacity import SizedRun

        self.run_at(rate)
        return SizedRun(self.sims[rate], rate, self.goodputs[rate])

    def meets(self, rate: float) -> bool:
        """The run at ``rate`` met the attainment target and sustained its load (as ``sim_boundary``'s probes)."""
        self.run_at(rate)
        return self.goodputs[rate].attainment >= self.target and not self.grew[rate] and not self.too_short(rate)

    def queue_grew(self, rate: float, run: Any = None) -> bool | None:
        """Whether the run at ``rate`` (already run) did not sustain its load."""
        return self.grew[rate]

    def too_short(self, rate: float) -> bool:
        """Whether the run at ``rate`` (already run) was too short to show its load, or its sessions too few to carry
        it (``session_ramp.not_carried``)."""
        return self.short[rate] is not None or self.uncarried[rate] is not None

    def sessions_limit(self) -> dict[str, Any] | None:
        """``session_ramp.sessions_limit`` of the runs that met the target at a rate their sessions never carried."""
        met = {r: g.attainment >= self.target for r, g in self.goodputs.items()}
        return sessions_limit(self.uncarried, met, getattr(self.synthetic, "num_sessions", None))

    def notes(self) -> list[str]:
        """The rates that met the attainment target with their queue growing, counted as misses ([] if none)."""
        from kvledger.ledgers.boundary import BoundaryPoint, unsustained_note

        pts = [BoundaryPoint(r, g.attainment, self.meets(r), g.estimate, g.goodput_req_per_s, "", self.grew[r])
               for r, g in sorted(self.goodputs.items())]
        return (unsustained_note(pts, "request_rate", self.target, QUEUE_CHECK)
                + short_notes(self.goodputs, self.short, self.target, "request_rate")
                + not_carried_note(self.sessions_limit()))

    def probes(self) -> list[list[float]]:
        """[rate, attainment] of every run, by rate."""
        return [[r, self.goodputs[r].attainment] for r in sorted(self.runs)]


def tier_capacity(p: TierProber, start: float, bound: float | None = None) -> tuple[float | None, float | None]:
    """(the highest rate meeting the target with the tier, the lowest rate found to miss it) from ``start`` req/s;
    (None, the lowest rate simulated: start ÷ 64) when no rate down to it meets the target. The doubling stops at a
    rate met at or above ``bound`` (the deployment's capacity bound, ``serving.work_bounds``; None: none proven), which
    is then the rate found, with no rate found to miss: no replica keeps pace with more than the bound, so the caller
    sizes on the bound (``work_bounds.capped``) and a probe further up would only run a load it cannot sustain. A
    boundary still met after 6 doublings below the bound is a lower bound (``p.lower_bound``)."""
    from kvledger.ledgers.boundary import search_boundary

    if p.meets(start):
        lo, hi = start, 2.0 * start
        for n in range(_MAX_DOUBLINGS + 1):
            if bound is not None and lo >= bound:
                return lo, None  # met at or above the bound: sized on the bound, whatever a further doubling meets
            if n == _MAX_DOUBLINGS:
                p.lower_bound = True  # still met after the last doubling: the capacity is at least this
                return lo, None
            if not p.meets(hi):
                break
            lo, hi = hi, 2.0 * hi
    else:  # the tier misses at the start (its loads delay TTFT, or the candidate misses everywhere): halve
        lo, hi = 0.5 * start, start
        for _ in range(_MAX_DOUBLINGS):
            if p.meets(lo):
                break
            lo, hi = 0.5 * lo, lo
        else:  # every rate simulated missed; ``lo`` is the next halving, never run
            return None, hi
    res = search_boundary(p.run_at, p.slo, p.target, lo, hi, tol=0.01 * lo, max_evals=12, queue_grew=p.queue_grew,
                          too_short=p.too_short)
    return res.boundary_value, res.first_failing_value
