"""The search's offload axis: each feasible colocated candidate again with a KV tier below HBM, its SLO capacity
simulated with the host tier, priced with the tier's line items, and compared with the same setup on more GPUs.

Options (``--offload none,cpu:256GiB,disk:1TiB``): ``cpu:SIZE`` is vLLM's native ``OffloadingConnector`` with
``--kv-offloading-size`` = SIZE per GPU × TP (the plan's ``host_dram`` tier: capacity by the engine's rule, read
bandwidth over the host link, ``accounting/kv_tiers.py``); ``disk:SIZE`` is a local NVMe tier of SIZE per GPU (the
plan's ``nvme`` tier, 7 GB/s read assumed) simulated by the same write-through LRU host-tier model with the disk's
capacity and bandwidth — an approximation: vLLM's native connector has no disk tier (LMCache's ``local_disk`` has).

Capacity: the same seeded workload as the candidate's search, at request rates from the candidate's own boundary
(doubled while the target is met, then ``ledgers.boundary.search_boundary`` to 1 % of it), each probe one
simulation with the tier (``dynamics.offload_sim.offload_kv_factory``). Cost: ``self_host_unit_ledgers`` with the tier
as a line item (``ledgers/tier_items.py``; the user's price, else the bundled row of ``catalog/tier_prices.py``).
"Beats more GPUs": the tier variant against the same GPU, KV dtype and engine settings without a tier — the
candidate itself (more replicas for the load) and every feasible candidate with a larger TP — on the monthly bill
for the load (``--rate``/``--monthly-tokens``), else on USD per 1k requests at capacity.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

from kvledger.errors import InputError, KvLedgerError

__all__ = ["OffloadOption", "parse_offload", "check_prices", "offload_pass"]

_TIER_OF = {"cpu": ("host", "host_dram"), "disk": ("nvme", "nvme")}
_MAX_DOUBLINGS = 6


@dataclass(frozen=True)
class OffloadOption:
    """One point of the axis: ``kind`` "none", "cpu" or "disk", ``size_gib`` GiB per GPU (None for none)."""

    kind: str
    size_gib: float | None = None

    @property
    def label(self) -> str:
        return "none" if self.kind == "none" else f"{self.kind}:{self.size_gib:g}GiB"


def parse_offload(text: str | None) -> tuple[OffloadOption, ...]:
    """``none,cpu:256GiB,disk:1TiB`` → options (a bare number is GiB); None or empty → (none,).

    Raises:
        InputError: an unknown kind, a missing or unreadable size, a size ≤ 0.
    """
    from kvledger.units import parse_bytes

    if not text or not text.strip():
        return (OffloadOption("none"),)
    out = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        kind, _, size = part.partition(":")
        kind = kind.strip().lower()
        if kind == "none" and not size:
            out.append(OffloadOption("none"))
            continue
        if kind not in _TIER_OF or not size.strip():
            raise InputError(f"--offload takes none, cpu:SIZE or disk:SIZE (e.g. none,cpu:256GiB,disk:1TiB), got "
                             f"{part!r}")
        try:
            gib = float(size)
        except ValueError:
            gib = parse_bytes(size.strip(), what="--offload") / 2**30
        if not (math.isfinite(gib) and gib > 0):
            raise InputError(f"--offload {part!r}: the size must be positive")
        out.append(OffloadOption(kind, gib))
    return tuple(dict.fromkeys(out))


def _host_tier(setup: Any, tp: int, opt: OffloadOption) -> tuple[Any, dict[str, Any]]:
    from kvledger.accounting.kv_tier_rules import TierSettings
    from kvledger.accounting.kv_tiers import build_tier_plan
    from kvledger.dynamics.engine.offload import HostTier

    settings = (TierSettings(kv_offloading_size_gib=opt.size_gib * tp, kv_offloading_backend="native")
                if opt.kind == "cpu" else TierSettings(nvme_gib=opt.size_gib))
    plan = build_tier_plan(setup.plan, settings)
    t = plan.tier(_TIER_OF[opt.kind][1])
    if t is None:
        raise InputError(f"the plan has no {opt.kind} tier for --offload {opt.label}")
    host = HostTier(t.capacity_tokens // setup.config.block_size, plan.bytes_per_token, t.read_bytes_per_s,
                    t.write_bytes_per_s)
    return host, {"tier": t.name, "capacity_bytes": t.capacity_bytes, "capacity_tokens": t.capacity_tokens,
                  "read_bytes_per_s": t.read_bytes_per_s, "capacity_rule": t.capacity_rule,
                  "bandwidth_source": t.bandwidth_source}


class _TierProber:
    """Runs (and remembers) the candidate's workload with the tier at a request rate."""

    def __init__(self, spec: Any, cand: Any, opt: OffloadOption, slo: Any) -> None:
        from kvledger.analyses.search.screen import sim_args

        self.spec, self.cand, self.opt, self.slo = spec, cand, opt, slo
        self.args = sim_args(spec, cand)
        self.runs: dict[float, Any] = {}
        self.tier: dict[str, Any] = {}
        self.lower_bound = False

    def run_at(self, rate: float) -> Any:
        from kvledger.analyses.serving.sim_ledgers import prepare_run, run_prepared
        from kvledger.dynamics.offload_sim import offload_kv_factory

        if rate not in self.runs:
            args = replace(self.args, rate=rate)
            setup = prepare_run(args, self.spec.synthetic)
            host, self.tier = _host_tier(setup, self.cand.tp, self.opt)
            self.runs[rate] = run_prepared(setup, args, self.spec.synthetic, record_token_times=False,
                                           kv_manager_factory=offload_kv_factory(host, [])).run
        return self.runs[rate]

    def meets(self, rate: float) -> bool:
        from kvledger.ledgers.goodput import goodput

        return goodput(self.run_at(rate), self.slo).attainment >= self.spec.target


def _tier_capacity(p: _TierProber, start: float) -> float | None:
    from kvledger.ledgers.boundary import search_boundary

    if p.meets(start):
        lo, hi = start, 2.0 * start
        for _ in range(_MAX_DOUBLINGS):
            if not p.meets(hi):
                break
            lo, hi = hi, 2.0 * hi
        else:
            p.lower_bound = True  # still met after the last doubling: the capacity is at least this
            return lo
    else:  # the tier misses at the base's boundary (its loads delay TTFT): halve to a rate it meets
        lo, hi = 0.5 * start, start
        for _ in range(_MAX_DOUBLINGS):
            if p.meets(lo):
                break
            lo, hi = 0.5 * lo, lo
        else:
            return None
    res = search_boundary(p.run_at, p.slo, p.spec.target, lo, hi, tol=0.01 * lo, max_evals=12)
    return res.boundary_value


def _same_setup(a: dict[str, Any], b: dict[str, Any]) -> bool:
    keys = ("gpu_id", "kv_cache_dtype", "max_num_seqs", "max_num_batched_tokens", "enable_prefix_caching")
    return all(a.get(k) == b.get(k) for k in keys) and not b.get("prefill_replicas")


def _variant(spec: Any, e: dict[str, Any], opt: OffloadOption, prices: dict[str, float | None]) -> dict[str, Any]:
    from kvledger.analyses.search.evaluate import load_rate_req_per_s, size_for_load
    from kvledger.analyses.search.screen import price_row
    from kvledger.analyses.search.spec import Candidate
    from kvledger.ledgers.cost import HOURS_PER_MONTH, GpuRate, SelfHostSetup, capacity_from, self_host_unit_ledgers
    from kvledger.ledgers.goodput import goodput
    from kvledger.ledgers.slo import parse_slo
    from kvledger.ledgers.tier_items import KvTierBill, TierRate, tier_usd_per_month

    cand = Candidate.from_entry(e)
    kind = _TIER_OF[opt.kind][0]
    rate_row = TierRate.given(kind, opt.size_gib, prices[kind])
    bill = KvTierBill((rate_row,))
    out: dict[str, Any] = {"candidate": e["id"], "offload": opt.label, "num_gpus_per_unit": cand.num_gpus,
                           "tier_price": {"usd_per_gib_month": rate_row.usd_per_gib_month, "source": rate_row.source,
                                          "as_of": rate_row.as_of}}
    if e.get("enable_prefix_caching") is False:
        return {**out, "status": "skipped", "reason": "prefix caching off: a KV tier serves prefix hits only"}
    slo = parse_slo(spec.slo)
    p = _TierProber(spec, cand, opt, slo)
    try:
        boundary = _tier_capacity(p, e["capacity"]["boundary_rate_req_per_s"])
    except KvLedgerError as err:
        return {**out, "status": "error", "reason": "simulation error", "detail": str(err)}
    if boundary is None:
        return {**out, "status": "rejected", "reason": "with the tier the SLO is missed down to 1/64 of the "
                                                      "candidate's own boundary rate", "tier": p.tier}
    run = p.run_at(boundary)
    gp = goodput(run, slo)
    cap = capacity_from(run, gp, None)
    row = price_row(cand.gpu_id, spec.gpu_provider)
    wl = e["workload"]
    rate = load_rate_req_per_s(spec, wl["prompt_tokens_mean"], wl["output_tokens_mean"])
    tier_month = tier_usd_per_month(bill, cand.num_gpus)
    unit_month = cand.num_gpus * row.usd_per_gpu_hour * HOURS_PER_MONTH + tier_month
    sizing = None
    if rate is not None:
        replicas, realized = size_for_load(rate, cap.goodput_req_per_s, spec.max_utilization)
        sizing = {"rate_req_per_s": rate, "replicas": replicas, "num_gpus": replicas * cand.num_gpus,
                  "realized_utilization": realized, "monthly_usd": replicas * unit_month,
                  "how": f"replicas × ({cand.num_gpus} GPUs × ${row.usd_per_gpu_hour:g}/GPU-h × 730 h + tier "
                         f"${tier_month:,.2f}/month)"}
    u = spec.utilization if spec.utilization is not None else (sizing or {}).get("realized_utilization", 1.0)
    led_in, led_out = self_host_unit_ledgers(cap, SelfHostSetup(GpuRate.from_catalog(row), cand.num_gpus, u,
                                                                kv_tiers=bill))
    per_1k = unit_month / HOURS_PER_MONTH * 1000.0 / (3600.0 * cap.goodput_req_per_s)
    return {**out, "status": "feasible", "tier": p.tier, "boundary_rate_req_per_s": boundary,
            "base_boundary_rate_req_per_s": e["capacity"]["boundary_rate_req_per_s"],
            "boundary_is_lower_bound": p.lower_bound,
            "goodput_req_per_s": cap.goodput_req_per_s, "tier_usd_per_month_per_unit": tier_month,
            "cost": {"utilization": u, "usd_per_mtok_input": led_in.total_usd,
                     "usd_per_mtok_output": led_out.total_usd, "usd_per_1k_requests_at_capacity": per_1k,
                     "ledgers": {"input": led_in.to_dict(), "output": led_out.to_dict()}},
            "sizing": sizing}


def _compare(v: dict[str, Any], base: dict[str, Any], feasible: list[dict[str, Any]]) -> None:
    """Adds ``vs_more_gpus`` and ``verdict`` to a feasible variant: against the base (more replicas) and larger TPs."""
    n = base["num_gpus_per_unit"]
    rivals = [base] + [f for f in feasible if _same_setup(base, f) and f["num_gpus_per_unit"] > n]
    by_bill = v["sizing"] is not None
    vs = []
    for r in rivals:
        if by_bill:
            mine, theirs = v["sizing"]["monthly_usd"], r["sizing"]["monthly_usd"]
            what = (f"{r['id']} × {r['sizing']['replicas']} ({r['sizing']['num_gpus']} GPUs, "
                    f"${theirs:,.0f}/month) vs {v['sizing']['num_gpus']} GPUs + {v['offload']} (${mine:,.0f}/month)")
        else:
            mine, theirs = v["cost"]["usd_per_1k_requests_at_capacity"], r["cost"]["usd_per_1k_requests_at_capacity"]
            what = f"{r['id']} ${theirs:.4g} vs ${mine:.4g} per 1k requests at capacity"
        gpus = r["sizing"]["num_gpus"] if by_bill else r["num_gpus_per_unit"]
        vs.append({"id": r["id"], "more_gpus": "no tier, replicas for the load" if r is base else f"TP {r['tp']}",
                   "num_gpus": gpus, "usd": theirs, "tier_usd": mine, "tier_cheaper": mine < theirs, "text": what})
    v["vs_more_gpus"] = vs
    best = min(vs, key=lambda x: x["usd"])
    basis = "monthly bill for the load" if by_bill else "USD per 1k requests at capacity"
    mine_gpus = v["sizing"]["num_gpus"] if by_bill else v["num_gpus_per_unit"]
    v["beats_more_gpus"] = vs[0]["tier_usd"] < best["usd"] and mine_gpus < best["num_gpus"]
    v["cheaper_than_without"] = vs[0]["tier_usd"] < best["usd"]
    fmt = "{:,.0f}" if by_bill else "{:.4g}"
    v["verdict"] = (f"{v['offload']} on {v['candidate']} ({mine_gpus} GPUs + tier, ${fmt.format(vs[0]['tier_usd'])}) "
                    f"{'beats' if v['cheaper_than_without'] else 'does not beat'} the cheapest setup without a tier "
                    f"({best['id']}, {best['more_gpus']}: {best['num_gpus']} GPUs, ${fmt.format(best['usd'])}; "
                    f"{basis})"
                    + ("; the tier beats more GPUs" if v["beats_more_gpus"] else ""))


def check_prices(options: tuple[OffloadOption, ...], prices: dict[str, float | None]) -> list[OffloadOption]:
    """The tier options (none left out), each price given in range (a tier without one takes the bundled default).

    Raises:
        InputError: a price that is negative, not finite or above 10,000.
    """
    from kvledger.ledgers.tier_items import TierRate

    tiers = [o for o in options if o.kind != "none"]
    for o in tiers:
        TierRate.given(_TIER_OF[o.kind][0], o.size_gib, prices.get(_TIER_OF[o.kind][0]))
    return tiers


def offload_pass(spec: Any, entries: list[dict[str, Any]], options: tuple[OffloadOption, ...],
                 prices: dict[str, float | None]) -> list[dict[str, Any]]:
    """Tier variants of every feasible colocated entry for each tier option (none skipped), in ledger × option order.

    ``prices``: {"host": USD per GiB-month, "nvme": USD per GiB-month} (None: not given, the bundled default).

    Raises:
        InputError: a price out of range.
    """
    tiers = check_prices(options, prices)
    feasible = [e for e in entries if e.get("status") == "feasible" and not e.get("prefill_replicas")]
    out = []
    for e in feasible:
        for o in tiers:
            v = _variant(spec, e, o, prices)
            if v["status"] == "feasible":
                _compare(v, e, feasible)
            out.append(v)
    return out
