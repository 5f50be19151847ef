"""KV tiers below HBM for one plan: each tier's capacity (tokens, blocks), bandwidth, and the prefix length from which
loading a cached prefix beats recomputing it (the break-even, derived on the roofline as the FP8-KV break-even is).

A request whose first ``N`` prompt tokens sit in a tier and whose last ``S`` are new (``S`` ≥ 1: the engine always
computes the last token) reaches its first token after

    recompute:  T(N + S | 0)                      (prefill of the whole prompt)
    load, vLLM: N·b / BW_tier + T(S | N)          (the connector's load ends before the request is scheduled)
    load, SGLang HiCache: max(N·b / BW_tier, T(S | N))   (load_back runs layer by layer beside the forward pass)

with ``T(n | c)`` the prefill step of ``n`` new tokens after ``c`` cached ones (``Plan.step_cost``'s roofline, or the
step cost a simulating command passes: ``TierPlan.priced_by``), ``b`` the
KV bytes per token per GPU and ``BW_tier`` the tier's read bandwidth into HBM. Below the roofline's ridge a prefill
step is weight-bound, so recomputing a short prefix costs almost nothing and loading it loses; the break-even is the
smallest ``N`` from which loading stays faster, found by a geometric scan and integer bisection.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

from kvledger.accounting.kv_tier_rules import (
    LMCACHE_CHUNK_TOKENS,
    TierSettings,
    check_tier_settings,
    rules_version,
    sglang_host_tokens,
    vllm_host_tokens,
)
from kvledger.accounting.plan import Plan
from kvledger.accounting.stepcost import StepShape
from kvledger.accounting.tier_bounds import check_tier_bounds
from kvledger.catalog.gpus import require_link_bytes_per_s
from kvledger.catalog.layers import MLAAttention
from kvledger.catalog.modelspec import state_layers
from kvledger.jsonable import to_jsonable

__all__ = ["Tier", "TierBreakEven", "TierPlan", "build_tier_plan", "prefill_s", "load_s", "PLAN_ROOFLINE",
           "HICACHE_LOAD_BACK_THRESHOLD_TOKENS"]

HICACHE_LOAD_BACK_THRESHOLD_TOKENS = 10
"""SGLang 0.5.23 unified_radix_cache.py load_back_threshold: HiCache loads no host prefix shorter than this, tokens
(the simulator's ``dynamics.engine.hicache_host.LOAD_BACK_THRESHOLD``); a HiCache break-even starts there."""

PLAN_ROOFLINE = ("the plan's roofline alone (no host term; `plan`, `simulate` and `offload` price these steps with "
                 "the engine's)")
"""The break-evens' default step cost in words: the memory plan's roofline, as its roofline table prices a step. Every
command passes simulate's step cost instead (``plan``: ``plan_pricing.simulate_priced_tiers``), so they print one
break-even; this default stays for the hand-worked arithmetic and a plan the engine cannot start."""


@dataclass(frozen=True)
class Tier:
    """One KV tier per GPU.

    Attributes:
        name: "hbm", "host_dram", "nvme", "remote". medium: what it is, in words.
        capacity_bytes: bytes for KV per GPU, B (vLLM's host tier: the flag's size ÷ the engine's ranks, the flag
            being their sum). capacity_tokens / capacity_blocks: tokens and engine blocks the tier holds per GPU.
        unit_tokens: tokens per stored unit (vLLM block, LMCache chunk, SGLang page), tokens.
        read_bytes_per_s / write_bytes_per_s: into / out of HBM, achievable, B/s.
        capacity_rule / bandwidth_source: where the figures come from.
        unit_name: what the tier stores in units of ``unit_tokens``: "block", "chunk" (LMCache's host and disk
            tiers) or "page" (SGLang); ``capacity_tokens // unit_tokens`` of them.
        num_ranks: the engine's ranks (TP × PP), each with such a tier. total_capacity_bytes: capacity_bytes ×
            num_ranks, the replica's whole tier, B (vLLM's host tier: the flag's size).
    """

    name: str
    medium: str
    capacity_bytes: float
    capacity_tokens: int
    capacity_blocks: int
    unit_tokens: int
    read_bytes_per_s: float
    write_bytes_per_s: float
    capacity_rule: str
    bandwidth_source: str
    unit_name: str = "block"
    num_ranks: int = 1
    total_capacity_bytes: float = 0.0


@dataclass(frozen=True)
class TierBreakEven:
    """Loading vs recomputing a prefix from one tier.

    Attributes:
        tier: the tier's name. rule: "sequential" (vLLM) or "overlapped" (SGLang HiCache load_back).
        suffix_tokens: new tokens after the prefix, tokens.
        break_even_tokens: smallest prefix from which loading stays faster, tokens; None when never below max.
        kind: "always", "above" or "never". max_tokens: the scan's end (max_model_len), tokens.
        load_s_per_1k / recompute_s_per_1k: at a 1,024-token prefix, s.
        load_s_at_max / recompute_s_at_max: at the scan's end, s.
    """

    tier: str
    rule: str
    suffix_tokens: int
    break_even_tokens: int | None
    kind: str
    max_tokens: int
    load_s_per_1k: float
    recompute_s_per_1k: float
    load_s_at_max: float
    recompute_s_at_max: float


@dataclass(frozen=True)
class TierPlan:
    """The tiers and their break-evens; ``to_dict`` is the ``kv_tiers`` block of ``plan --json``."""

    engine: str
    settings: dict[str, Any]
    bytes_per_token: float
    tiers: tuple[Tier, ...]
    break_even: tuple[TierBreakEven, ...]
    notes: tuple[str, ...]
    priced_by: str = PLAN_ROOFLINE
    """What priced the prefill steps of the break-evens (``build_tier_plan``'s ``step_cost``)."""

    def tier(self, name: str) -> Tier | None:
        return next((t for t in self.tiers if t.name == name), None)

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


def prefill_s(rc, new_tokens: int, cached_tokens: int) -> float:
    """Time of one step prefilling ``new_tokens`` after ``cached_tokens`` cached ones on ``rc``, s."""
    n, c = new_tokens, cached_tokens
    return rc.step_time_s(StepShape(n, 1, c + n, n * c + n * (n + 1) / 2, 0, 0))


def load_s(num_tokens: int, bytes_per_token: float, read_bytes_per_s: float) -> float:
    """Time to bring ``num_tokens`` of KV into HBM at the tier's read bandwidth, s.

    Raises:
        InputError: a read bandwidth that is not > 0.
    """
    if not read_bytes_per_s > 0:
        from kvledger.errors import InputError

        raise InputError(f"a KV tier's read bandwidth must be > 0, got {read_bytes_per_s!r} B/s")
    return num_tokens * bytes_per_token / read_bytes_per_s


def _gain(rc, n: int, s: int, b: float, bw: float, overlapped: bool) -> tuple[float, float, float]:
    """(recompute s − load s, load-path s, recompute s) of an ``n``-token prefix with ``s`` new tokens."""
    rec = prefill_s(rc, n + s, 0)
    t_load, t_rest = load_s(n, b, bw), prefill_s(rc, s, n)
    path = max(t_load, t_rest) if overlapped else t_load + t_rest
    return rec - path, path, rec


def tier_break_even(rc, tier: Tier, b: float, suffix: int, max_tokens: int, overlapped: bool) -> TierBreakEven:
    """Smallest prefix from which loading from ``tier`` stays faster than recomputing (module doc)."""
    n_grid = 96
    grid = sorted({max(1, min(max_tokens, round(max_tokens ** (i / (n_grid - 1))))) for i in range(n_grid)})
    bw = tier.read_bytes_per_s
    gains = [_gain(rc, n, suffix, b, bw, overlapped)[0] for n in grid]
    rule = "overlapped" if overlapped else "sequential"
    _, l1k, r1k = _gain(rc, 1024, suffix, b, bw, overlapped)
    _, lmax, rmax = _gain(rc, max_tokens, suffix, b, bw, overlapped)
    args = (tier.name, rule, suffix)
    tail = (max_tokens, l1k, r1k, lmax, rmax)
    if gains[-1] <= 0:
        return TierBreakEven(*args, None, "never", *tail)
    losing = [i for i, g in enumerate(gains) if g <= 0]
    floor = HICACHE_LOAD_BACK_THRESHOLD_TOKENS if overlapped else 1  # HiCache loads no shorter prefix
    if not losing:
        return TierBreakEven(*args, floor, "always", *tail)
    lo, hi = grid[losing[-1]], grid[losing[-1] + 1]
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _gain(rc, mid, suffix, b, bw, overlapped)[0] > 0:
            hi = mid
        else:
            lo = mid
    return TierBreakEven(*args, max(hi, floor), "above", *tail)


def _host_link(plan: Plan, t: TierSettings) -> tuple[float, str]:
    """(achievable per-direction host link bandwidth, its source) from the GPU catalog's bidirectional figure."""
    g = plan.gpu
    per_dir = g.host_link_bytes_per_s / 2
    src = (f"{g.name} host link {g.host_link_bytes_per_s / 1e9:g} GB/s bidirectional "
           f"({g.host_link_source or 'GPU catalog'}) ÷ 2 per direction × {t.link_fraction:g} achievable = "
           f"{per_dir * t.link_fraction / 1e9:.1f} GB/s")
    return per_dir * t.link_fraction, src


def _host_tier(plan: Plan, t: TierSettings, link: float, link_src: str) -> Tier | None:
    m, s = plan.memory, plan.settings
    bpt = m.bytes_per_block / m.block_size
    if s.engine == "vllm" and t.kv_offloading_size_gib is not None:
        backend = t.kv_offloading_backend or "native"
        mla = bool(plan.kv.groups) and all(isinstance(g.spec, MLAAttention) for g in plan.kv.groups)
        tokens, unit, rule = vllm_host_tokens(t.kv_offloading_size_gib, backend, rules_version(s.engine_version),
                                              m.bytes_per_block, m.block_size, s.tp * s.pp,
                                              replicated_mla=mla and s.tp > 1 and s.pp == 1)
        medium = "host DRAM (vLLM OffloadingConnector, LRU)" if backend == "native" else "host DRAM (LMCache local_cpu)"
        host_bytes = t.kv_offloading_size_gib * 2**30 / (s.tp * s.pp)  # the flag is the ranks' sum: one rank's share
    elif s.engine == "sglang" and t.enable_hierarchical_cache:
        tokens, rule = sglang_host_tokens(t, m.usable_blocks * m.block_size, bpt, m.block_size)
        unit, medium = m.block_size, f"host DRAM (SGLang HiCache, {t.write_policy})"
        host_bytes = tokens * bpt  # one host pool per rank
    else:
        return None
    if tokens < unit:
        from kvledger.accounting.kv_tier_notes import refuse_empty_host_tier

        refuse_empty_host_tier(plan, t, unit, bpt, _unit_name(plan, t))
    return Tier("host_dram", medium, host_bytes, tokens, tokens // m.block_size, unit, link, link, rule, link_src,
                _unit_name(plan, t))


def _unit_name(plan: Plan, t: TierSettings) -> str:
    """What the tiers below HBM store: LMCache's chunks (host and disk alike), SGLang's pages, vLLM's blocks."""
    if plan.settings.engine == "sglang":
        return "page"
    return "chunk" if t.kv_offloading_backend == "lmcache" else "block"


def _disk_tiers(plan: Plan, t: TierSettings, link: float) -> list[Tier]:
    m = plan.memory
    bpt = m.bytes_per_block / m.block_size
    out = []
    for name, gib, rd, wr, what in (
            ("nvme", t.nvme_gib, t.nvme_read_bytes_per_s, t.nvme_write_bytes_per_s, "local NVMe"),
            ("remote", t.remote_gib, t.network_bytes_per_s, t.network_bytes_per_s, "remote store over the network")):
        if gib is None:
            continue
        unit = _unit_name(plan, t)
        per = LMCACHE_CHUNK_TOKENS if unit == "chunk" else m.block_size  # LMCache's disk files are its chunks
        tokens = int(gib * 2**30 // bpt) // per * per  # whole stored units
        src = (f"{what}: {rd / 1e9:g} GB/s read, {wr / 1e9:g} GB/s write (assumption; flags override), "
               f"through the host link (the smaller of the two)")
        rule = f"{gib:g} × 2^30 B // {bpt:,.0f} B/token" + (f" = {tokens // per:,} chunks of {per} tokens"
                                                             if unit == "chunk" else "")
        out.append(Tier(name, what, gib * 2**30, tokens, tokens // m.block_size, per, min(rd, link),
                        min(wr, link), rule, src, unit))
    return out


def build_tier_plan(plan: Plan, tiers: TierSettings, *, suffix_tokens: int = 1, step_cost: Any = None,
                    priced_by: str = PLAN_ROOFLINE) -> TierPlan:
    """The tier table and break-evens for ``plan`` (module doc), the prefill steps priced by ``step_cost`` (a
    StepCostModel, ``priced_by`` its name in words; None: the plan's roofline).

    Raises:
        InputError: tier settings the engine refuses or ignores, a model it cannot offload, suffix < 1.
    """
    from kvledger.errors import InputError

    s = plan.settings
    check_tier_settings(tiers, s.engine, s.engine_version, bool(state_layers(plan.model)))
    check_tier_bounds(tiers, plan.gpu, s.tp, s.pp)  # the commands check first; a caller that did not is checked here
    if isinstance(suffix_tokens, bool) or not isinstance(suffix_tokens, int) or suffix_tokens < 1:
        raise InputError(f"--suffix-tokens must be a whole number ≥ 1 (the engine always computes the last prompt "
                         f"token), got {suffix_tokens!r}")
    m = plan.memory
    bpt = m.bytes_per_block / m.block_size
    link, link_src = _host_link(plan, tiers)
    hbm_tokens = m.usable_blocks * m.block_size
    out = [Tier("hbm", f"{plan.gpu.name} HBM (the engine's KV pool)", m.usable_blocks * m.bytes_per_block,
                hbm_tokens, m.usable_blocks, m.block_size, plan.gpu.hbm_bandwidth_bytes_per_s,
                plan.gpu.hbm_bandwidth_bytes_per_s, "usable blocks × block_size (the memory plan)", "GPU catalog",
                "page" if s.engine == "sglang" else "block")]
    host = _host_tier(plan, tiers, link, link_src)
    if host is not None:
        out.append(host)
    out += _disk_tiers(plan, tiers, link)
    ranks = s.tp * s.pp
    out = [replace(x, num_ranks=ranks, total_capacity_bytes=x.capacity_bytes * ranks) for x in out]
    if len(out) > 1:
        require_link_bytes_per_s(plan.gpu, "host", "a KV tier below HBM (offloading)")
    rc = plan.step_cost() if step_cost is None else step_cost
    overlapped = s.engine == "sglang"
    max_tokens = max(2, m.max_model_len - suffix_tokens)
    be = tuple(tier_break_even(rc, t, bpt, suffix_tokens, max_tokens, overlapped) for t in out if t.name != "hbm")
    from kvledger.accounting.kv_tier_notes import tier_notes

    priced_by = PLAN_ROOFLINE if step_cost is None else priced_by
    return TierPlan(s.engine, tiers.echo(), bpt, tuple(out), be, tuple(tier_notes(plan, tiers, out, priced_by)),
                    priced_by)
