"""``cost --simulate --seeds N``: the SLO capacity searched once per seed, each priced by the same ledger, and the cost
per million tokens' range over the seeds.

The capacity near the knee moves with the seeded draw of arrivals (and lengths): ``seed_spread.capacity_spread``
(what ``goodput --simulate --target --seeds`` reports). The cost per token is GPU time over the goodput at that
capacity, so it moves with it; the answer (which side is cheaper) can flip. Each further seed is the whole
``search_capacity`` with only ``seed`` changed, priced by the caller's own pricing of the first seed
(``cost_run.cost_payload``: one ledger, no second rule), one seed after the other. The first seed's ledger stays the
reported one; this adds, per seed, the capacity, the goodput, the self-hosted USD per 1M input and output tokens and
the cheaper side, and their min–max. Where the capacity bound (``work_bounds``) caps a seed's capacity found, that seed
is sized and priced on the bound (``SimCapacity.sizing_req_per_s``): the summary then gives the range found and,
apart, the range sized on with the seeds the bound caps. The cheaper side is the verdict's own: with a volume, the
monthly bills' (``decision.verdict``); without, one good request's cost against the API's (the basis of
``capacity_bands.cost_band``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from kvledger.analyses.serving.seed_spread import CapacitySpread, capacity_spread, seed_range_text, value_spread

__all__ = ["CostSeedSpread", "cost_seed_spread", "cheaper_side", "COST_KEYS"]

#: the priced figures whose range over the seeds is reported: key → where it is in the cost payload
COST_KEYS = {"usd_per_mtok_input": ("totals", "self_host_usd_per_mtok_input"),
             "usd_per_mtok_output": ("totals", "self_host_usd_per_mtok_output"),
             "goodput_req_per_s": ("capacity", "goodput_req_per_s")}


def cheaper_side(payload: dict[str, Any]) -> str | None:
    """``"self-host"`` or ``"api"``: the verdict's basis (module doc); None when the payload compares no API."""
    d = payload.get("decision")
    if d is not None:
        return "self-host" if d["verdict"] == "self-host" else "api"
    sh, api = payload["inputs"].get("self_host_usd_per_request"), payload["inputs"].get("api_usd_per_request")
    if sh is None or api is None:
        return None
    return "self-host" if sh < api else "api"


@dataclass(frozen=True)
class CostSeedSpread:
    """The capacity and the priced figures per seed (module doc).

    Attributes:
        capacity: the capacity searches' spread (``seed_spread.CapacitySpread``: each seed's SLO capacity, req/s).
        per_seed: ``{"seed", "slo_capacity_req_per_s", "sizing_req_per_s", "goodput_req_per_s", "usd_per_mtok_input",
            "usd_per_mtok_output", "cheaper"}`` per seed, in seed order: the SLO capacity the seed's search found, the
            offered rate it is sized and priced on (the capacity bound where that caps it), req/s; USD per 1M tokens,
            self-hosted.
        metrics: :data:`COST_KEYS` → ``{"min", "max", "n_seeds"}``.
        flips: the cheaper side is not the same for every seed; note: the words for it (None when it holds).
        capped_seeds: the seeds whose capacity found the capacity bound caps (sized on the bound), in order.
    """

    capacity: CapacitySpread
    per_seed: list[dict[str, Any]]
    metrics: dict[str, dict[str, Any]]
    flips: bool
    note: str | None
    capped_seeds: tuple[int, ...] = ()

    @property
    def sized(self) -> dict[str, Any]:
        """``{"min", "max", "n_seeds"}`` of the capacity each seed is sized and priced on, req/s."""
        return value_spread([r["sizing_req_per_s"] for r in self.per_seed])

    def to_dict(self) -> dict[str, Any]:
        """JSON: ``slo_capacity_req_per_s`` is the range found, ``sizing_req_per_s`` the range sized and priced on (the
        same where the bound caps no seed), ``capped_by_bound_seeds`` the seeds the bound caps (empty where none)."""
        return {"seeds": list(self.capacity.seeds), "seed_free": self.capacity.seed_free,
                "slo_capacity_req_per_s": self.capacity.metrics["boundary_value"], "sizing_req_per_s": self.sized,
                "capped_by_bound_seeds": list(self.capped_seeds), **self.metrics,
                "per_seed": self.per_seed, "verdict_flips": self.flips, "note": self.note}

    def text(self) -> str:
        """``over seeds 0–2: SLO capacity 18.5–20.25 req/s; self-hosted $0.52–$0.57 per 1M output tokens, …``."""
        if self.capacity.seed_free:
            return f"over {self.capacity.label}: the same — the workload draws nothing from the seed"
        c, i, o = self.capacity.metrics["boundary_value"], self.metrics["usd_per_mtok_input"], \
            self.metrics["usd_per_mtok_output"]
        return (f"over {self.capacity.label} (min–max; the ledger above is seed {self.capacity.seeds[0]}'s): SLO "
                f"capacity {'found ' if self.capped_seeds else ''}{c['min']:g}–{c['max']:g} req/s"
                f"{self._sized_text()}; self-hosted ${i['min']:.4f}–${i['max']:.4f} per 1M input "
                f"and ${o['min']:.4f}–${o['max']:.4f} per 1M output tokens")


    def _sized_text(self) -> str:
        """``, sized on 59.99 req/s (the capacity bound caps seeds 0–2; …)`` where the bound caps a seed, else ""."""
        if not self.capped_seeds:
            return ""
        s, n = self.sized, len(self.capped_seeds)
        value = f"{s['min']:,.4g}" if s["min"] == s["max"] else f"{s['min']:,.4g}–{s['max']:,.4g}"
        which = "every seed" if n == len(self.per_seed) else \
            f"seed{'s' if n > 1 else ''} {', '.join(str(x) for x in self.capped_seeds)}"
        return (f", sized and priced on {value} req/s (the capacity bound caps {which}: a replica cannot keep pace "
                "with more by the roofline work of the probe's requests, kvledger.analyses.serving.work_bounds"
                + ("" if n == len(self.per_seed) else "; the others on the rate found") + ")")


def cost_seed_spread(first_cap: Any, first_payload: dict[str, Any], seeds: Sequence[int],
                     price_seed: Callable[[int], tuple[Any, dict[str, Any]]] | None) -> CostSeedSpread:
    """The spread over ``seeds``: ``first_cap`` (``sim_capacity.SimCapacity``) and ``first_payload`` are the first
    seed's search and ledger; ``price_seed(seed)`` searches and prices each other seed, in order, returning the same
    pair (None: the workload draws nothing from the seed, so the first stands for every seed)."""
    priced = [(first_cap, first_payload)] + [(first_cap, first_payload) if price_seed is None else price_seed(s)
                                              for s in seeds[1:]]
    caps = dict(zip(seeds, (cap.search for cap, _ in priced)))
    spread = capacity_spread(first_cap.search, seeds, None if price_seed is None else caps.__getitem__)
    rows = []
    for seed, (cap, payload) in zip(seeds, priced):
        row: dict[str, Any] = {"seed": seed, "slo_capacity_req_per_s": cap.rate_req_per_s,
                               "sizing_req_per_s": cap.sizing_req_per_s}  # the rate found; what is priced
        row.update({k: payload[a][b] for k, (a, b) in COST_KEYS.items()})
        rows.append({**row, "cheaper": cheaper_side(payload)})
    metrics = {k: value_spread([r[k] for r in rows]) for k in COST_KEYS}
    sides = {r["cheaper"] for r in rows if r["cheaper"] is not None}
    flips = len(sides) > 1
    note = None
    if flips:
        which = "; ".join(f"seed {r['seed']}: {'self-hosting' if r['cheaper'] == 'self-host' else 'the API'} "
                          f"(capacity {r['sizing_req_per_s']:g} req/s)" for r in rows)
        note = (f"the verdict FLIPS across {seed_range_text(list(seeds))} — {which}: the cheaper side depends on the "
                "seeded draw of arrivals (and lengths) at the SLO capacity, so the simulation cannot settle it at "
                "this many requests per probe; more requests per probe (--num-requests) narrow the draw, or measure "
                "the capacity (kvledger calibrate --scope gpu, then validate)")
    capped = tuple(seed for seed, (cap, _) in zip(seeds, priced) if cap.sizing_req_per_s != cap.rate_req_per_s)
    return CostSeedSpread(spread, rows, metrics, flips, note, capped)
