"""The probes of a simulator-driven boundary search (``sim_boundary.search_sim_boundary``): one seeded simulation per
value on the axis, remembered, with its goodput under the SLO and whether it sustained its load."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kvledger.analyses.serving.queue_growth import probe_queue_grew
from kvledger.analyses.serving.sim_ledgers import SimulatedRun, SyntheticSpec, simulate_run
from kvledger.analyses.serving.sim_setup import SimRequestArgs
from kvledger.dynamics.early_stop import MissRule
from kvledger.ledgers.goodput import GoodputResult, goodput
from kvledger.ledgers.slo import SLO

__all__ = ["SimProber"]


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


class SimProber:
    """Runs (and remembers) one simulation per value; the goodput of each under the SLO."""

    def __init__(self, args: SimRequestArgs, synthetic: SyntheticSpec | None, axis: str, slo: SLO, target: float,
                 early_stop: bool = True) -> None:
        self.args, self.synthetic, self.axis, self.slo, self.target = args, synthetic, axis, slo, target
        self.early_stop = early_stop
        self.runs: dict[float, SimulatedRun] = {}
        self.results: dict[float, GoodputResult] = {}
        self.grew: dict[float, bool | None] = {}  # value → the probe's queue kept growing (_queue_grew)
        self.phase: dict[float, str] = {}
        self.current_phase = "bracket"
        self.client_latency_s = _client_latency_s(args)  # the same for every probe: read once

    def run_at(self, value: float):
        key = float(value)
        if key not in self.runs:
            # token times only when the SLO judges per-request gaps (ITL): probes then hold no per-token data
            stop = self._miss_rule() if self.early_stop else None
            self.runs[key] = simulate_run(_with_value(self.args, self.axis, value), self.synthetic,
                                          record_token_times=self.slo.itl_s is not None, stop=stop)
            self.results[key] = goodput(self.runs[key].run, self.slo)
            self.grew[key] = _queue_grew(self.runs[key])
            self.phase[key] = self.current_phase
        return self.runs[key].run

    def queue_grew(self, value: float, run: Any = None) -> bool | None:
        """Whether the probe at ``value`` (already run) did not sustain its load (``_queue_grew``)."""
        return self.grew[float(value)]

    def _miss_rule(self) -> MissRule:
        """The early-stop rule on the engine's records: a --client-latency d is added after the run, so a request
        meets a TTFT or E2E limit L there when its engine-side value is at most L − d."""
        d = self.client_latency_s

        def less(limit: float | None) -> float | None:
            return None if limit is None else max(limit - d, 0.0)

        return MissRule(self.target, less(self.slo.ttft_s), less(self.slo.e2e_s), self.slo.tpot_s)

    def meets(self, value: float) -> bool:
        """The probe at ``value`` met the attainment target and kept up with its load (``search_sim_boundary``)."""
        self.run_at(value)
        return self.results[float(value)].attainment >= self.target and not self.grew[float(value)]


def _queue_grew(sim: SimulatedRun) -> bool | None:
    """The probe did not sustain its load (``queue_growth.probe_queue_grew`` on its workload's mode)."""
    return probe_queue_grew(sim.run, str(sim.setup.workload_info.get("mode", "")))
