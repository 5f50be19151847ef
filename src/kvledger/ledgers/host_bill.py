"""The whole self-hosted bill per replica-month: rent or buy (capex amortized, financing), power, hosting and people.

Every default is a named constant with its source; each is overridable. Power (only when the GPUs are bought: a
rental price includes it) is the board power at the measured load times the facility's PUE:

    average board power (W) = idle + (board power − idle) × load
    kWh per GPU-month       = average board power × PUE × 730 h ÷ 1000
    USD per GPU-month       = kWh × USD/kWh

with board power the GPU catalog's TDP (``gpus.csv``; a GPU at its SLO capacity taken at TDP, an upper bound) and idle
from ``gpu_idle_power.csv``. Capex: the purchase price per GPU spread over the amortization period, with financing as
an annuity (monthly payment = P·r ÷ (1 − (1 + r)^−n), r = annual rate ÷ 12); at 0% the straight line P ÷ n.
People: engineer-months per month × USD per engineer-month, defaults set by the team-capability factor.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass
from functools import lru_cache
from importlib import resources

from kvledger.errors import InputError
from kvledger.ledgers.items import LineItem
from kvledger.ledgers.month import HOURS_PER_MONTH
from kvledger.ranges import check_options

__all__ = [
    "HostBill",
    "PeopleCost",
    "people_cost",
    "idle_power",
    "power_item",
    "capex_item",
    "hosting_item",
    "ENGINEER_MONTHS_BY_TEAM",
    "ENGINEER_USD_PER_MONTH",
    "DEFAULT_TEAM_CAPABILITY",
    "default_people_cost",
]

DEFAULT_PUE = 1.3
PUE_SOURCE = "kvledger default assumption: PUE 1.3, a typical colocation facility (hyperscale sites report ~1.1); --pue"
DEFAULT_USD_PER_KWH = 0.12
KWH_SOURCE = "kvledger default assumption: $0.12/kWh, an industrial electricity rate in the US; --usd-per-kwh"
DEFAULT_AMORTIZATION_MONTHS = 36.0
AMORTIZATION_SOURCE = "kvledger default assumption: 36 months (3-year hardware life); --amortization-months"
ENGINEER_MONTHS_BY_TEAM = {"experienced": 0.1, "some": 0.25, "none": 0.5}
"""Engineer-months per month to run one self-hosted service, by team capability: a kvledger assumption (about 2, 5 and
10 working days a month: on-call, upgrades, capacity changes, incidents), stated wherever it is used; override it."""
ENGINEER_USD_PER_MONTH = 20_000.0
"""Fully loaded cost of one engineer-month: a kvledger assumption (about $240k a year, salary plus overhead)."""
DEFAULT_TEAM_CAPABILITY = "some"
"""The team capability ``cost`` and ``report`` assume without --team-capability, and so their default people line."""
PEOPLE_SOURCE = (
    "kvledger default assumption by team capability (experienced 0.1, some 0.25, none 0.5 engineer-months "
    "per month at $20,000 fully loaded); --engineer-months-per-month / --engineer-usd-per-month"
)


@dataclass(frozen=True, slots=True)
class HostBill:
    """What owning or hosting the GPUs costs besides the rental price (USD; None = the stated default).

    Attributes:
        gpu_capex_usd: purchase price per GPU (with its share of the server); None = buying not priced.
        amortization_months: months over which the purchase is spread.
        annual_interest: financing rate per year (0 = paid in cash, straight-line).
        pue: power usage effectiveness of the facility (≥ 1).
        usd_per_kwh: electricity price.
        hosting_usd_per_gpu_month: rack space, network and support per GPU per month when bought (0 by default).
        board_power_w / idle_power_w: overrides of the catalog's TDP and the idle power.
    """

    gpu_capex_usd: float | None = None
    amortization_months: float = DEFAULT_AMORTIZATION_MONTHS
    annual_interest: float = 0.0
    pue: float = DEFAULT_PUE
    usd_per_kwh: float = DEFAULT_USD_PER_KWH
    hosting_usd_per_gpu_month: float = 0.0
    board_power_w: float | None = None
    idle_power_w: float | None = None

    def check(self) -> None:
        """Raises InputError for values outside their physical ranges (the CLI's, from ``kvledger.ranges``)."""
        check_options("cost", {"gpu_capex_usd": self.gpu_capex_usd, "amortization_months": self.amortization_months,
                               "annual_interest": self.annual_interest, "pue": self.pue,
                               "usd_per_kwh": self.usd_per_kwh,
                               "hosting_usd_per_gpu_month": self.hosting_usd_per_gpu_month,
                               "board_power_w": self.board_power_w, "idle_power_w": self.idle_power_w})

@dataclass(frozen=True, slots=True)
class PeopleCost:
    """Engineer-months per month and their price, with where each came from."""

    engineer_months_per_month: float
    engineer_usd_per_month: float
    source: str


def people_cost(team_capability: str, months: float | None, usd: float | None) -> PeopleCost:
    """The people line's inputs: the user's, else the defaults for ``team_capability`` (``ENGINEER_MONTHS_BY_TEAM``)."""
    if team_capability not in ENGINEER_MONTHS_BY_TEAM:
        raise InputError(
            f"team capability must be one of {', '.join(ENGINEER_MONTHS_BY_TEAM)}, got {team_capability!r}"
        )
    check_options("cost", {"engineer_months": months, "engineer_usd": usd},
                  {"engineer_months": "--engineer-months-per-month", "engineer_usd": "--engineer-usd-per-month"})
    given = [
        flag
        for flag, v in (("--engineer-months-per-month", months), ("--engineer-usd-per-month", usd))
        if v is not None
    ]
    m = ENGINEER_MONTHS_BY_TEAM[team_capability] if months is None else months
    u = ENGINEER_USD_PER_MONTH if usd is None else usd
    if len(given) == 2:
        src = "user input (--engineer-months-per-month, --engineer-usd-per-month)"
    elif given:
        src = f"user input ({given[0]}); the other from the {PEOPLE_SOURCE}"
    else:
        src = f"team capability {team_capability!r}: {PEOPLE_SOURCE}"
    return PeopleCost(m, u, src)


def default_people_cost() -> PeopleCost:
    """The people line ``kvledger cost`` adds without people flags: ``DEFAULT_TEAM_CAPABILITY``'s defaults."""
    return people_cost(DEFAULT_TEAM_CAPABILITY, None, None)


@lru_cache(maxsize=1)
def _idle_rows() -> dict[str, dict[str, str]]:
    text = resources.files("kvledger.catalog").joinpath("data", "gpu_idle_power.csv").read_text(encoding="utf-8")
    return {r["gpu_id"]: r for r in csv.DictReader(text.splitlines())}


def idle_power(gpu_id: str, tdp_w: float) -> tuple[float, str]:
    """(idle W, source): the GPU's row in ``gpu_idle_power.csv``, else the first row's idle share of ``tdp_w``."""
    rows = _idle_rows()
    if gpu_id in rows:
        r = rows[gpu_id]
        return float(r["idle_w"]), f"gpu_idle_power.csv {gpu_id} ({r['confidence']} confidence); {r['source']}"
    ref = next(iter(rows.values()))
    share = float(ref["idle_w"]) / float(ref["tdp_w"])
    return tdp_w * share, (
        f"{share:.1%} of board power, the idle share of gpu_idle_power.csv {ref['gpu_id']} "
        f"({ref['confidence']} confidence): no measurement for {gpu_id}"
    )


def power_item(
    num_gpus: int, board_w: float, idle_w: float, load: float, pue: float, usd_per_kwh: float, source: str
) -> LineItem:
    """Electricity for ``num_gpus`` GPUs for one month at ``load`` (share of capacity in use, [0, 1])."""
    avg_w = idle_w + (board_w - idle_w) * load
    kwh = num_gpus * avg_w * pue * HOURS_PER_MONTH / 1000.0
    return LineItem(
        "power (bought GPUs)",
        "kWh",
        kwh,
        usd_per_kwh,
        source,
        "assumption",
        f"{num_gpus} GPU × ({idle_w:,.0f} W idle + ({board_w:,.0f} − {idle_w:,.0f}) W × load {load:.3f}) "
        f"× PUE {pue:g} × 730 h ÷ 1000",
    )


def capex_item(num_gpus: int, bill: HostBill) -> LineItem:
    """The purchase of ``num_gpus`` GPUs as a monthly payment over the amortization period (annuity when financed)."""
    price, n, r = bill.gpu_capex_usd or 0.0, bill.amortization_months, bill.annual_interest / 12.0
    per_month = price / n if r == 0 else price * r / (1.0 - (1.0 + r) ** -n)
    how = (
        f"${price:,.0f} per GPU ÷ {n:g} months"
        if r == 0
        else f"${price:,.0f} per GPU financed at {bill.annual_interest:.1%} a year over {n:g} months (annuity)"
    )
    return LineItem(
        "GPU purchase, amortized",
        "GPU-month",
        float(num_gpus),
        per_month,
        f"user input (--gpu-capex-usd); {AMORTIZATION_SOURCE}",
        "user input",
        how,
    )


def hosting_item(num_gpus: int, bill: HostBill) -> LineItem:
    """Rack space, network and support for bought GPUs."""
    return LineItem(
        "hosting (rack, network, support)",
        "GPU-month",
        float(num_gpus),
        bill.hosting_usd_per_gpu_month,
        "user input (--hosting-usd-per-gpu-month); default 0",
        "user input",
        "" if bill.hosting_usd_per_gpu_month else "not given: colocation typically bills per rack or kW",
    )
