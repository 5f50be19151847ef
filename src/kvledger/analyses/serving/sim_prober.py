"""The probes of a simulator-driven boundary search (``sim_boundary.search_sim_boundary``): one seeded simulation per
value on the axis, remembered, with its goodput under the SLO and whether it sustained its load; the per-request records
only of the probes the search may still report or evaluate again (``SimProber.release``)."""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import asdict, dataclass, fields, replace
from typing import Any

from kvledger.analyses.serving.probe_length import probe_too_short
from kvledger.analyses.serving.queue_growth import probe_queue_grew
from kvledger.analyses.serving.session_ramp import Carried, not_carried, not_carried_note, sessions_limit
from kvledger.analyses.serving.sim_ledgers import SimulatedRun, SyntheticSpec, simulate_run
from kvledger.analyses.serving.sim_setup import SimRequestArgs
from kvledger.dynamics.early_stop import MissRule
from kvledger.ledgers.goodput import GoodputResult, goodput
from kvledger.ledgers.slo import SLO

__all__ = ["SimProber", "ProbeFacts", "sharing_probes"]

#: the probe runs shared within one ``sharing_probes`` call (key → run, oldest first); None outside one
_SHARED: ContextVar[dict[str, SimulatedRun] | None] = ContextVar("kvledger_shared_probes", default=None)
#: requests the shared runs may hold together (the oldest go first past it): 2,000-request probes, a configuration
#: search's default, fit 50 times; a run of more requests than this is not kept
SHARED_MAX_REQUESTS = 100_000


def sharing_probes(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with every ``SimProber`` inside one call of it sharing its probes' runs: a probe whose simulation (the
    same arguments, workload and early-stop rule) an earlier prober of the call ran is that run, not simulated again
    (the simulator is deterministic: the same records). A configuration search's candidate redoes its rate search from
    1 req/s (``origin_band``) on rates its own search probed; the disk store (``sim_cache``) gives the same where on."""

    @functools.wraps(fn)
    def shared(*args: Any, **kwargs: Any) -> Any:
        token = _SHARED.set({})
        try:
            return fn(*args, **kwargs)
        finally:
            _SHARED.reset(token)

    return shared


def _shared_key(args: SimRequestArgs, synthetic: SyntheticSpec | None, token_times: bool, stop: MissRule | None) -> str:
    """Everything a probe's simulation depends on within a process (``sim_cache.cache_key``'s parts but files)."""
    rule = None if stop is None else [(f.name, getattr(stop, f.name)) for f in fields(stop) if f.init]
    return repr((sorted(asdict(args).items()), synthetic, token_times, rule))


def _keep_shared(shared: dict[str, SimulatedRun], key: str, sim: SimulatedRun) -> None:
    """Keep ``sim`` under ``key``, the oldest runs dropped past ``SHARED_MAX_REQUESTS`` requests in all."""
    shared[key] = sim
    while sum(len(s.run.records) for s in shared.values()) > SHARED_MAX_REQUESTS:
        del shared[next(iter(shared))]


def _with_value(args: SimRequestArgs, axis: str, value: float) -> SimRequestArgs:
    if axis == "request_rate":
        return replace(args, rate=value)
    if axis == "concurrency":
        return replace(args, concurrency=int(value))
    return replace(args, max_num_seqs=int(value))


def _client_latency_s(args: SimRequestArgs) -> float:
    """The run's --client-latency in seconds (0 without one)."""
    if not args.client_latency:
        return 0.0
    from kvledger.analyses.serving.client_latency import client_latency_of
    from kvledger.catalog.gpu_file import resolve_gpu

    got = client_latency_of(args.client_latency, args.gpu_profile, resolve_gpu(args.gpu).name)
    return got.seconds if got is not None else 0.0


@dataclass(frozen=True, slots=True)
class ProbeFacts:
    """What the search reports of every probe, kept after its records are released: the value as asked for (a probe
    run again gets the same arguments), the deployment, the offered rate (req/s) and the early-stop evidence."""

    value: float
    replicas: int
    num_gpus: int
    offered_rate_req_per_s: float | None
    stopped_early: dict[str, Any] | None


class SimProber:
    """Runs (and remembers) one simulation per value; the goodput of each under the SLO.

    ``runs`` holds every probe's facts in the order run; ``held`` the full runs (records, setup) of the first probe,
    the lowest probe that missed and the highest below it that met (``release``): what the report quotes (the first
    run, the boundary run) and what ``search_boundary`` evaluates again (the bracket's ends). A 100,000-request probe
    stopped early keeps its records as a list of objects (about 30 MiB); holding every probe grew the search's memory
    by that much per probe.
    """

    def __init__(self, args: SimRequestArgs, synthetic: SyntheticSpec | None, axis: str, slo: SLO, target: float,
                 early_stop: bool = True, tier: Any = None) -> None:
        self.args, self.synthetic, self.axis, self.slo, self.target = args, synthetic, axis, slo, target
        # with KV tiers (a TierSettings): each probe is goodput --simulate's run with them (tier_runs), run whole
        self.tier, self.early_stop = tier, early_stop and tier is None
        self.tier_reports: dict[float, Any] = {}  # value → the probe's sim_tier_report.SimTierReport (with a tier)
        self.runs: dict[float, ProbeFacts] = {}
        self.held: dict[float, SimulatedRun] = {}
        self.results: dict[float, GoodputResult] = {}
        self.grew: dict[float, bool | None] = {}  # value → the probe's queue kept growing (_queue_grew)
        self.short: dict[float, tuple[int, int] | None] = {}  # value → too short to show its load (probe_length)
        self.uncarried: dict[float, Carried | None] = {}  # value → a session probe that never carried its rate
        self.phase: dict[float, str] = {}
        self.current_phase = "bracket"
        self.client_latency_s = _client_latency_s(args)  # the same for every probe: read once

    def run_at(self, value: float):
        key = float(value)
        if key in self.runs:
            return self.simulated(key).run
        sim = self._simulate(value)
        meta = sim.run.metadata
        self.runs[key] = ProbeFacts(value, sim.replicas, sim.num_gpus, meta.request_rate,
                                    meta.extra.get("stopped_early"))
        self.results[key] = goodput(sim.run, self.slo)
        self.grew[key] = _queue_grew(sim)
        self.short[key] = probe_too_short(sim.run, _mode(sim), self.client_latency_s)
        self.uncarried[key] = not_carried(sim.run)  # None but for a session workload's probe (session_ramp)
        self.phase[key] = self.current_phase
        self.held[key] = sim
        self.release()
        return sim.run

    def simulated(self, value: float) -> SimulatedRun:
        """The full run of a probe already run: held, or simulated again where released (the same seeded simulation
        with the same arguments gives the same records)."""
        key = float(value)
        if key not in self.held:
            self.held[key] = self._simulate(self.runs[key].value)
        return self.held[key]

    def release(self) -> None:
        """Drop the full runs no longer needed: keep the first probe's (the report's setup and provenance), the lowest
        miss's (the bracket's upper end, which ``search_boundary`` evaluates again) and the highest meet's below it
        (the boundary if the search ended now, and the bracket's lower end). Any other may be simulated again
        (``simulated``) but, probes being bisection midpoints between the two ends, is not."""
        bad = min((v for v in self.runs if not self._met(v)), default=None)
        good = max((v for v in self.runs if (bad is None or v < bad) and self._met(v)), default=None)
        keep = {next(iter(self.runs), None), bad, good}
        for v in [v for v in self.held if v not in keep]:
            del self.held[v]

    def _simulate(self, value: float) -> SimulatedRun:
        # token times only when the SLO judges per-request gaps (ITL): probes then hold no per-token data
        stop = self._miss_rule() if self.early_stop else None
        args, token_times = _with_value(self.args, self.axis, value), self.slo.itl_s is not None
        if self.tier is not None:  # simulate's tier run, from the disk store where on (tier_runs)
            from kvledger.analyses.serving.tier_runs import simulate_with_tier

            # the probe's attainment is the run with the tier's: its twin without the tier is not run (the
            # comparison is shown at one rate, as goodput --simulate with tier flags runs it)
            sim, self.tier_reports[float(value)] = simulate_with_tier(args, self.tier, self.synthetic,
                                                                      record_token_times=token_times, compare=False)
            return sim
        if (shared := _SHARED.get()) is None:
            return simulate_run(args, self.synthetic, record_token_times=token_times, stop=stop)
        key = _shared_key(args, self.synthetic, token_times, stop)
        if key in shared:
            return shared[key]
        sim = simulate_run(args, self.synthetic, record_token_times=token_times, stop=stop)
        _keep_shared(shared, key, sim)
        return sim

    def queue_grew(self, value: float, run: Any = None) -> bool | None:
        """Whether the probe at ``value`` (already run) did not sustain its load (``_queue_grew``)."""
        return self.grew[float(value)]

    def too_short(self, value: float) -> bool:
        """Whether the probe at ``value`` (already run) was too short to show its load (``probe_length``), or, of a
        session workload, too few sessions to carry its rate (``session_ramp.not_carried``)."""
        return self.short[float(value)] is not None or self.uncarried[float(value)] is not None

    def sessions_limit(self) -> dict[str, Any] | None:
        """``session_ramp.sessions_limit`` of the probes that met the target at a rate their sessions never carried
        (None when none)."""
        met = {v: g.attainment >= self.target for v, g in self.results.items()}
        return sessions_limit(self.uncarried, met, getattr(self.synthetic, "num_sessions", None))

    def carried_note(self) -> list[str]:
        """``session_ramp.not_carried_note`` of ``sessions_limit`` ([] when none)."""
        return not_carried_note(self.sessions_limit())

    def _miss_rule(self) -> MissRule:
        """The early-stop rule on the engine's records: a --client-latency d is added after the run, so a request
        meets a TTFT or E2E limit L there when its engine-side value is at most L − d."""
        d = self.client_latency_s

        def less(limit: float | None) -> float | None:
            return None if limit is None else max(limit - d, 0.0)

        return MissRule(self.target, less(self.slo.ttft_s), less(self.slo.e2e_s), self.slo.tpot_s)

    def meets(self, value: float) -> bool:
        """The probe at ``value`` met the attainment target and kept up with its load (``search_sim_boundary``)."""
        if float(value) not in self.runs:
            self.run_at(value)
        return self._met(float(value))

    def _met(self, key: float) -> bool:
        return self.results[key].attainment >= self.target and not self.grew[key] and not self.too_short(key)


def _queue_grew(sim: SimulatedRun) -> bool | None:
    """The probe did not sustain its load (``queue_growth.probe_queue_grew`` on its workload's mode); on DP ranks in
    lock-step, also where one rank's own queue grew past its bursts (``dp_saturation.rank_probe_grew``)."""
    grew = probe_queue_grew(sim.run, _mode(sim))
    ranks = getattr(sim.result, "dp_ranks", None)
    if grew is False and ranks is not None:
        from kvledger.analyses.serving.dp_saturation import rank_probe_grew

        return rank_probe_grew(sim.run, ranks, getattr(sim.setup.cost, "dp", 1))
    return grew


def _mode(sim: SimulatedRun) -> str:
    """The probe's workload mode ("open loop …", a closed loop's, sessions')."""
    return str(sim.setup.workload_info.get("mode", ""))
