"""A tier variant as a search candidate of its own: the ledger entry of a colocated candidate served with a KV tier
below HBM (``tier_probe.py``), with the same figures as any other entry (capacity, operating points, cost, sizing,
launch commands) so that the ranking, both frontiers and the winner take it like the rest, plus its verdict against
the same setup on more GPUs.

Cost: ``self_host_unit_ledgers`` with the tier as a line item (``ledgers/tier_items.py``; the user's price, else the
bundled row of ``catalog/tier_prices.py``); the unit's hour costs its share of the packing's bill (whole instances,
idle GPUs included, as ``evaluate`` prices colocated candidates) plus the tier's month ÷ 730 h. "Beats more
GPUs": the variant against the same GPU, KV dtype and engine settings without a tier — the candidate itself (more
replicas for the load) and every feasible candidate with a larger TP — on the monthly bill for the load
(``--rate``/``--monthly-tokens``/``--session-rate``), else on USD per 1k requests at capacity.
"""

from __future__ import annotations

from typing import Any

from kvledger.analyses.search.reasons import CAPACITY_NOT_MEASURED, SLO_NOT_MET
from kvledger.analyses.search.tier_probe import TIER_OF, TierProber, tier_capacity
from kvledger.analyses.serving.session_spec import CapacityNotMeasured
from kvledger.errors import KvLedgerError

__all__ = ["variant_id", "variant_entry", "compare", "tier_launch"]


def variant_id(base_id: str, opt: Any) -> str:
    """``nvidia_h100_sxm:tp1:kv-auto:offload-cpu-256GiB``: the base candidate's id and the tier."""
    return f"{base_id}:offload-{opt.kind}-{opt.size_gib:g}GiB"


def _on_each(text: str, flags: str) -> str:
    """``flags`` appended to each line of ``text`` (a multi-node launch has one line per node)."""
    return "\n".join(line + flags for line in text.split("\n"))


def tier_launch(base: dict[str, str], opt: Any, tp: int) -> dict[str, str]:
    """The launch commands ``base`` of a candidate at TP ``tp`` with the tier ``opt`` (GiB per replica) added (flags
    and note): vLLM's ``--kv-offloading-size`` is the replica's size (summed over the TP ranks), SGLang's
    ``--hicache-size`` one GPU's share in GB (10^9 B)."""
    out = dict(base)
    sizes = opt.sizes_text(tp)
    if opt.kind == "cpu":
        out["vllm"] = _on_each(out["vllm"], f" --kv-offloading-size {opt.size_gib:g} --kv-offloading-backend native")
        out["sglang"] = _on_each(out["sglang"], f" --enable-hierarchical-cache --hicache-size "
                                               f"{int(opt.gib_per_gpu(tp) * 2**30 // 10**9)}")
        out["check"] += f" --kv-offloading-size {opt.size_gib:g} --kv-offloading-backend native"
        out["note"] += (f"; host KV tier {sizes}: vLLM's --kv-offloading-size is the sum over the TP ranks, SGLang's "
                        "--hicache-size is GB (10^9 B) per GPU")
    else:
        out["note"] += (f"; disk KV tier {sizes}: not in these commands (vLLM's native connector "
                        "has no disk tier; LMCache's local_disk backend is the closest)")
    return out


def _points(p: TierProber, b: float, num_gpus: int, target: float) -> list[dict[str, Any]]:
    from kvledger.analyses.search.capacity import LOAD_FRACTIONS, operating_point

    pts = []
    for r in [f * b for f in LOAD_FRACTIONS] + [b]:
        p.run_at(r)
        pts.append(operating_point(r, p.runs[r], p.goodputs[r], num_gpus))
    return [x for x in pts if x["attainment"] >= target and x["tok_per_s_per_user"] is not None]


def _cost_and_sizing(spec: Any, cand: Any, cap: Any, wl: dict[str, Any], tier: tuple[Any, float],
                     runs: tuple[Any, Any]) -> tuple[dict[str, Any], dict[str, Any] | None, dict[str, Any]]:
    """(the variant's cost per token and per request, its sizing for the spec's load or None without one, its
    ``price``: the row or mix rented, ``screen.packing_price``) at capacity
    ``cap``, the GPUs priced as the colocated candidates are (``evaluate``: the packing of the sizing's replicas, else
    of one unit, on whole instances: idle GPUs billed, a mix at its bill ÷ the GPUs billed) and the tier's bill
    (``tier``: the bill, USD per month per unit) added; with a load and no ``--utilization``, the good requests and
    tokens of ``runs``' rerun (the tier prober's run; ``runs``: it and the priced (rate, records, goodput)) at the
    load each replica carries (``evaluate.volume_load``, as
    ``cost --simulate --kv-tier-host`` does with its own run with the tier)."""
    from kvledger.analyses.search.evaluate import load_rate_req_per_s, size_for_load, unit_cost, volume_load
    from kvledger.analyses.search.instance_bill import engine_groups, instance_sizing, unit_packing
    from kvledger.analyses.search.load import offered_words, peak_figures
    from kvledger.analyses.search.screen import cheapest, packing_price, price_rows
    from kvledger.analyses.serving.load_run import lowest_rate
    from kvledger.ledgers.cost import GpuRate

    bill, tier_month = tier
    groups = engine_groups(cand)
    rows = price_rows(cand.gpu_id, spec.gpu_provider, spec.gpu_usd_per_hour, max(k for _, k in groups))
    gpu = GpuRate.from_catalog(cheapest(rows), rows)  # the cheapest row, the others its options (as evaluate)
    rate = load_rate_req_per_s(spec, wl["prompt_tokens_mean"], wl["output_tokens_mean"])
    sizing = None
    if rate is not None and spec.utilization is None:
        rerun, priced = runs
        cap.load = volume_load(spec, rerun, rate, cap, lowest_rate(*priced[:2]))
    replicas, realized = (1, None) if rate is None else size_for_load(rate, cap.sizing_req_per_s, spec.max_utilization,
                                                                      spec.peak_to_mean)
    packing = unit_packing(gpu, replicas, groups)  # the sizing's, or one unit's without a volume
    if rate is not None:
        inst = instance_sizing(gpu, replicas, groups, tier_month, unit=packing)
        sizing = {"rate_req_per_s": rate, **peak_figures(spec, rate), "sizing_req_per_s": cap.sizing_req_per_s,
                  "replicas": replicas, "num_gpus": replicas * cand.num_gpus, "realized_utilization": realized, **inst,
                  "how": f"replicas = ⌈{offered_words(spec, rate)} ÷ ({cap.sizing_words} × "
                         f"{spec.max_utilization:.0%})⌉; bill = {inst['instances_how']}"}
    packing, cost = unit_cost(spec, cap, cand, gpu, sizing, packing, tier)
    return cost, sizing, packing_price(rows, packing)


def _tier_bill(base: dict[str, Any], opt: Any, prices: dict[str, float | None],
               num_gpus: int) -> tuple[Any, float, dict[str, Any]]:
    """(the tier's bill, its USD per month per unit, the entry's ``offload`` section) of tier ``opt`` on ``base``."""
    from kvledger.ledgers.tier_items import KvTierBill, TierRate, tier_usd_per_month

    rate_row = TierRate.given(TIER_OF[opt.kind][0], opt.gib_per_gpu(num_gpus), prices[TIER_OF[opt.kind][0]])
    bill = KvTierBill((rate_row,))
    tier_month = tier_usd_per_month(bill, num_gpus)
    feasible_base = base["status"] == "feasible"
    info = {"kind": opt.kind, "size_gib_per_replica": opt.size_gib, "size_gib_per_gpu": opt.gib_per_gpu(num_gpus),
            "sizes": opt.sizes_text(num_gpus), "label": opt.label, "base": base["id"],
            "base_status": base["status"] if feasible_base else f"{base['status']}: {base.get('reason')}",
            "base_slo_capacity_req_per_s": base["capacity"]["slo_capacity_req_per_s"] if feasible_base else None,
            "tier_usd_per_month_per_unit": tier_month,
            "tier_price": {"usd_per_gib_month": rate_row.usd_per_gib_month, "source": rate_row.source,
                           "as_of": rate_row.as_of}}
    return bill, tier_month, info


def variant_entry(spec: Any, base: dict[str, Any], opt: Any, prices: dict[str, float | None]) -> dict[str, Any]:
    """The entry of ``base`` (a feasible colocated entry, or one that met the SLO at no rate) served with tier ``opt``:
    status "feasible" with every figure an entry has, or "rejected" / "skipped" / "error" with the reason."""
    from kvledger.analyses.search.evaluate import capacity_figures, sizing_capacity
    from kvledger.analyses.search.launch import launch_for
    from kvledger.analyses.search.spec import Candidate
    from kvledger.ledgers.cost import capacity_from
    from kvledger.ledgers.slo import parse_slo

    cand = Candidate.from_entry(base)
    bill, tier_month, info = _tier_bill(base, opt, prices, cand.num_gpus)
    keep = {k: v for k, v in base.items() if k not in ("capacity", "cost", "sizing", "launch", "bounds", "workload",
                                                       "decided_by_bound", "capacity_band")}  # its own, if feasible
    feasible_base = base["status"] == "feasible"
    out: dict[str, Any] = {**keep, "id": variant_id(base["id"], opt), "reason": None, "detail": None,
                           "offload": info}
    if base.get("enable_prefix_caching") is False:
        return {**out, "status": "skipped", "reason": "prefix caching off",
                "detail": "a KV tier serves prefix hits only; with prefix caching off there is nothing to load"}
    slo = parse_slo(spec.slo)
    p = TierProber.for_candidate(spec, cand, opt, slo)
    bound = (base.get("bounds") or {}).get("capacity_bound_req_per_s")  # no tier makes the engine compute faster
    start = (base["capacity"]["slo_capacity_req_per_s"] if feasible_base
             else min(r for r, _ in base["capacity"]["probes"]))
    try:
        b, first_failing = tier_capacity(p, start, bound)
        if b is not None:
            band = _band(p, b, bound, slo, base)  # from the search's probes alone, as cost's (before the points')
            points = _points(p, b, cand.num_gpus, spec.target)
    except KvLedgerError as err:
        return {**out, "status": "error", "reason": "simulation error", "detail": str(err)}
    info["tier"] = p.tier
    if b is None:
        return {**out, "status": "rejected", "reason": SLO_NOT_MET,
                "detail": f"with {opt.label} no request rate down to {first_failing:.3g} req/s has "
                          f"{spec.target:.0%} of requests within the SLO ({spec.slo})"}
    run = p.runs[b]
    wl = base.get("workload") or {k: run.metadata.extra["workload"][k] for k in (
        "trace", "num_requests", "prompt_tokens_mean", "output_tokens_mean")}
    try:
        pr = _probed(spec, p, (start, b, first_failing), wl, points)
    except CapacityNotMeasured as err:  # a session probe too short to carry its rate (session_spec.steady_goodput)
        return {**out, "status": "rejected", "reason": CAPACITY_NOT_MEASURED, "detail": str(err)}
    c = sizing_capacity(pr, bound)  # the base's bound and its note, as the base is sized
    pr.extra["error_band"] = None if band is None else band.to_dict()  # the band through the tier's probes
    if c != b:  # capped: priced on the run with the tier at the bound, as the base (and cost --simulate)
        pr.sized = p.sized_run(c)
    _, run, gp = pr.priced
    cap = capacity_from(run, gp, None, slo_capacity_req_per_s=b, capacity_bound_req_per_s=None if c == b else c)
    cost, sizing, price = _cost_and_sizing(spec, cand, cap, wl, (bill, tier_month), (p.sized_run, pr.priced))
    out = {**out, "status": "feasible", "workload": wl, "capacity": capacity_figures(pr, cand.num_gpus, cap),
           "cost": cost, "sizing": sizing, "price": price}
    launch = base.get("launch") or launch_for(spec.model, cand.gpu_id, out, spec.engine_version)
    return {**out, "launch": tier_launch(launch, opt, cand.tp)}


def _band(p: TierProber, b: float, bound: float | None, slo: Any, base: dict[str, Any]) -> Any:
    """The band of the variant's capacity through the tier's probes (``serving.tier_band``): the rate found
    ``b``, sized on the ``bound`` where it caps it (``evaluate.sizing_capacity``'s rule); the base's own band where
    no probe loaded a block back from the tier and the rate sized on is the base's."""
    from kvledger.analyses.serving.capacity_bands import CapacityBand
    from kvledger.analyses.serving.tier_band import tier_capacity_band

    own = (base.get("capacity") or {}).get("error_band") if base["status"] == "feasible" else None
    sized = b if bound is None or b <= bound else bound
    return tier_capacity_band(p, b, sized, slo, None if not own else CapacityBand(**own))


def _probed(spec: Any, p: TierProber, found: tuple[float, float, float | None], wl: dict[str, Any],
            points: list[dict[str, Any]]) -> Any:
    """The variant's capacity search as a ``capacity.Probed``: ``found`` (the start, the rate found, the first rate
    found to miss), its probes, notes and the run at the rate found with its goodput (a session's steady state's)."""
    from kvledger.analyses.search.capacity import Probed

    start, b, first_failing = found
    gp = p.goodputs[b]
    notes = [f"each probe: one simulation with the {p.opt.label} tier in the simulator (vLLM's OffloadingConnector "
             f"rule, dynamics/offload_sim.py); search from {start:.4g} req/s"] + ([WARM_START] if p.opt.kind == "cpu"
                                                                                else [])
    notes += ["the target was still met at the last doubling: the capacity is at least this"] if p.lower_bound else []
    notes += p.notes() + _caveat_notes(p, b, wl)
    if hasattr(spec.synthetic, "prepare_setup"):  # sessions: the steady state's goodput, as the base's
        from kvledger.analyses.serving.session_spec import steady_goodput

        gp, note = steady_goodput(gp, b, p.runs[b])
        notes.append(note)
    limit = p.sessions_limit()  # too few sessions carried a rate above b (session_ramp), as the base's capacity
    return Probed(b, first_failing, p.probes(), notes, p.runs[b], gp, wl, points=points,
                  extra={} if limit is None else {"sessions_limit": limit})


#: how a variant's search differs from the one path of the capacity with a tier (goodput --simulate --target, report
#: and cost --simulate --kv-tier-host: report_tier_capacity.capacity_with_tier), and why
WARM_START = ("the variant's capacity with the tier is bisected from its candidate's capacity without it, to 1% of "
              "the bracket's low end, so that each of the search's variants costs a few probes; goodput --simulate "
              "--target, report and cost --simulate --kv-tier-host search it from 1 req/s with the tier in every "
              "probe, as the capacity without it is searched, so theirs can differ from this by the two searches' "
              "resolution (the runs at a rate are the same)")


def _caveat_notes(p: TierProber, b: float, wl: dict[str, Any]) -> list[str]:
    """What the variant's capacity rests on, in the words of a colocated candidate's notes (which
    ``frontier.capacity_caveats`` reads for the table's ``~``): its probe at ``b`` not steady, its queue still growing
    (``queue_growth.boundary_steadiness``), and probes replaying a window unlike the trace (``probe_sample``)."""
    from kvledger.analyses.serving.probe_sample import sample_note
    from kvledger.analyses.serving.queue_growth import boundary_steadiness

    return boundary_steadiness(p.runs[b], b, int(wl["num_requests"]))[1] + sample_note(p.sims[b])


def _same_setup(a: dict[str, Any], b: dict[str, Any]) -> bool:
    keys = ("gpu_id", "kv_cache_dtype", "max_num_seqs", "max_num_batched_tokens", "enable_prefix_caching",
            "enable_expert_parallel")
    return all(a.get(k) == b.get(k) for k in keys) and not b.get("prefill_replicas") and "offload" not in b


def _money(v: dict[str, Any], by_bill: bool) -> tuple[float, int]:
    return ((v["sizing"]["rental_usd_per_month"], v["sizing"]["num_gpus"]) if by_bill
            else (v["cost"]["usd_per_1k_requests_at_capacity"], v["num_gpus_per_unit"]))


def compare(v: dict[str, Any], base: dict[str, Any], feasible: list[dict[str, Any]]) -> None:
    """Adds ``vs_more_gpus``, ``beats_more_gpus``, ``cheaper_than_without`` and ``verdict`` to a feasible variant's
    ``offload``: against its base without the tier (more replicas for the load; absent when the base met the SLO at no
    rate) and every feasible larger TP of the same setup without a tier."""
    n = base["num_gpus_per_unit"]
    rivals = ([base] if base["status"] == "feasible" else []) + [
        f for f in feasible if _same_setup(base, f) and f["num_gpus_per_unit"] > n]
    by_bill = v["sizing"] is not None
    mine, mine_gpus = _money(v, by_bill)
    fmt = "{:,.0f}" if by_bill else "{:.4g}"
    off = v["offload"]
    vs = []
    for r in rivals:
        theirs, gpus = _money(r, by_bill)
        what = (f"{r['id']} × {r['sizing']['replicas']} ({_gpus(gpus)}, ${theirs:,.0f}/month) vs {_gpus(mine_gpus)} + "
                f"{off['label']} (${mine:,.0f}/month)" if by_bill else
                f"{r['id']} ${theirs:.4g} vs ${mine:.4g} per 1k requests at capacity")
        vs.append({"id": r["id"], "more_gpus": "no tier, replicas for the load" if r is base else f"TP {r['tp']}",
                   "num_gpus": gpus, "usd": theirs, "tier_usd": mine, "tier_cheaper": mine < theirs, "text": what})
    off["vs_more_gpus"] = vs
    head = f"{off['label']} on {base['id']} ({_gpus(mine_gpus)} + tier, ${fmt.format(mine)})"
    if not vs:
        off.update(beats_more_gpus=False, cheaper_than_without=None,
                   verdict=f"{head} meets the SLO where {base['id']} without a tier does not ({off['base_status']}); "
                           "no larger TP of the same setup is feasible to compare with")
        return
    best = min(vs, key=lambda x: x["usd"])
    basis = "monthly bill for the load" if by_bill else "USD per 1k requests at capacity"
    off["cheaper_than_without"] = mine < best["usd"]
    off["beats_more_gpus"] = off["cheaper_than_without"] and mine_gpus < best["num_gpus"]
    off["verdict"] = (f"{head} {'beats' if off['cheaper_than_without'] else 'does not beat'} the cheapest setup "
                      f"without a tier ({best['id']}, {best['more_gpus']}: {_gpus(best['num_gpus'])}, "
                      f"${fmt.format(best['usd'])}; {basis})"
                      + ("; the tier beats more GPUs" if off["beats_more_gpus"] else ""))


def _gpus(n: int) -> str:
    """``n`` GPUs in words: "1 GPU", "2 GPUs"."""
    return f"{n} GPU{'' if n == 1 else 's'}"
