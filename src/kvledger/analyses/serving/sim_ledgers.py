"""One simulation as input to the goodput and cost ledgers: RunRecords from (model, GPU, engine settings, workload) plus
their provenance.

The ledgers take ``RunRecords`` and never import the simulator; this module is the glue. It builds the run exactly as
``kvledger simulate`` does (``kvledger.analyses.serving.sim_setup.prepare``: the vLLM memory plan sizes the KV pool,
``--step-cost`` prices each step, the trace or a synthetic workload supplies the requests), runs
``kvledger.dynamics.simulator.simulate``, and completes the run metadata the ledgers need and a benchmark file would
state: GPU count (replicas × TP), offered request rate, ``max_num_seqs``, the catalog GPU id for the price table."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kvledger.analyses.serving.client_latency import with_client_latency
from kvledger.analyses.serving.sched_defaults import NO_EFFECT
from kvledger.analyses.serving.sim_document import load_text, simulator_description, workload_text
from kvledger.analyses.serving.sim_report import simulate_document
from kvledger.analyses.serving.sim_setup import SimRequestArgs, SimSetup, prepare
from kvledger.analyses.serving.unit_layout import unit_layout
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.simulator import SimResult, simulate
from kvledger.errors import InputError
from kvledger.ranges import check_options
from kvledger.records import RunRecords
from kvledger.strict_json import finite_rate

if TYPE_CHECKING:
    from kvledger.analyses.serving.sim_provenance import PlanFigures, SimProvenance

__all__ = ["SyntheticSpec", "SimulatedRun", "simulate_run", "prepare_run", "run_prepared", "finish_run",
           "simulate_document", "workload_text", "simulator_description", "own_copies"]

@dataclass(frozen=True, slots=True)
class SyntheticSpec:
    """A synthetic workload: Gamma arrivals at the run's rate (CV ``cv``; 1 = Poisson, 0 = fixed interval) and
    sampled lengths.

    Attributes:
        prompt, output: length distributions as text for ``kvledger.dynamics.workload.synthetic.parse_lengths``
            (``fixed:512``, ``uniform:1:512``, ``exp:128:1536``, ``lognormal:1000:0.8``, ``trace:azure-conv:prompt``).
        cv: coefficient of variation of the inter-arrival gaps (vLLM's burstiness k = 1/cv²; 0: every gap 1/rate).
    """

    prompt: str
    output: str
    cv: float = 1.0

    @property
    def rate_note(self) -> str | None:
        """What a rate axis means for these arrivals when it is not the Poisson/Gamma rate (None: it is)."""
        if self.cv != 0:
            return None
        return ("synthetic arrivals at a fixed interval (--arrival-cv 0): the axis value is the rate, one request "
                "every 1/rate s; the offered rate of each probe (its requests ÷ their arrival span) is listed next to "
                "it")

    def requests(self, num_requests: int, rate_per_s: float, seed: int) -> list[RequestSpec]:
        """The requests, drawn from ``seed`` (same arguments, same requests).

        Raises:
            InputError: unreadable length specs, num_requests < 1, rate not > 0, cv not ≥ 0.
        """
        from kvledger.dynamics.workload.synthetic import parse_lengths, synthetic_workload  # not for a trace run

        check_options("simulate", {"num_requests": num_requests})  # [1, 10,000,000] requests: kvledger.ranges
        dists = []
        for flag, text in (("--prompt-lengths", self.prompt), ("--output-lengths", self.output)):
            try:
                dists.append(parse_lengths(text))
            except InputError as err:  # say which of the two flags (the parser knows only the text)
                raise InputError(f"{flag}: {err}") from None  # err names the text
        return synthetic_workload(num_requests, rate_per_s=rate_per_s, prompt=dists[0], output=dists[1], seed=seed,
                                  cv=self.cv, id_prefix="synthetic")

    def arrivals_text(self, rate_per_s: float, seed: int) -> str:
        """``synthetic Poisson arrivals at 2 req/s drawn with seed 0`` (the rule of ``synthetic.arrival_times``)."""
        if math.isinf(rate_per_s):
            return "every request at t = 0"
        if self.cv == 0:
            return f"synthetic fixed-interval arrivals at {rate_per_s:g} req/s, one every {1.0 / rate_per_s:g} s"
        kind = "Poisson arrivals" if self.cv == 1.0 else f"arrivals with Gamma gaps of CV {self.cv:g}"
        return f"synthetic {kind} at {rate_per_s:g} req/s drawn with seed {seed}"

    @property
    def label(self) -> str:
        return f"synthetic (prompt {self.prompt}, output {self.output}, arrival CV {self.cv:g})"


@dataclass
class SimulatedRun:
    """A simulated run ready for the ledgers, and where every input came from.

    Attributes:
        run: the records; ``metadata.num_gpus`` = ``num_gpus``, ``request_rate`` = offered rate (open loop),
            ``concurrency`` = users (closed); ``extra``: ``gpu_id``, ``tp``, ``max_num_seqs``, ``workload``, label.
        result: the simulator's full result (summary, engine settings, step logs if recorded).
        setup: the prepared simulation (plan, engine config, step cost, workload).
        args: the user's choices.
    """

    run: RunRecords
    result: SimResult
    setup: SimSetup
    args: SimRequestArgs
    synthetic: SyntheticSpec | None = None

    @property
    def replicas(self) -> int:
        return self.setup.replicas

    @property
    def num_gpus(self) -> int:
        """GPUs serving the run: replicas × TP (× vLLM's DP ranks, SGLang's inside TP: sim_dp.py; × PP: sim_pp.py)."""
        cost = self.setup.cost
        return self.setup.replicas * self.setup.tp * getattr(cost, "tp_groups", 1) * getattr(cost, "pp", 1)

    @property
    def gpu_id(self) -> str:
        """Catalog id of the simulated GPU (``nvidia_h100_sxm``; ``custom`` for a GPU file): the price table's key."""
        return self.setup.plan.gpu.gpu_id

    def plan_figures(self) -> PlanFigures:
        """The memory-plan figures that sized each replica's KV pool."""
        from kvledger.analyses.serving.sim_provenance import PlanFigures  # lazy: `simulate` reports neither class

        return PlanFigures.of(self.setup.plan)

    def provenance(self) -> SimProvenance:
        """What the run was: simulator, model, GPUs, engine settings, step-cost model, plan figures, workload."""
        from kvledger.analyses.serving.sim_provenance import SimProvenance

        s = self.setup
        wl = finite_rate({**s.workload_info, "seed": self.args.seed}, "offered_rate_req_per_s")  # inf: null, said
        return SimProvenance(simulator_description(self.result.config), s.model_name, s.gpu_name, self.gpu_id, s.tp,
                             s.replicas, s.router if s.replicas > 1 else None, self.num_gpus, self.result.config,
                             s.cost_info, self.plan_figures(), wl, list(s.notes))

    def source_lines(self) -> list[str]:
        """Human lines naming where the simulated capacity came from (for the cost report's sources)."""
        s, p, wl = self.setup, self.plan_figures(), self.setup.workload_info
        eng = self.result.config
        rules = p.engine_version if p.engine_version.endswith("rules") else f"{p.engine_version} rules"
        unit = "pages" if p.engine == "sglang" else "blocks"  # SGLang's pool: token slots in pages (kvledger plan)
        dp = getattr(s.cost, "dp", 1)  # DP ranks in lock-step (sim_dp.py)
        layout = (f"{unit_layout(s)} × {s.replicas:,} "  # vLLM's DP × TP; SGLang's DP in TP; × PP (unit_layout.py)
                  f"replica{'' if s.replicas == 1 else 's'}" + (f", router {s.router}" if s.replicas > 1 else ""))
        return [
            f"simulated run: {simulator_description(eng)}; {s.model_name} on {self.num_gpus}× {s.gpu_name} ({layout}); "
            f"workload {workload_text(wl)}, seed {self.args.seed}",
            f"step cost: {s.cost_info['name']} — {s.cost_info['source']}",
            f"memory plan ({p.engine} {rules}): {p.available_kv_bytes / 2**30:.2f} GiB for KV → "
            f"{p.num_gpu_blocks:,} {unit} × {p.block_size} tokens per {'DP rank' if dp > 1 else 'replica'} "
            f"({p.kv_bytes_per_token_per_gpu:,.{0 if float(p.kv_bytes_per_token_per_gpu).is_integer() else 1}f} B per "
            f"token per GPU); "
            f"engine max_model_len {eng['max_model_len']:,}, max_num_batched_tokens {eng['max_num_batched_tokens']:,}, "
            f"max_num_seqs {eng['max_num_seqs']:,}, prefix caching "
            f"{eng['prefix_caching_policy'] if eng['enable_prefix_caching'] else 'off'}; {p.source}"
            + (f"; {s.plan.memory.startup.message}" if s.plan.memory.startup is not None else ""),  # vLLM, --wddm
        ] + ([s.client_latency.note()] if s.client_latency is not None else []) + self._expert_parallel_lines() + [
            n for n in s.notes if NO_EFFECT in n]  # a flag the release ignores, as simulate says

    def _expert_parallel_lines(self) -> list[str]:
        """--enable-expert-parallel's or SGLang's --ep-size note (accounting.expert_parallel); [] without either."""
        from kvledger.accounting.expert_parallel import expert_parallel_notes

        plan = self.setup.plan
        if plan is None or not (getattr(plan.settings, "enable_expert_parallel", False) or plan.settings.ep_size):
            return []
        return list(expert_parallel_notes(plan.model, plan.settings))


def _synthetic_requests(args: SimRequestArgs, synthetic: SyntheticSpec) -> list[RequestSpec]:
    if args.rate_scale is not None:
        raise InputError("--rate-scale scales a trace's own arrival times; a synthetic workload takes --rate (req/s)")
    rate = args.rate
    if rate is None:
        if args.concurrency is None:
            raise InputError("a synthetic workload needs --rate (mean arrival rate, req/s; 'inf' sends every request "
                             "at t = 0) or --concurrency (closed loop)")
        rate = math.inf  # closed loop: arrival times are not used
    if args.num_requests is None:
        raise InputError("a synthetic workload needs --num-requests: how many requests to draw (e.g. --num-requests "
                         "2000; a steady-state figure wants a few thousand)")
    return synthetic.requests(args.num_requests, rate, args.seed)


def _complete_metadata(sim: SimulatedRun) -> None:
    md, s, mem = sim.run.metadata, sim.setup, getattr(sim.setup.plan, "memory", None)
    md.num_gpus, md.extra["engine_version"] = sim.num_gpus, getattr(mem, "engine_version", None)  # records: replay
    rate = s.workload_info.get("offered_rate_req_per_s")
    closed = str(s.workload_info.get("mode")).startswith("closed loop")  # paced: its rate too
    md.request_rate = None if s.workload_info.get("mode") == "closed loop" else rate
    md.concurrency = s.workload_info.get("concurrency") if closed else None
    md.extra.update({"gpu_id": sim.gpu_id, "tp": s.tp, "max_num_seqs": s.config.max_num_seqs,
                     "workload": finite_rate({**s.workload_info, "seed": sim.args.seed}, "offered_rate_req_per_s"),
                     "run_label": f"simulated {s.workload_info['trace']}, {s.workload_info['num_requests']:,} "
                                  f"requests, {load_text(s.workload_info)}"})


def prepare_run(args: SimRequestArgs, synthetic: SyntheticSpec | None = None) -> SimSetup:
    """The prepared simulation (plan, engine settings, step cost, workload) for ``args`` or ``synthetic``.

    Raises:
        InputError / UnknownNameError / FormatError: bad names, settings or trace files, with the reason.
    """
    check_options("simulate", {"tp": args.tp})  # [1, 1,024] GPUs: kvledger.ranges
    if synthetic is None or hasattr(synthetic, "prepare_setup"):  # a trace, or sessions (session_spec.SessionSpec)
        return prepare(args) if synthetic is None else synthetic.prepare_setup(args)
    setup = prepare(args, _synthetic_requests(args, synthetic), synthetic.label)
    if not str(setup.workload_info.get("mode")).startswith("closed loop"):
        setup.workload_info["mode"] = f"open loop ({synthetic.arrivals_text(args.rate, args.seed)})"
    return setup


def run_prepared(setup: SimSetup, args: SimRequestArgs, synthetic: SyntheticSpec | None = None, *,
                 record_steps: bool = False, progress: Callable[[int, int], None] | None = None,
                 record_token_times: bool = True, stop=None, kv_manager_factory=None) -> SimulatedRun:
    """Run a prepared simulation and complete its metadata (see :func:`simulate_run`).

    ``kv_manager_factory``: the simulator's KV manager per replica (e.g. ``dynamics.offload_sim.offload_kv_factory``
    for a host tier); None = the engine's own.

    ``record_token_times=False`` keeps no per-token times in the records (the summary's ITL
    distribution stays exact; per-request ITL statistics, e.g. an ITL SLO, need them). ``stop``: a
    ``kvledger.dynamics.early_stop.MissRule`` that may end an open-loop run once its miss is decided.
    """
    result = simulate(setup.workload, setup.config, setup.cost, record_steps=record_steps, progress=progress,
                      num_replicas=setup.replicas, router=setup.router, model=setup.model_name, hardware=setup.gpu_name,
                      record_token_times=record_token_times, stop=stop,
                      data_parallel_rule=getattr(setup.cost, "balancing_rule", None),  # DP in lock-step: sim_dp.py
                      **({} if kv_manager_factory is None else {"kv_manager_factory": kv_manager_factory}))
    return finish_run(setup, args, result, synthetic)


def finish_run(setup: SimSetup, args: SimRequestArgs, result: SimResult,
               synthetic: SyntheticSpec | None = None) -> SimulatedRun:
    """A simulator result of ``setup`` (run here or elsewhere, e.g. with a host tier) as a SimulatedRun, its records'
    metadata completed (GPU count, offered rate, max_num_seqs, workload) as :func:`run_prepared` completes it; every
    TTFT and E2E grown by a ``--client-latency`` (client_latency.py)."""
    result = with_client_latency(result, setup.client_latency.seconds if setup.client_latency else 0.0)
    sim = SimulatedRun(result.records, result, setup, args, synthetic)
    _complete_metadata(sim)
    return sim


def simulate_run(args: SimRequestArgs, synthetic: SyntheticSpec | None = None, *, record_steps: bool = False,
                 progress: Callable[[int, int], None] | None = None, record_token_times: bool = True,
                 stop=None) -> SimulatedRun:
    """Simulate ``args`` (a trace, or ``synthetic`` when given) and return records ready for the ledgers.

    Same inputs, same records: the seed is explicit and the simulator has no wall clock, so two calls
    (or this and ``kvledger simulate --out``) give identical records.

    Args:
        args: model, GPU, engine flags and workload as ``kvledger simulate`` names them.
        synthetic: replaces ``args.trace``; needs ``args.num_requests`` and ``args.rate`` (or ``args.concurrency``).
        record_steps: keep the per-step log (for ``steps.parquet`` / the Chrome trace).
        progress: called as ``progress(done, total)`` now and then.
        record_token_times: keep every token time in the records (per-request ITL statistics need them).
        stop: a ``kvledger.dynamics.early_stop.MissRule`` (SLO searches): the run may end once its miss is decided.

    Raises:
        InputError / UnknownNameError / FormatError: bad names, settings or trace files, with the reason.
    """
    from kvledger.analyses.serving import sim_cache

    # an identical earlier request's run, from the on-disk store (sim_cache.py); not with a progress display, and no
    # key to hash (the package's files among its parts) with the store off
    key = (sim_cache.cache_key(args, synthetic, record_steps, record_token_times, stop)
           if progress is None and sim_cache.enabled() else None)
    return sim_cache.cached_run(key, lambda: own_copies(run_prepared(prepare_run(args, synthetic), args, synthetic,
                                                                     record_steps=record_steps, progress=progress,
                                                                     record_token_times=record_token_times,
                                                                     stop=stop)))


def own_copies(sim: SimulatedRun) -> SimulatedRun:
    """``sim`` with its own copy of the step cost, which ``prepare_run`` keeps per process for the next run
    (``kept_step_cost``): setting an attribute of one run's ``setup.cost`` cannot change a later run's, with the disk
    store on (a run read back is a copy) or off (``KVLEDGER_NO_CACHE``). The plan is a frozen dataclass, shared."""
    import dataclasses

    return dataclasses.replace(sim, setup=dataclasses.replace(sim.setup, cost=_own(sim.setup.cost)))


def _own(obj: object, depth: int = 0) -> object:
    """A copy of a step-cost object: its attributes shared but its dicts and lists (the price caches) and the cost
    models it wraps copied, so nothing set on the copy reaches the original (about 0.1 ms, not a deep copy's 8)."""
    import copy

    new = copy.copy(obj)
    for name, v in getattr(new, "__dict__", {}).items():
        if isinstance(v, (dict, list)):
            object.__setattr__(new, name, copy.copy(v))
        elif depth < 4 and hasattr(v, "step_time_s") and not isinstance(v, type):
            object.__setattr__(new, name, _own(v, depth + 1))
    return new
