"""One planned candidate's evaluation, the unit of work a search worker runs: SLO capacity by simulation, cost per
token, sizing for the load, monthly bill.

SLO capacity (``kvledger.analyses.search.capacity``): the highest offered request rate of a request-rate search at
which the target share of requests meets the SLO, req/s per deployment unit, the figure ``kvledger goodput --target``
prints; goodput: the good req/s of the run at that rate, as ``cost --simulate`` prices. Sizing for a mean offered load
of R req/s: replicas = ⌈R ÷ (SLO capacity × max_utilization)⌉ (as ``kvledger cost`` sizes a monthly volume), realized
utilization = R ÷ (replicas × SLO capacity), GPUs = replicas × GPUs per unit, bill = the GPUs packed on whole
instances of the cheapest row (``instance_bill``, ``kvledger.ledgers.instances``) × GPUs per instance × $/GPU-h ×
730 h, idle GPUs included. Sizing on goodput instead would apply the SLO target twice (once to find the capacity,
again by dividing offered load by good-only throughput). Cost per 1M input and output tokens:
``kvledger.ledgers.cost.self_host_unit_ledgers`` at that utilization (given, or realized): the good requests at a
replica's load are its offered ones × the priced run's goodput ÷ its offered rate (the good share measured at the
rate sized on; at a lighter load more meet the SLO, so the cost per good request is an upper bound), i.e.
utilization × goodput. The run priced is the boundary probe, or, where the capacity bound caps the rate found, a run
of the same workload and seed at the bound (``sim_capacity.run_at_sized_rate``, the rule of ``cost --simulate``):
the probe at the rate found is a load the replica cannot sustain. With a load to size for (and no ``--utilization``),
the good requests and tokens are those of a run of the same workload and seed at the load each replica carries (the
load ÷ replicas, where below the rate sized on: ``serving.load_run.load_share_at``, the function ``cost --simulate``
calls), so that search and cost price the same deployment at the same volume on the same run; disaggregated units and
session workloads, which cost does not rerun either, keep the share at the rate sized on.
Speed per user: 1 ÷ the median TPOT of the priced run's requests (tokens/s each user sees).
The result is a plain JSON-ready dict; nothing in it depends on where or when it ran.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

from kvledger.analyses.search.instance_bill import engine_groups, instance_sizing, unit_packing
from kvledger.analyses.search.launch import launch_for
from kvledger.analyses.search.load import offered_words, peak_figures, split_for
from kvledger.analyses.search.probed import probed_band
from kvledger.analyses.search.reasons import CAPACITY_NOT_MEASURED, ITL_UNREACHABLE, SLO_NOT_MET, SLO_WITHIN_NOISE
from kvledger.analyses.search.screen import cheapest, packing_price, price_rows, sim_args
from kvledger.analyses.search.spec import SearchSpec
from kvledger.analyses.serving.itl_budget import itl_unreachable
from kvledger.analyses.serving.load_run import lowest_rate
from kvledger.analyses.serving.session_spec import CapacityNotMeasured
from kvledger.analyses.serving.sim_capacity import run_at_sized_rate
from kvledger.analyses.serving.sim_prober import sharing_probes
from kvledger.analyses.serving.work_bounds import bound_note
from kvledger.errors import KvLedgerError
from kvledger.ledgers.slo import parse_slo

__all__ = ["evaluate_candidate", "load_rate_req_per_s", "check_volume", "size_for_load", "sizing_capacity",
           "capacity_figures", "volume_load"]


def load_rate_req_per_s(spec: SearchSpec, mean_input_tokens: float, mean_output_tokens: float) -> float | None:
    """Mean request rate to size for, req/s: ``--rate``, or a monthly volume's requests ÷ (730 h × 3600 s), converted at
    the mean tokens per request as ``cost`` converts it and held to its caps (``search.load.mean_rate``); the replicas
    are sized for it × ``--peak-to-mean`` (``size_for_load``).

    Raises:
        InputError: a volume that converts to more requests or tokens a month than cost's flags take.
    """
    from kvledger.analyses.search.load import mean_rate

    return mean_rate(spec, mean_input_tokens, mean_output_tokens)


def check_volume(spec: SearchSpec) -> None:
    """``--monthly-tokens`` against a volume's caps (``load_rate_req_per_s``) before any candidate is planned, at the
    mean tokens of the probes' requests (the seeded trace's first ``--num-requests``, or the synthetic draw); a session
    workload draws its turns as it runs, so its volume is checked where it is converted.

    Raises:
        InputError: as ``load_rate_req_per_s``.
    """
    from kvledger.analyses.search.load import has_load

    if not has_load(spec) or spec.rate_req_per_s is not None or hasattr(spec.synthetic, "prepare_setup"):
        return
    from kvledger.dynamics.workload.traces import load_trace

    reqs = (spec.synthetic.requests(spec.num_requests, 1.0, spec.seed) if spec.synthetic is not None
            else load_trace(spec.trace, num_requests=spec.num_requests, rate=1.0, seed=spec.seed))
    n = len(reqs)
    load_rate_req_per_s(spec, sum(r.num_prompt_tokens for r in reqs) / n, sum(r.num_output_tokens for r in reqs) / n)


def size_for_load(rate_req_per_s: float, capacity_req_per_s: float, max_utilization: float,
                  peak_to_mean: float = 1.0) -> tuple[int, float]:
    """(replicas, realized utilization) serving a mean offered ``rate_req_per_s`` whose busiest hour is
    ``peak_to_mean`` × it, with each replica's offered load at the peak ≤ max_utilization × its SLO capacity
    (``capacity_req_per_s``, offered req/s at which the target meets the SLO).

    replicas = ⌈rate × peak_to_mean ÷ (capacity × max_utilization)⌉ (at least 1); realized = rate ÷ (replicas ×
    capacity), the mean. The 1e-12 keeps an exact multiple from rounding up by float noise, as ``kvledger cost`` does.
    """
    replicas = max(1, math.ceil(rate_req_per_s * peak_to_mean / (capacity_req_per_s * max_utilization) - 1e-12))
    return replicas, rate_req_per_s / (replicas * capacity_req_per_s)


def volume_load(spec: SearchSpec, rerun: Any, rate_req_per_s: float, cap: Any, lowest: float = 0.0) -> Any:
    """The ``LoadShare`` of ``rerun`` (rate → ``SizedRun``: the candidate's workload and seed at another rate) at the
    load each replica carries for ``rate_req_per_s`` (``serving.load_run.load_share_at``, as ``cost --simulate``), the
    replicas sized as ``size_for_load``; None for session workloads (their load is sessions per second, and cost
    leaves them at the capacity's share) or where the load per replica is the rate sized on; ``lowest``: the lowest
    rate a rerun's arrivals fit the simulator's clock at (``load_run.lowest_rate`` of the priced run)."""
    from kvledger.analyses.serving.load_run import load_share_at

    if hasattr(spec.synthetic, "prepare_setup"):
        return None
    replicas, _ = size_for_load(rate_req_per_s, cap.sizing_req_per_s, spec.max_utilization, spec.peak_to_mean)
    return load_share_at(rerun, rate_req_per_s, replicas, cap.sizing_req_per_s, lowest)


def sizing_capacity(pr: Any, bound: float | None) -> float:
    """The offered req/s a replica is sized on: the SLO capacity found (``pr.boundary``), but never above the
    candidate's capacity bound (``kvledger.analyses.serving.work_bounds``), the most req/s its engine can keep pace
    with by the roofline work of the requests. A probe short against the SLO's latency budget meets the target at any
    rate (60 requests under ttft ≤ 1 s met it at 524,288 req/s: all arrive at once and finish within the second), which
    no replica sustains; the cap says so in the capacity's notes (``work_bounds.bound_note``), as ``cost --simulate``
    does. It also keeps the search's pruning sound (``prune.key_lower`` sizes at the bound)."""
    if bound is None or pr.boundary <= bound:
        return pr.boundary
    pr.notes = [*pr.notes, bound_note(bound, pr.boundary)]
    return bound


def _sized_figures(pr: Any) -> dict[str, Any]:
    """Where the bound caps the rate found: the rate sized on, the share within the SLO in the run there and the good
    req/s sustained at the rate found (share × rate, goodput --target's key), the other goodput keys then reading the
    run there; else null, as cost's capacity_search (the last is then goodput_req_per_s). The probe's goodput."""
    s = pr.sized
    return {"sized_on_req_per_s": None if s is None else s.rate_req_per_s,
            "attainment_at_sized_rate": None if s is None else s.result.attainment,
            "goodput_at_boundary_req_per_s": pr.gp.goodput_req_per_s,
            "sustained_good_req_per_s_at_boundary": None if s is None else pr.boundary * pr.gp.attainment}


def capacity_figures(pr: Any, num_gpus: int, cap: Any) -> dict[str, Any]:
    from kvledger.analyses.search.capacity import operating_point

    rate, run, gp = pr.priced
    at = operating_point(rate, run, gp, num_gpus)
    return {"slo_capacity_req_per_s": pr.boundary, "attainment": pr.gp.attainment, **_sized_figures(pr),
            # the run at the load each replica carries (ledgers/load_share.py), as cost's capacity; null if none
            "at_volume_load": None if cap.load is None else cap.load.to_dict(),
            # the good req/s priced, as cost's capacity.goodput_req_per_s (cap: ledgers/sustained_rate.py); the
            # run's own goodput (first arrival → last finish) under cost's name for it
            "goodput_req_per_s": cap.goodput_req_per_s,
            "goodput_at_sized_rate_req_per_s": None if pr.sized is None else gp.goodput_req_per_s,
            "goodput_output_tok_per_s": gp.goodput_output_tok_per_s,
            "goodput_input_tok_per_s": gp.goodput_input_tok_per_s,
            "goodput_output_tok_per_s_per_gpu": at["output_tok_per_s_per_gpu"], "tpot_p50_s": at["tpot_p50_s"],
            "tok_per_s_per_user": at["tok_per_s_per_user"], "first_failing_rate_req_per_s": pr.first_failing,
            "probes": pr.probes, "operating_points": pr.points,
            "operating_points_decided_by_bound": pr.skipped, "notes": pr.notes, **pr.extra,
            "method": "SLO capacity by simulation (rate search of kvledger.analyses.serving.sim_boundary / "
                      "kvledger.ledgers.boundary): " + (
                          "slo_capacity_req_per_s, the offered req/s replicas are sized on; goodput_req_per_s (as "
                          "cost --simulate's) and the tokens priced = the offered rate × attainment, its share within "
                          "the SLO; goodput_at_boundary_req_per_s and the goodput tokens/s = the run at the boundary "
                          "(first arrival → last finish, its drain tail included)" if pr.sized is None else
                          "slo_capacity_req_per_s as found; sized_on_req_per_s, the capacity bound below it, the "
                          "offered req/s replicas are sized on; goodput_req_per_s (as cost --simulate's) and the "
                          "tokens priced = sized_on_req_per_s × attainment_at_sized_rate; "
                          "goodput_at_sized_rate_req_per_s and the goodput tokens/s = a run of the same workload and "
                          "seed at sized_on_req_per_s") + (
                          "; at a load to size for, the per-token and per-request costs count the good requests and "
                          "tokens of at_volume_load, a run of the same workload and seed at the load each replica "
                          "carries, as cost --simulate prices" if cap.load is not None else "")}


def _no_rate(entry: dict[str, Any], pr: Any, spec: SearchSpec) -> dict[str, Any]:
    low, edge = min(pr.probes), getattr(pr, "idle_edge", None)
    detail = (f"no request rate down to {low[0]:.3g} req/s has {spec.target:.0%} of requests within the SLO "
              f"({spec.slo}); {low[1]:.1%} there") if edge is None else f"{edge.note} ({spec.slo})"
    itl = None if edge is not None or pr.search is None else itl_unreachable(pr.search, parse_slo(spec.slo),
                                                                              spec.target)  # its misses alone
    reason = SLO_WITHIN_NOISE if edge is not None else SLO_NOT_MET if itl is None else ITL_UNREACHABLE
    return {**entry, "status": "rejected", "reason": reason, "detail": itl or detail,
            "capacity": {"probes": pr.probes, "notes": pr.notes}, **_refused(pr, spec.target)}


def _refused(pr: Any, target: float) -> dict[str, Any]:
    """``refused_requests`` where the requests the engine refuses alone keep every load below ``target`` (then the
    answer names max_model_len: ``refusals.refused_everywhere``); else nothing."""
    rej = getattr(pr, "rejections", None)
    return {"refused_requests": rej.to_dict()} if rej is not None and rej.blocks(target) else {}


def _sizing(spec: SearchSpec, rate: float, cap: Any, cand: Any, gpu: Any, sized: bool) -> tuple[dict[str, Any], Any]:
    """(replicas for the load and their monthly bill on whole instances of the cheapest packing
    (``instance_bill.instance_sizing``), that packing)."""
    c, num_gpus = cap.sizing_req_per_s, cand.num_gpus
    replicas, realized = size_for_load(rate, c, spec.max_utilization, spec.peak_to_mean)
    unit = unit_packing(gpu, replicas, engine_groups(cand))
    inst = instance_sizing(gpu, replicas, engine_groups(cand), unit=unit)
    which = f"the run of the same workload and seed at the bound, {c:.4g} req/s:" if sized else "the boundary run's"
    good = (f"offered × {cap.load.attainment:.3f} (the share within the SLO in {cap.load.words()}, as cost --simulate "
            "prices it)" if cap.load is not None else
            f"offered × {_attainment(cap, c):.3f} ({which} attainment, the share of its requests within the SLO; "
            "not its good req/s ÷ offered, which counts the drain tail after the last arrival as failed requests)")
    return {"rate_req_per_s": rate, **peak_figures(spec, rate), "sizing_req_per_s": c, "replicas": replicas,
            "num_gpus": replicas * num_gpus, "realized_utilization": realized, **inst,
            "how": f"replicas = ⌈{offered_words(spec, rate)} ÷ ({c:.4g} req/s SLO capacity × "
                   f"{spec.max_utilization:.0%})⌉; utilization = {rate:.4g} ÷ (replicas × {c:.4g}); good requests at "
                   f"that load = {good}; bill = {inst['instances_how']}"}, unit


def _attainment(cap: Any, c: float) -> float:
    """The boundary run's share of requests within the SLO: ``cap.attainment`` where the run states it (its good
    req/s ÷ offered need not be it: a session run's), else its good req/s ÷ the ``c`` req/s sized on."""
    return cap.attainment if cap.attainment is not None else cap.goodput_req_per_s / c


@sharing_probes  # the band's rate search from 1 req/s (origin_band) reuses this search's probes
def evaluate_candidate(spec: SearchSpec, entry: dict[str, Any]) -> dict[str, Any]:
    """The ledger entry of one planned candidate (``status`` "planned", from ``screen_candidate``) after its capacity
    search: "feasible" with capacity, cost, sizing and launch commands; "rejected" when no rate meets the SLO; "error"
    (reason ``simulation error``) when the simulation refuses an input."""
    from kvledger.analyses.search.bounds import point_skipper
    from kvledger.analyses.search.capacity import bracket_start, colocated_capacity, disagg_capacity
    from kvledger.analyses.search.spec import Candidate
    from kvledger.ledgers.cost import GpuRate, capacity_from
    from kvledger.ledgers.slo import parse_slo

    known = entry.get("known_points") or []  # frontier points simulated before this candidate (search.prune)
    entry = {k: v for k, v in entry.items() if k != "known_points"}
    n_gpus = (cand := Candidate.from_entry(entry)).num_gpus
    try:
        slo = parse_slo(spec.slo)
        b = None if cand.disagg else entry.get("bounds")
        bound = (b or {}).get("capacity_bound_req_per_s")
        if cand.disagg:
            pr = disagg_capacity(spec, cand, slo)
        else:
            pr = colocated_capacity(spec, cand, slo, bracket_start(bound), skip=point_skipper(spec, cand, b, known),
                                    guess=bound is not None)
        if pr.boundary is None or pr.run is None:
            return _no_rate(entry, pr, spec)
        if hasattr(spec.synthetic, "prepare_setup"):  # sessions: the steady state's goodput (session_spec.py)
            from kvledger.analyses.serving.session_spec import steady_goodput

            pr.gp, note = steady_goodput(pr.gp, pr.boundary, pr.run)
            pr.notes = [n for n in pr.notes if not n.startswith("the boundary run's goodput")] + [note]
        c = sizing_capacity(pr, bound)
        if c != pr.boundary:  # capped: priced on a run at the bound, as cost --simulate (one more simulation)
            pr.sized = run_at_sized_rate(sim_args(spec, cand), spec.synthetic, slo, c)
        pr.extra.update(probed_band(spec, cand, slo, pr, c, bound is None))  # goodput's and cost's band of it
        _, run, gp = pr.priced
        cap = capacity_from(run, gp, None, slo_capacity_req_per_s=pr.boundary,  # good rates at C × attainment
                            capacity_bound_req_per_s=None if c == pr.boundary else c)  # C: the rate sized on
        wl = pr.workload
        rate = load_rate_req_per_s(spec, wl["prompt_tokens_mean"], wl["output_tokens_mean"])
        if rate is not None and spec.utilization is None and not cand.disagg:  # priced at the volume's load, as cost
            cap.load = volume_load(spec, partial(run_at_sized_rate, sim_args(spec, cand), spec.synthetic, slo), rate,
                                   cap, lowest_rate(*pr.priced[:2]))
    except CapacityNotMeasured as err:  # a session probe too short to carry its rate: no capacity to size on (the
        # same probe again would not carry it either: rejected, not an error to --resume)
        return {**entry, "status": "rejected", "reason": CAPACITY_NOT_MEASURED, "detail": str(err),
                "capacity": {"probes": pr.probes, "notes": pr.notes}}
    except KvLedgerError as err:
        return {**entry, "status": "error", "reason": "simulation error", "detail": str(err)}
    rows = price_rows(cand.gpu_id, spec.gpu_provider, spec.gpu_usd_per_hour, max(k for _, k in engine_groups(cand)))
    row = cheapest(rows)  # with the others as options: the bill and the tokens are priced on their packing
    gpu = GpuRate.from_catalog(row, rows)
    sizing, unit = (None, None) if rate is None else _sizing(spec, rate, cap, cand, gpu, pr.sized is not None)
    packing, cost = unit_cost(spec, cap, cand, gpu, sizing, unit)
    out = {**entry, "status": "feasible", "workload": wl, "capacity": capacity_figures(pr, n_gpus, cap), "cost": cost,
           "sizing": sizing, "price": packing_price(rows, packing)}
    out["launch"] = launch_for(spec.model, cand.gpu_id, out, spec.engine_version)
    return out


def unit_cost(spec: SearchSpec, cap: Any, cand: Any, gpu: Any, sizing: dict[str, Any] | None,
              unit: Any = None, tier: tuple[Any, float] = (None, 0.0)) -> tuple[Any, dict[str, Any]]:
    """(the packing priced, the candidate's cost figures): the units' engines on whole instances (``gpu``: the cheapest
    row with the others as options), the sizing's replicas at a volume (its bill's packing), else one unit (what must
    be rented for it, as ``cost`` prices one replica without a volume); the per-token ledgers carry that packing's idle
    GPUs and price a mix at its bill ÷ the GPUs billed (``cost.self_host_unit_ledgers``), and USD per 1k requests is
    its bill per unit-hour ÷ the good requests, so that they × the volume equal the bill; ``unit``: the sizing's
    packing where ``_sizing`` made it; ``tier``: a KV tier's bill and its USD per month per unit, riding on the
    GPU-hours (``tier_entries``), the ledgers then in the figures."""
    from kvledger.ledgers.cost import HOURS_PER_MONTH, SelfHostSetup, self_host_unit_ledgers

    bill, tier_month = tier
    packing = unit if unit is not None else unit_packing(gpu, sizing["replicas"] if sizing else 1, engine_groups(cand))
    utilization = spec.utilization if spec.utilization is not None else sizing["realized_utilization"]
    setup = SelfHostSetup(packing.rate, cand.num_gpus, utilization, max_utilization=spec.max_utilization,
                          kv_tiers=bill)
    split = split_for(spec, sizing["rate_req_per_s"], cap) if sizing else None  # tokens given, as cost spreads them
    led_in, led_out = self_host_unit_ledgers(cap, setup, packing=packing, split=split)
    tier_hour = tier_month / HOURS_PER_MONTH
    unit_hour = packing.usd_per_hour / packing.units + tier_hour  # one unit's share of the bill, idle GPUs included
    at_capacity = cand.num_gpus * packing.usd_per_gpu_hour + tier_hour  # its own GPUs alone
    cost = {"utilization": utilization, "usd_per_mtok_input": led_in.total_usd,
            "usd_per_mtok_output": led_out.total_usd,
            "usd_per_1k_requests": unit_hour * 1000.0 / (3600.0 * cap.good_req_per_s(utilization)),
            "usd_per_1k_requests_at_capacity": at_capacity * 1000.0 / (3600.0 * cap.goodput_req_per_s),
            "prefill_share": cap.prefill_share, "prefill_share_method": cap.prefill_share_method}
    if bill is not None:
        cost["ledgers"] = {"input": led_in.to_dict(), "output": led_out.to_dict()}
    return packing, cost
