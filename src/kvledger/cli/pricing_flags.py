"""The pricing flag group (what self-hosting costs and the API mix it is compared with), declared as the other
groups of ``flag_groups.py`` are; apart from them so that ``simulate`` does not make it."""

from __future__ import annotations

from dataclasses import dataclass

from kvledger.cli.flag_groups import flag

__all__ = ["PricingFlags"]


@dataclass(frozen=True, slots=True)
class PricingFlags:
    """What self-hosting costs (GPU price row, utilization) and the API mix it is compared with (the people and the
    whole bill: ``cli/bill_opts.py``)."""

    gpu_provider: str | None = flag("--gpu-provider", help=(
        "Rental provider, e.g. Nebius, AWS, CoreWeave (default: the cheapest row listed for the GPU, stated "
        "in the output)."))
    instance: str | None = flag("--instance", help="Instance type when a provider lists several.")
    gpu_usd_per_hour: str | None = flag("--gpu-usd-per-hour", help=(
        "Your own price, USD per GPU-hour (overrides the table): one number for every GPU (2.49), or a price per "
        "GPU, H100=2.49,A100-80GB=1.29 (catalog names or aliases; a searched GPU left out keeps the table's price, "
        "a GPU file needs one)."))
    utilization: float | None = flag("--utilization", help=(
        "Average load ÷ the capacity priced over the billed hours, (0, 1]."))
    max_utilization: float | None = flag("--max-utilization", default=0.8, help=(
        "Highest average utilization per replica, as a share of its SLO capacity, when sizing for a volume."))
    batch_share: float | None = flag("--batch-share", default=0.0, help=(
        "Share of requests sent through the API's batch endpoint."))
    cache_hit_rate: float | None = flag("--cache-hit-rate", default=0.0, help=(
        "Share of API input tokens that are prompt-cache reads."))
    cache_write_rate: float | None = flag("--cache-write-rate", default=0.0, help=(
        "Share of API input tokens written to the prompt cache."))
