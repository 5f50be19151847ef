"""The search's offload axis (``--offload none,cpu:256GiB,disk:1TiB``, GiB per replica: summed over its GPUs, as vLLM's
``--kv-offloading-size`` is summed over the TP ranks): its options, their prices, and
the pass that adds each colocated candidate again with each tier as a candidate of its own
(``tier_entries.py``; the tier in the simulator: ``tier_probe.py``), to be ranked with the rest.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvledger.analyses.search.reasons import SLO_NOT_MET
from kvledger.analyses.search.tier_probe import TIER_OF
from kvledger.errors import InputError

__all__ = ["OffloadOption", "parse_offload", "check_sizes", "check_prices", "offload_pass", "offload_summary",
           "split_variant"]


@dataclass(frozen=True)
class OffloadOption:
    """One point of the axis: ``kind`` "none", "cpu" or "disk", ``size_gib`` GiB per replica, summed over its GPUs
    (vLLM ``--kv-offloading-size``'s meaning: "the total buffer size summed across all TP ranks", vllm/config/cache.py;
    None for none)."""

    kind: str
    size_gib: float | None = None

    def gib_per_gpu(self, num_gpus: int) -> float:
        """The tier's GiB on each of a replica's ``num_gpus`` GPUs (its size split evenly, as vLLM splits it)."""
        return (self.size_gib or 0.0) / num_gpus

    def sizes_text(self, num_gpus: int) -> str:
        """``cpu:64GiB = 64 GiB host memory per replica, 16 GiB per GPU at 4 GPUs``: both figures, in words."""
        what = "host memory" if self.kind == "cpu" else "NVMe"
        per_gpu, gpus = self.gib_per_gpu(num_gpus), f"{num_gpus} GPU{'' if num_gpus == 1 else 's'}"
        return (f"{self.label} = {self.size_gib:,.4g} GiB {what} per replica, {per_gpu:,.4g} GiB per GPU at {gpus} "
                "per replica")

    @property
    def label(self) -> str:
        return "none" if self.kind == "none" else f"{self.kind}:{self.size_gib:g}GiB"


def parse_offload(text: str | None) -> tuple[OffloadOption, ...]:
    """``none,cpu:256GiB,disk:1TiB`` → options (a bare number is GiB); None or empty → (none,).

    Raises:
        InputError: an unknown kind, a missing or unreadable size, a size ≤ 0.
    """
    from kvledger.units import parse_tier_gib

    if not text or not text.strip():
        return (OffloadOption("none"),)
    out = []
    for part in (p.strip() for p in text.split(",") if p.strip()):
        kind, _, size = part.partition(":")
        kind = kind.strip().lower()
        if kind == "none" and not size:
            out.append(OffloadOption("none"))
            continue
        if kind not in TIER_OF or not size.strip():
            raise InputError(f"--offload takes none, cpu:SIZE or disk:SIZE (e.g. none,cpu:256GiB,disk:1TiB), got "
                             f"{part!r}")
        gib = parse_tier_gib(size.strip(), what=f"--offload {part!r}")
        if gib <= 0:
            raise InputError(f"--offload {part!r}: the size must be positive")
        out.append(OffloadOption(kind, gib))
    return tuple(dict.fromkeys(out))


def check_sizes(options: tuple[OffloadOption, ...], gpus: tuple[str, ...],
                tps: tuple[int, ...]) -> tuple[OffloadOption, ...]:
    """``options``, once none is a tier no node holds on a replica of any GPU in ``gpus`` (() → 8 GPUs a node) at
    any TP in ``tps`` (() → TP 1, where the whole size is on one node), before the search (``accounting.tier_bounds``).

    Raises:
        InputError: the first tier beyond a node's host memory or NVMe, with the figures.
    """
    from kvledger.accounting.tier_bounds import refuse_beyond_a_node
    from kvledger.catalog.gpu_file import resolve_gpu

    specs = [resolve_gpu(g) for g in gpus] or [None]
    for o in (o for o in options if o.kind != "none"):
        for gpu in specs:
            for tp in sorted(tps) or [1]:
                refuse_beyond_a_node(f"--offload {o.label} (per replica) at TP {tp}", TIER_OF[o.kind][0],
                                     o.gib_per_gpu(tp), gpu, tp)
    return options


def split_variant(text: str) -> tuple[str, Any]:
    """(the base candidate's id or table name, its tier option or None) of a name ``--show-command`` takes: an id
    ``…:kv-auto:offload-cpu-256GiB`` or a table name ``h100_sxm tp2 auto + cpu:256GiB``.

    Raises:
        InputError: a tier part ``parse_offload`` refuses.
    """
    import re

    m = (re.fullmatch(r"(.+):offload-(cpu|disk)-(\S+)", text.strip(), flags=re.IGNORECASE)
         or re.fullmatch(r"(.+?)\s*\+\s*(cpu|disk)\s*:\s*(\S+)", text.strip(), flags=re.IGNORECASE))
    if m is None:
        return text, None
    return m.group(1), parse_offload(f"{m.group(2)}:{m.group(3)}")[0]


def check_prices(options: tuple[OffloadOption, ...], prices: dict[str, float | None]) -> list[OffloadOption]:
    """The tier options (none left out), each price given in range (a tier without one takes the bundled default).

    Raises:
        InputError: a price that is negative, not finite or above 10,000.
    """
    from kvledger.ledgers.tier_items import TierRate

    tiers = [o for o in options if o.kind != "none"]
    for o in tiers:
        TierRate.given(TIER_OF[o.kind][0], o.size_gib, prices.get(TIER_OF[o.kind][0]))
    return tiers


def offload_pass(spec: Any, entries: list[dict[str, Any]], options: tuple[OffloadOption, ...],
                 prices: dict[str, float | None]) -> list[dict[str, Any]]:
    """The tier variants (``tier_entries.variant_entry``) of every colocated entry that is feasible or met the SLO at
    no rate, for each tier option (none skipped), in ledger × option order; each feasible one with its verdict
    against more GPUs (``tier_entries.compare``).

    ``prices``: {"host": USD per GiB-month, "nvme": USD per GiB-month} (None: not given, the bundled default).
    Candidates rejected for max_model_len are not tried: vLLM sizes its GPU pool for one request of max_model_len
    at start-up (``check_enough_kv_cache_memory``) whatever connector is configured, and a request's KV is in HBM
    while it runs, so a tier does not make them start.
    Candidates met only within their runs' noise (``reasons.SLO_WITHIN_NOISE``) are not tried either: a tier's rate
    search has no near-idle check, so it would answer the rate the bisection settled on in that noise. Nor are vLLM's
    DP ranks (``data_parallel_size``): their lock-step simulation serves from each rank's GPU pool only.

    Raises:
        InputError: a price out of range.
    """
    from kvledger.analyses.search.tier_entries import compare, variant_entry

    tiers = check_prices(options, prices)
    colocated = [e for e in entries if not e.get("prefill_replicas") and "offload" not in e
                 and not e.get("data_parallel_size")]  # DP ranks: simulated without host tiers (sim_dp.py)
    feasible = [e for e in colocated if e.get("status") == "feasible"]
    bases = [e for e in colocated if e.get("status") == "feasible" or (
        e.get("reason") == SLO_NOT_MET and (e.get("capacity") or {}).get("probes"))]
    out = []
    for e in bases:
        for o in tiers:
            v = variant_entry(spec, e, o, prices)
            if v["status"] == "feasible":
                compare(v, e, feasible)
            out.append(v)
    return out


def offload_summary(variants: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``--json``'s ``offload``: per variant its id, base, tier, status (and reason), capacity with and without the
    tier, and its verdict against more GPUs (the whole entry is among the ``candidates``)."""
    out = []
    for v in variants:
        off = v["offload"]
        row = {"id": v["id"], "base": off["base"], "offload": off["label"], "status": v["status"],
               "reason": v.get("reason"), "tier_price": off["tier_price"],
               "tier_usd_per_month_per_unit": off["tier_usd_per_month_per_unit"]}
        if v["status"] == "feasible":
            row.update({"slo_capacity_req_per_s": v["capacity"]["slo_capacity_req_per_s"],
                        "goodput_req_per_s": v["capacity"]["goodput_req_per_s"], "sizing": v["sizing"],
                        **{k: off[k] for k in ("vs_more_gpus", "beats_more_gpus", "cheaper_than_without", "verdict")}})
        out.append(row)
    return out
