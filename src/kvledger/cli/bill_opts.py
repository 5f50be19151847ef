"""The whole-bill and volume flags ``kvledger cost`` and ``kvledger report`` share (bought GPUs, power, people, volume),
read by ``analyses.serving.cost_request.CostBill`` into ``HostBill``, ``PeopleCost`` and ``MonthlyVolume``. Every
default is the named constant of ``kvledger.ledgers.host_bill`` (its source printed wherever it is used)."""

from __future__ import annotations

from typing import Annotated

import typer

from kvledger.ledgers.volume_rate import volume_option

__all__ = ["ONE_GPU_PRICE_HELP"]

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
        "--monthly-tokens", parser=volume_option("--monthly-tokens", positive=True),
        help="volume: tokens per month, input and output together (split as in the run); 3B, 3e9 or "
        "3_000_000_000 (K, M, B, T: powers of 1000), or a rate: 100M/day (× 30.42 days: 730 h ÷ 24), 4M/hour (× 730).",
        show_default=False,
    ),
]
MonthlyRequests = Annotated[
    float | None,
    typer.Option("--monthly-requests", parser=volume_option("--monthly-requests", positive=True),
                 help="volume: requests per month (3M, 3e6; K, M, B, T: powers of 1000; or 100K/day, 4K/hour, 20/s).",
                 show_default=False),
]
MonthlyIn = Annotated[
    float | None,
    typer.Option(
        "--monthly-input-tokens", parser=volume_option("--monthly-input-tokens"),
        help="volume: input tokens per month (with --monthly-output-tokens; or a rate: 80M/day, 3M/hour).",
        show_default=False,
    ),
]
MonthlyOut = Annotated[
    float | None,
    typer.Option("--monthly-output-tokens", parser=volume_option("--monthly-output-tokens"),
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
