"""``kvledger cost``'s flags as three groups (``flag_groups.with_groups``): the SLO, the API row and the GPU's price
and the API mix (:class:`CostFlags`); the whole bill, volume and KV-tier flags it shares with ``report``
(:class:`CostBillFlags`, typed by ``bill_opts``); the decision factors, the FILE's run and the outputs
(:class:`CostMoreFlags`)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kvledger.cli import bill_opts as bo
from kvledger.cli.flag_groups import flag
from kvledger.ledgers.host_bill import DEFAULT_TEAM_CAPABILITY

__all__ = ["CostFlags", "CostBillFlags", "CostMoreFlags"]


@dataclass(frozen=True, slots=True)
class CostFlags:
    """The SLO, the API row, the GPU and its price, the FILE's GPU count and model, sizing, and the API mix."""

    slo: str | None = flag("--slo", help="SLOs with units, e.g. 'ttft=200ms,tpot=50ms' (required)")
    api: str | None = flag("--api", help=(
        "API price row: MODEL or PROVIDER:MODEL, e.g. 'OpenAI:gpt-4.1' (default: every catalog row serving the "
        "same model; kvledger prices lists them)"))
    utilization: float | None = flag("--utilization", help=(
        "without a monthly volume: average load ÷ the capacity priced over the billed hours, (0, 1], one replica "
        "(default: --max-utilization); refused with a volume, whose realized utilization is priced"))
    gpu: str | None = flag("--gpu", help=(
        "FILE: GPU id or name for the price table, e.g. nvidia_h100_sxm (default: the GPU the file names). "
        "--simulate: the GPU to simulate (catalog name such as H100, or a GPU file), priced by its catalog id"))
    gpu_provider: str | None = flag("--gpu-provider", help="rental provider, e.g. Nebius, AWS, CoreWeave")
    instance: str | None = flag("--instance", help="instance type when a provider lists several")
    gpu_usd_per_hour: str | None = flag("--gpu-usd-per-hour", help=bo.ONE_GPU_PRICE_HELP)
    num_gpus: int | None = flag("--num-gpus", help="FILE: GPUs serving the measured run (default: as the file states)")
    served_model: str | None = flag("--model", help=(
        "FILE: the served model (bundled name or config.json) for the roofline floor under the prefill share "
        "(default: the model the file names)"))
    max_utilization: float = flag("--max-utilization", default=0.8, help=(
        "highest average utilization per replica when sizing for a monthly volume"))
    prefill_share: float | None = flag("--prefill-share", help=(
        "share of GPU time charged to input tokens (default: --simulate, each step split by the step-cost model's "
        "terms; FILE, Σ TTFT ÷ Σ E2E raised to the prompts' roofline FLOP floor)"))
    batch_share: float = flag("--batch-share", default=0.0, help=(
        "share of requests sent through the API's batch endpoint"))
    cache_hit_rate: float = flag("--cache-hit-rate", default=0.0, help=(
        "share of API input tokens that are prompt-cache reads"))
    cache_write_rate: float = flag("--cache-write-rate", default=0.0, help=(
        "share of API input tokens written to the prompt cache"))


@dataclass(frozen=True, slots=True)
class CostBillFlags:
    """People, volume, a bought GPU's bill and the KV tiers' line items (``bill_opts`` declares each flag)."""

    engineer_months: bo.EngMonths = None
    engineer_usd: bo.EngUsd = None
    monthly_tokens: bo.MonthlyTokens = None
    peak_to_mean: bo.PeakToMean = 1.0
    monthly_requests: bo.MonthlyRequests = None
    monthly_input_tokens: bo.MonthlyIn = None
    monthly_output_tokens: bo.MonthlyOut = None
    gpu_capex_usd: bo.GpuCapex = None
    amortization_months: bo.Amortization = 36.0
    annual_interest: bo.Interest = 0.0
    pue: bo.Pue = 1.3
    usd_per_kwh: bo.UsdPerKwh = 0.12
    hosting_usd_per_gpu_month: bo.Hosting = 0.0
    board_power_w: bo.BoardPower = None
    idle_power_w: bo.IdlePower = None
    kv_tier_host: bo.TierHost = None
    kv_tier_nvme: bo.TierNvme = None
    host_memory_usd_per_gib_month: bo.HostMemPrice = None
    nvme_usd_per_gib_month: bo.NvmePrice = None


@dataclass(frozen=True, slots=True)
class CostMoreFlags:
    """The decision factors, which run of a FILE, how a simulation is priced, and the JSON outputs."""

    data_sovereignty: str = flag("--data-sovereignty", default="not_required", help=(
        "required, preferred or not_required"))
    model_control: str = flag("--model-control", default="any", help="custom_weights, open_weights or any")
    team_capability: str = flag("--team-capability", default=DEFAULT_TEAM_CAPABILITY, help="experienced, some or none")
    run_index: int | None = flag("--run", help=(
        "FILE: which run of a multi-run file or of several FILEs (0-based; default: the run at the sweep's SLO "
        "capacity)"))
    format: str | None = flag("--format", help="FILE: force a reader instead of auto-detection")
    at_offered_load: bool = flag("--at-offered-load", default=False, help=(
        "[--simulate] price the simulated run at the workload's own load (the trace's rate, or "
        "--rate/--concurrency) instead of at the SLO capacity found by search"))
    target: float | None = flag("--target", help=(
        "attainment target of the capacity search (--simulate) or of the sweep's capacity run (several runs): the "
        "share of requests within the SLO at the capacity priced (default 0.9)"))
    json_out: bool = flag("--json", default=False, help=(
        "JSON for scripts: line items and totals per 1M input and output tokens"))
    out: Path | None = flag("--out", help="also write the JSON to this file (refuses to overwrite without --force)")
    force: bool = flag("--force", default=False, help="allow --out to overwrite an existing file")
    seeds: int = flag("--seeds", default=1, help=(
        "[--simulate] search the SLO capacity once per seed, --seed to --seed+N−1 (1 to 64; about N times the time), "
        "each priced by the same ledger: the cost per 1M tokens' range over them, and a note when the verdict flips; "
        "the ledger shown is the first seed's"))
