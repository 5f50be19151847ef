"""The whole-bill and volume flags ``kvledger cost`` and ``kvledger report`` share (bought GPUs, power, people, volume),
and their translation into ``HostBill``, ``PeopleCost`` and ``MonthlyVolume``. Every default is the named constant of
``kvledger.ledgers.host_bill`` (its source printed wherever it is used)."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from kvledger.units import count_option

__all__ = ["host_bill", "people", "volume", "kv_tiers", "BILL_KEYS", "ONE_GPU_PRICE_HELP"]

#: ``--gpu-usd-per-hour`` of a command that prices one GPU (cost, report, offload; search's prices each of its GPUs)
ONE_GPU_PRICE_HELP = ("Your own price, USD per GPU-hour (overrides the table): one number, or GPU=PRICE pairs "
                      "(H100=2.49,A100-80GB=1.29; catalog names or aliases) of which the priced GPU's (--gpu's) is "
                      "taken; a list without it is refused.")
_B = "[bought GPUs] "
GpuCapex = Annotated[
    float | None,
    typer.Option(
        "--gpu-capex-usd",
        help=_B
        + "purchase price per GPU (with its share of the server), USD: adds a bought-GPU bill beside the rented one.",
        show_default=False,
    ),
]
Amortization = Annotated[
    float, typer.Option("--amortization-months", help=_B + "months the purchase is spread over (default 36).")
]
Interest = Annotated[
    float,
    typer.Option("--annual-interest", help=_B + "financing rate per year, e.g. 0.08 (default 0: cash, straight line)."),
]
Pue = Annotated[
    float, typer.Option("--pue", help=_B + "facility power ÷ IT power (default 1.3, a colocation assumption).")
]
UsdPerKwh = Annotated[
    float, typer.Option("--usd-per-kwh", help=_B + "electricity price (default $0.12/kWh, an assumption).")
]
Hosting = Annotated[
    float, typer.Option("--hosting-usd-per-gpu-month", help=_B + "rack, network and support per GPU-month (default 0).")
]
BoardPower = Annotated[
    float | None,
    typer.Option(
        "--board-power-w",
        help=_B + "board power per GPU at capacity, W (default: the GPU catalog's TDP).",
        show_default=False,
    ),
]
IdlePower = Annotated[
    float | None,
    typer.Option(
        "--idle-power-w", help=_B + "idle power per GPU, W (default: gpu_idle_power.csv).", show_default=False
    ),
]
EngMonths = Annotated[
    float | None,
    typer.Option(
        "--engineer-months-per-month",
        help="people time to run the service (default by --team-capability: experienced 0.1, some 0.25, none 0.5).",
        show_default=False,
    ),
]
EngUsd = Annotated[
    float | None,
    typer.Option(
        "--engineer-usd-per-month",
        help="fully loaded cost of one engineer-month, USD (default $20,000, an assumption).",
        show_default=False,
    ),
]
MonthlyTokens = Annotated[
    float | None,
    typer.Option(
        "--monthly-tokens", parser=count_option("--monthly-tokens", positive=True),
        help="volume: tokens per month, input and output together (split as in the run); 3B, 3e9 or "
        "3_000_000_000 (K, M, B, T: powers of 1000).",
        show_default=False,
    ),
]
MonthlyRequests = Annotated[
    float | None,
    typer.Option("--monthly-requests", parser=count_option("--monthly-requests", positive=True),
                 help="volume: requests per month (3M, 3e6; K, M, B, T: powers of 1000).", show_default=False),
]
MonthlyIn = Annotated[
    float | None,
    typer.Option(
        "--monthly-input-tokens", parser=count_option("--monthly-input-tokens"),
        help="volume: input tokens per month (with --monthly-output-tokens).",
        show_default=False,
    ),
]
MonthlyOut = Annotated[
    float | None,
    typer.Option("--monthly-output-tokens", parser=count_option("--monthly-output-tokens"),
                 help="volume: output tokens per month.", show_default=False),
]

PeakToMean = Annotated[
    float,
    typer.Option(
        "--peak-to-mean",
        help="volume: the busiest hour's rate ÷ the month's mean (diurnal traffic); replicas are sized for the peak "
        "(default 1: flat).",
    ),
]

BILL_KEYS = (
    "gpu_capex_usd",
    "amortization_months",
    "annual_interest",
    "pue",
    "usd_per_kwh",
    "hosting_usd_per_gpu_month",
    "board_power_w",
    "idle_power_w",
)


_T = "[KV tier] "
TierHost = Annotated[str | None, typer.Option("--kv-tier-host", help=_T + "host memory held for the KV offload tier, "
                                              "GiB per GPU (256 or 256GiB): a line item priced by "
                                              "--host-memory-usd-per-gib-month.", show_default=False)]
TierNvme = Annotated[str | None, typer.Option("--kv-tier-nvme", help=_T + "NVMe held for the KV tier, GiB per GPU "
                                              "(1TiB): a line item priced by --nvme-usd-per-gib-month.",
                                              show_default=False)]
HostMemPrice = Annotated[float | None, typer.Option("--host-memory-usd-per-gib-month", help=_T + "your host-memory "
                                                    "price, USD per GiB-month (default: the cheapest dated row of "
                                                    "tier_prices.csv, named in the item).",
                                                    show_default=False)]
NvmePrice = Annotated[float | None, typer.Option("--nvme-usd-per-gib-month", help=_T + "your NVMe price, USD per "
                                                 "GiB-month (default: tier_prices.csv's dated row, named in the "
                                                 "item).", show_default=False)]


def kv_tiers(p: dict[str, Any]) -> Any:
    """KvTierBill from ``--kv-tier-host/--kv-tier-nvme`` and their prices; None when no tier is given.

    Raises:
        InputError: a price without its tier, a price out of range, or an unreadable size (a tier without its price
            takes the bundled row, ``catalog/tier_prices.py``).
    """
    from kvledger.cli.analysis_opts import gib_option
    from kvledger.errors import InputError
    from kvledger.ledgers.tier_items import KvTierBill, TierRate

    tiers = []
    for kind, size_key, price_key in (("host", "kv_tier_host", "host_memory_usd_per_gib_month"),
                                      ("nvme", "kv_tier_nvme", "nvme_usd_per_gib_month")):
        size = gib_option(p.get(size_key), "--kv-tier-" + kind)
        if size is None:
            if p.get(price_key) is not None:
                raise InputError(f"--{price_key.replace('_', '-')} prices a {kind} KV tier: give its size with "
                                 f"--kv-tier-{kind}")
            continue
        tiers.append(TierRate.given(kind, size, p.get(price_key)))
    return KvTierBill(tuple(tiers)) if tiers else None


def host_bill(p: dict[str, Any]) -> Any:
    """HostBill from the command's parameters (``BILL_KEYS``)."""
    from kvledger.ledgers.host_bill import HostBill

    return HostBill(**{k: p[k] for k in BILL_KEYS})


def people(p: dict[str, Any]) -> Any:
    """PeopleCost: the user's engineer figures, else the defaults for ``--team-capability``."""
    from kvledger.ledgers.host_bill import people_cost

    return people_cost(p["team_capability"], p["engineer_months"], p["engineer_usd"])


def volume(p: dict[str, Any]) -> Any:
    """MonthlyVolume, or None when no volume flag was given."""
    from kvledger.ledgers.decision import MonthlyVolume

    keys = ("monthly_requests", "monthly_input_tokens", "monthly_output_tokens", "monthly_tokens")
    if all(p.get(k) is None for k in keys):
        return None
    return MonthlyVolume(
        p.get("monthly_requests"),
        p.get("monthly_input_tokens"),
        p.get("monthly_output_tokens"),
        p.get("monthly_tokens"),
        p.get("peak_to_mean") or 1.0,
    )
