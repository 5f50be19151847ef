"""What ``kvledger cost`` and ``kvledger.cost`` ask :func:`cost_compute.compute_cost`, every input declared and already
checked by the caller (``cli.cost_boundary``): the run's source (FILEs or a simulation), the prices and SLO read,
the whole bill, and the decision factors."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from kvledger.ledgers.host_bill import DEFAULT_TEAM_CAPABILITY

__all__ = ["CostRequest", "CostPrices", "CostBill", "FileSource", "SimSource", "BILL_KEYS"]

#: the bought-GPU bill's inputs (``ledgers.host_bill.HostBill``'s fields)
BILL_KEYS = ("gpu_capex_usd", "amortization_months", "annual_interest", "pue", "usd_per_kwh",
             "hosting_usd_per_gpu_month", "board_power_w", "idle_power_w")


@dataclass(frozen=True)
class FileSource:
    """Measured runs: the files (a benchmark output or a records file; several, a rate sweep), the reader, which run
    (``run_index``: ``--run``), the GPU count and the served model when given (``--num-gpus``, ``--model``)."""

    files: tuple[Path, ...]
    format: str | None = None
    run_index: int | None = None
    num_gpus: int | None = None
    served_model: str | None = None


@dataclass(frozen=True)
class SimSource:
    """A simulation: the model, its request (``sim_setup.SimRequestArgs``) and synthetic workload (None: a trace), and
    how it is priced — at the workload's own load, or at the SLO capacity a search finds (then with the host KV tier
    in GiB per GPU when ``host_tier_gib``); ``seeds``: searches, one per seed."""

    model: str
    args: Any
    synthetic: Any
    at_offered_load: bool = False
    host_tier_gib: float | None = None
    seeds: int = 1


@dataclass(frozen=True)
class CostPrices:
    """The SLO and prices read (``slo``: ``ledgers.slo.SLO``; ``api_price``: the ``--api`` row or None; ``gpu_rate``:
    the GPU's price row when the GPU was known before the run, else None; ``usd``: ``--gpu-usd-per-hour`` read), the
    GPU and its provider, utilization and sizing, and the API mix."""

    slo: Any
    api_price: Any = None
    gpu_rate: Any = None
    usd: float | dict[str, float] | None = None
    gpu: str | None = None
    gpu_provider: str | None = None
    instance: str | None = None
    utilization: float | None = None
    max_utilization: float = 0.8
    prefill_share: float | None = None
    batch_share: float = 0.0
    cache_hit_rate: float = 0.0
    cache_write_rate: float = 0.0


@dataclass(frozen=True)
class CostBill:
    """People, the monthly volume, a bought GPU's bill and the KV tiers' line items, as ``cost``'s flags give them."""

    engineer_months: float | None = None
    engineer_usd: float | None = None
    monthly_tokens: float | None = None
    peak_to_mean: float = 1.0
    monthly_requests: float | None = None
    monthly_input_tokens: float | None = None
    monthly_output_tokens: float | None = None
    gpu_capex_usd: float | None = None
    amortization_months: float = 36.0
    annual_interest: float = 0.0
    pue: float = 1.3
    usd_per_kwh: float = 0.12
    hosting_usd_per_gpu_month: float = 0.0
    board_power_w: float | None = None
    idle_power_w: float | None = None
    kv_tier_host: str | None = None
    kv_tier_nvme: str | None = None
    host_memory_usd_per_gib_month: float | None = None
    nvme_usd_per_gib_month: float | None = None

    def host_bill(self) -> Any:
        """``HostBill`` of the bought-GPU inputs (``BILL_KEYS``)."""
        from kvledger.ledgers.host_bill import HostBill

        return HostBill(**{k: getattr(self, k) for k in BILL_KEYS})

    def people(self, team_capability: str) -> Any:
        """PeopleCost: the engineer figures given, else the defaults for ``team_capability``."""
        from kvledger.ledgers.host_bill import people_cost

        return people_cost(team_capability, self.engineer_months, self.engineer_usd)

    def volume(self) -> Any:
        """MonthlyVolume, or None when no volume was given."""
        from kvledger.ledgers.decision import MonthlyVolume

        given = (self.monthly_requests, self.monthly_input_tokens, self.monthly_output_tokens, self.monthly_tokens)
        return None if all(v is None for v in given) else MonthlyVolume(*given, self.peak_to_mean or 1.0)

    def kv_tiers(self) -> Any:
        """KvTierBill of the host and NVMe tiers and their prices; None when no tier is given.

        Raises:
            InputError: a price without its tier, a price out of range, or an unreadable size (a tier without its
                price takes the bundled row, ``catalog/tier_prices.py``).
        """
        from kvledger.errors import InputError
        from kvledger.ledgers.tier_items import KvTierBill, TierRate
        from kvledger.units import parse_tier_gib

        tiers = []
        for kind, size, price_key in (("host", self.kv_tier_host, "host_memory_usd_per_gib_month"),
                                      ("nvme", self.kv_tier_nvme, "nvme_usd_per_gib_month")):
            price = getattr(self, price_key)
            if size is None:
                if price is not None:
                    raise InputError(f"--{price_key.replace('_', '-')} prices a {kind} KV tier: give its size with "
                                     f"--kv-tier-{kind}")
                continue
            tiers.append(TierRate.given(kind, parse_tier_gib(size, what="--kv-tier-" + kind), price))
        return KvTierBill(tuple(tiers)) if tiers else None


@dataclass(frozen=True)
class CostRequest:
    """One cost question: the run (``source``: measured files or a simulation), the prices, the bill, the decision
    factors (``data_sovereignty``, ``model_control``, ``team_capability``: ``ledgers.cost_summary.DecisionFactors``'s
    words) and the attainment target (``target``: the capacity search's, or the sweep's capacity run's; None: 0.9)."""

    source: FileSource | SimSource
    prices: CostPrices
    bill: CostBill = CostBill()
    data_sovereignty: str = "not_required"
    model_control: str = "any"
    team_capability: str = DEFAULT_TEAM_CAPABILITY
    target: float | None = None
