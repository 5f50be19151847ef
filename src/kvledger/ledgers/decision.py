"""The build-or-buy decision, volume first: monthly volume → replicas at the allowed peak utilization → both bills.

From a monthly volume (requests, or input and output tokens), one replica's SLO capacity at goodput g (good req/s) and
the highest average utilization allowed per replica u_max:

    replicas n = max(1, ⌈volume rate ÷ (g × u_max)⌉)      (one replica is billed even at 0.5% load)
    realized utilization = volume rate ÷ (n × g)
    self-hosted bill = n × (rental, or amortized purchase + power + hosting) + people
    API bill = Σ tokens × effective price (after batch and prompt-cache discounts), per API row

The verdict is the cheaper bill for that volume; then the break-even volume and utilization (``breakeven``). How
robust it is: the capacity and GPU-price multipliers at which it would flip, against the band the capacity is known to,
and the decision redone at both ends of that band (``BandEnd``: g × band_low and g × band_high → replicas, realized
utilization, the bill). The self-hosted bill never rises with the capacity (fewer or as many replicas, each less
loaded), so the verdict holds across the whole band exactly when it is the same at both ends.

A capacity that is only a lower bound (``capacity_lower_bound``: an under-loaded run, its goodput the offered load) has
a band with no upper end: the decision is redone at its low end only. A self-host verdict then holds if it holds there
(a higher capacity only lowers the self-hosted bill); an API verdict holds only when no capacity, however high, flips it
(one replica and the people already cost more than the API), for nothing bounds how much higher the capacity is.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from kvledger.catalog.prices import ApiPrice
from kvledger.errors import InputError
from kvledger.jsonable import to_jsonable
from kvledger.ledgers.amounts import usd_text
from kvledger.ledgers.api_cost import ApiMix, api_ledger, bill_is_upper_bound, cache_read_bounds, tie_order
from kvledger.ledgers.cost import Capacity, SelfHostSetup
from kvledger.ledgers.host_bill import HostBill
from kvledger.ledgers.instances import Packing
from kvledger.ledgers.items import Ledger
from kvledger.ledgers.self_host_month import BandEnd, GpuPower, band_end, monthly_self_host, replicas_for, size_volume
from kvledger.ledgers.volume import MonthlyVolume, Volume, resolve_volume

if TYPE_CHECKING:
    from kvledger.ledgers.api_cost import CacheReadBounds

__all__ = [
    "MonthlyVolume",
    "Volume",
    "GpuPower",
    "ApiOption",
    "Decision",
    "BandEnd",
    "resolve_volume",
    "monthly_self_host",
    "api_options",
    "decide",
    "flip_points",
]


@dataclass(slots=True)
class ApiOption:
    """One API row priced for the volume: its monthly bill and whether it serves the same model."""

    __json__ = (("key", "price.key"), "same_model", "named", "confidence", ("as_of", "price.as_of"),
                ("usd_per_month", "bill.total_usd"), "bill")
    price: ApiPrice
    same_model: bool
    named: bool
    bill: Ledger
    bounds: CacheReadBounds | None = None  # an "at most" bill's lower end and slope in the cached-input price

    @property
    def confidence(self) -> str:
        """The price row's confidence, "unstated" when blank."""
        return self.price.confidence or "unstated"

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


def api_options(rows: list[tuple[ApiPrice, bool, bool]], mix: ApiMix, vol: Volume) -> tuple[list[ApiOption], list[str]]:
    """Each (row, same_model, named) priced for ``vol`` under ``mix``, cheapest first (on a tie, the higher-confidence
    row: ``api_cost.tie_order``), with the mix's notes: a row with no batch API bills its batch share on demand, one
    with no cached-input price its cache reads as ordinary input (an upper bound); none is left out."""
    out, notes = [], []
    for price, same, named in rows:
        notes += [n for n in mix.check(price) if n not in notes]
        bill = api_ledger(price, mix, vol.input_tokens / 1e6, vol.output_tokens / 1e6,
                          f"API bill per month, {price.key}", "USD per month")
        bounds = cache_read_bounds(price, mix, vol.input_tokens / 1e6, vol.output_tokens / 1e6)
        out.append(ApiOption(price, same, named, bill, bounds))
    out.sort(key=lambda a: (a.bill.total_usd, *tie_order(a.price)))
    return out, notes


def flip_points(
    vol: Volume, cap_req_per_s: float, setup: SelfHostSetup, self_host_usd: float, api_usd: float, fixed_usd: float
) -> dict[str, Any]:
    """The capacity and GPU-price multipliers at which the verdict would flip (None: no such multiplier).

    With B(n) = n replicas' rental on whole instances (``breakeven.rental_usd_per_month``: a staircase where an
    instance holds several replicas) + what does not scale with them (people: ``fixed_usd``; the rest of
    ``self_host_usd`` at today's n), A = the API bill and n(k) = the replicas at capacity × k: API cheaper now →
    self-hosting wins once n(k) ≤ n*, the most replicas with B(n*) < A, reached at k = rate ÷ (C × u_max × n*), C the
    SLO capacity; self-hosting cheaper now → it loses once n(k) reaches n', the fewest with B(n') ≥ A, at capacities
    below rate ÷ (C × u_max × (n' − 1)). B is non-decreasing in n (each packing's bill is), so both are found by
    bisection. The GPU-price multiplier m solves m × (B(n) − fixed) + fixed = A.
    """
    from kvledger.ledgers.breakeven import rental_curve

    n = replicas_for(vol.peak_rate_req_per_s, cap_req_per_s, setup.max_utilization)
    rent_now = self_host_usd - fixed_usd
    out: dict[str, Any] = {"mean_unit_rental_usd_per_month": rent_now / n, "people_usd_per_month": fixed_usd}
    if rent_now <= 0:
        return {**out, "capacity_multiplier": None, "gpu_price_multiplier": None}
    m = (api_usd - fixed_usd) / rent_now
    out["gpu_price_multiplier"] = m if m > 0 else None
    rental = rental_curve(setup)  # the staircase read once for the whole bisection
    other = self_host_usd - rental(n)  # people and whatever else does not scale with n

    def bill(k: int) -> float:
        return rental(k) + other

    per = cap_req_per_s * setup.max_utilization
    if self_host_usd >= api_usd:  # the most replicas (< n) still cheaper than the API
        lo, hi = 0, n - 1  # invariant: bill(lo) < A or lo = 0
        while lo < hi:
            mid = (lo + hi + 1) // 2
            lo, hi = (mid, hi) if bill(mid) < api_usd else (lo, mid - 1)
        out["capacity_multiplier"] = None if lo < 1 else vol.peak_rate_req_per_s / (per * lo)
        return out
    hi = n + 1  # the fewest replicas (> n) at least as dear as the API
    while bill(hi) < api_usd:
        if hi > 100_000:
            return {**out, "capacity_multiplier": None}
        hi *= 2
    lo = n  # invariant: bill(lo) < A ≤ bill(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if bill(mid) < api_usd else (lo, mid)
    out["capacity_multiplier"] = vol.peak_rate_req_per_s / (per * (hi - 1))
    return out


@dataclass(slots=True)
class Decision:
    """The answer for one volume: both bills, the verdict, and what it rests on (``__json__`` is its JSON)."""

    __json__ = (("requests_per_month", "volume.requests"), ("input_tokens_per_month", "volume.input_tokens"),
                ("output_tokens_per_month", "volume.output_tokens"), ("volume_how", "volume.how"), "replicas",
                "realized_utilization", "max_utilization", "verdict", ("self_host_usd_per_month", "self_host_usd"),
                ("api_usd_per_month", "primary.bill.total_usd"), ("api", "primary.price.key"),
                ("api_usd_per_month_is_upper_bound", "api_upper_bound"),
                ("api_usd_per_month_lower_bound", "api_lower_usd"),
                ("self_host_cheaper_unless_cached_input_usd_per_mtok_below", "cached_price_break_even"),
                ("self_host_rent", "self_host"), ("self_host_buy", "buy"), ("api_options", "apis"), "flips",
                "capacity_band", ("capacity_band_low", "band_low"), ("capacity_band_high", "band_high"),
                "band_source", "holds_within_band", "holds_across_capacity", "band_ends", "capacity_lower_bound",
                "rests_on", "notes", "sizing",
                ("instances", "packing.instances"), ("gpus_per_instance", "packing.gpus_per_instance"),
                ("idle_gpus", "packing.idle_gpus"), ("instance_type", "packing.instance_type"),
                ("instance_choice", "packing.instance_choice"))
    volume: Volume
    replicas: int
    realized_utilization: float
    max_utilization: float
    self_host: Ledger
    buy: Ledger | None
    apis: list[ApiOption]
    primary: ApiOption
    verdict: str
    flips: dict[str, Any]
    capacity_band: float
    band_source: str
    rests_on: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    band_sides: tuple[float, float] | None = None  # (fraction below, fraction above) when asymmetric
    band_ends: tuple[BandEnd, ...] | None = None  # the decision at capacity × band_low and × band_high (or low only)
    sizing: str = ""  # replicas = ⌈peak ÷ (capacity × max utilization)⌉ with its figures (decide)
    packing: Packing | None = None  # the replicas on whole instances, the cheapest mix of rows (ledgers/instances.py)
    capacity_lower_bound: bool = False  # the capacity is only bounded below (module docstring): band_high is None

    @property
    def band_low(self) -> float:  # the lowest capacity multiplier inside the band, e.g. 0.69 for ×0.69–×1.06
        return 1 - (self.band_sides or (self.capacity_band,) * 2)[0]

    @property
    def band_high(self) -> float | None:  # the highest, e.g. 1.06; None: no upper end (capacity_lower_bound)
        return None if self.capacity_lower_bound else 1 + (self.band_sides or (self.capacity_band,) * 2)[1]

    @property
    def api_upper_bound(self) -> bool:
        """The API bill is only an upper bound (cache reads at input price: ``api_cost.bill_is_upper_bound``)."""
        return bill_is_upper_bound(self.primary.bill)

    @property
    def api_lower_usd(self) -> float | None:
        """An "at most" API bill's lower end, its cache reads free (USD/month); None when the bill is exact."""
        return None if self.primary.bounds is None else self.primary.bounds.lower_usd

    @property
    def cached_price_break_even(self) -> float | None:
        """A self-host verdict against an "at most" API bill that the bill's lower end (cache reads free) beats: the
        cached-input price, USD/Mtok, below which the API is cheaper (``CacheReadBounds.cached_price_below``); None
        when the verdict does not rest on it (an exact bill, an API verdict, or self-host cheaper than both ends)."""
        b = self.primary.bounds
        return None if b is None or self.verdict != "self-host" else b.cached_price_below(self.self_host_usd)

    @property
    def self_host_usd(self) -> float:
        return min(self.self_host.total_usd, self.buy.total_usd) if self.buy is not None else self.self_host.total_usd

    def holds_within_band(self) -> bool:
        """True when neither a capacity error inside the band (``holds_across_capacity``) nor the cached-input price of
        an "at most" API bill (``cached_price_break_even``) can flip the verdict."""
        return self.cached_price_break_even is None and self.holds_across_capacity()

    def holds_across_capacity(self) -> bool:
        """True when no capacity inside the band (×band_low–×band_high) flips the verdict: the verdict is the same at
        both ends (the bill is monotone in the capacity: the module docstring), else the flip multiplier lies
        outside. A capacity only bounded below: the low end's verdict for self-host, no flip at any capacity for the
        API (module docstring)."""
        if self.capacity_lower_bound:
            if self.verdict == "API":
                return self.flips.get("capacity_multiplier") is None
            return all(e.verdict == self.verdict for e in self.band_ends or ())
        if self.band_ends is not None:
            return all(e.verdict == self.verdict for e in self.band_ends)
        k = self.flips.get("capacity_multiplier")
        if k is None:
            return True
        return not self.band_low <= k <= self.band_high

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


def decide(
    cap: Capacity,
    setup: SelfHostSetup,
    vol: Volume,
    apis: list[ApiOption],
    *,
    buy: HostBill | None = None,
    power: GpuPower | None = None,
    people_source: str = "user input",
    capacity_band: float = 0.3,
    band_source: str = "",
    rests_on: list[str] | None = None,
    band_sides: tuple[float, float] | None = None,
) -> Decision:
    """The decision for ``vol``: replicas, realized utilization, bills (rent, and buy when priced), the verdict against
    the primary API row (the one the user named, else the cheapest) and the flip points; a capacity only bounded below
    (``cap.lower_bound``) has a band with no upper end (module docstring)."""
    if not apis:
        raise InputError("no API row to compare with: name one with --api (kvledger prices lists them)")
    c = cap.sizing_req_per_s  # the SLO capacity, offered req/s (a measured file: its goodput; Capacity)
    sized = size_volume(cap, setup, vol, buy=buy, power=power, people_source=people_source)
    n, load, packing, setup, rent, bought = (sized.replicas, sized.load, sized.packing, sized.setup, sized.rent,
                                             sized.bought)
    primary = next((a for a in apis if a.named), apis[0])
    rests = _billed_row_caveat(list(rests_on or []), *(r for r, _ in packing.rows))
    sh = min(rent.total_usd, bought.total_usd) if bought is not None else rent.total_usd
    verdict = "self-host" if sh < primary.bill.total_usd else "API"
    if primary.price.confidence != "high":
        text = f"API price row {primary.price.key}: {primary.price.confidence or 'unstated'} confidence"
        sure = next((a for a in apis if a.price.confidence == "high"), None)
        if sure is not None:
            same = ("self-host" if sh < sure.bill.total_usd else "API") == verdict
            text += (f"; against the cheapest high-confidence row ({sure.price.key}, "
                     f"{usd_text(sure.bill.total_usd)}/month) the verdict {'is the same' if same else 'FLIPS'}")
        rests.insert(0, text)
    people = setup.engineer_months_per_month * setup.engineer_usd_per_month
    api_usd = _api_to_beat(primary, sh, verdict)
    flips = flip_points(vol, c, setup, sh, api_usd, people)
    d = Decision(vol, n, load, setup.max_utilization, rent, bought, apis, primary, verdict, flips, capacity_band,
                 band_source, rests, band_sides=band_sides, packing=packing,
                 capacity_lower_bound=cap.lower_bound)
    d.sizing = sized.how
    if d.cached_price_break_even is not None:  # no cached-input price listed: the verdict rests on the real one
        d.rests_on.insert(0, f"the API's cached-input price: {primary.price.key} lists none, so its cache reads are "
                             f"billed as ordinary input; self-host is cheaper unless it is below "
                             f"${d.cached_price_break_even:,.4g}/Mtok (with cache reads free the API costs "
                             f"{usd_text(d.api_lower_usd)}/month)")
    d.band_ends = tuple(band_end(k, c, setup, vol, api_usd, buy=buy, power=power,
                                 people_source=people_source) for k in (d.band_low, d.band_high) if k is not None)
    return d


def _api_to_beat(primary: ApiOption, sh: float, verdict: str) -> float:
    """The API bill the flip points and the band's ends are found against: an "at most" bill's lower end (cache reads
    free) where self-hosting beats even that, so that a flip is found at the worst cached-input price; else the bill."""
    b = primary.bounds
    return b.lower_usd if b is not None and verdict == "self-host" and sh < b.lower_usd else primary.bill.total_usd


def _billed_row_caveat(rests: list[str], *billed: Any) -> list[str]:
    """``rests`` led by the GPU price-row caveat of each row the replicas are billed on (the packing, known only here:
    a mix of instance sizes rents several): none for a row of high confidence or a price the user gave."""
    return [f"GPU price row: {r.confidence} confidence ({r.label})" for r in billed
            if r.confidence not in ("high", "user input")] + rests
