"""Options shared by the analysis commands (fp8-kv, spec-decode, kv-eviction): load the model and GPU and build the
plan settings."""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import typer

from kvledger.cli.flag_groups import EngineFlags, GroupUse, flag, flag_like, option
from kvledger.report.tables import table  # noqa: F401  (re-exported: the views live in kvledger.report)

__all__ = ["list_items", "load_target", "parse_token_list", "table", "MODEL_ARG", "GPU_OPT", "TP_OPT", "MAX_LEN_OPT",
           "UTIL_OPT", "AVAIL_OPT", "BLOCK_OPT", "VERSION_OPT", "BW_OPT", "FLOPS_OPT", "JSON_OPT", "gib_option",
           "GPU_PROFILE_OPT", "GEMM_OPT", "EAGER_OPT", "WDDM_OPT", "pricing_flags", "TargetFlags", "TARGET"]

MODEL_ARG = typer.Argument(..., help="Bundled model (HF id or alias; see `kvledger models`), a config.json path or "
                                     "folder, or a Hub id.")
GPU_OPT = typer.Option(..., "--gpu", help="Catalog GPU (see `kvledger gpus`) or a .json/.toml GPU file.")
TP_OPT = option(EngineFlags, "tp", 1, help="Tensor-parallel degree.")
MAX_LEN_OPT = option(EngineFlags, "max_model_len",
                     help="Tokens (8192; 8K = 8,192, 8k = 8,000 as vLLM reads them); default: from the config.")
UTIL_OPT = option(EngineFlags, "gpu_memory_utilization", help="vLLM fraction of the device total (default by version).")
AVAIL_OPT = typer.Option(None, "--available-kv-memory", help="Your engine's printed 'Available KV cache memory' (e.g. "
                                                             "11.47GiB; a bare number is GiB).")
BLOCK_OPT = option(EngineFlags, "block_size", help="Tokens per KV block (default 16).")
VERSION_OPT = option(EngineFlags, "engine_version", help="vLLM version whose rules to apply (default: newest read).")
BW_OPT = option(EngineFlags, "achievable_bandwidth_fraction", also=("--bandwidth-fraction",),
                help="Roofline: share of peak HBM bandwidth kernels reach (assumption; default 0.8). Same flag as "
                     "plan's; --bandwidth-fraction is the old spelling.")
# simulate's help (the default is 1.0 × the measured GEMM efficiency where one is bundled, 0.7 flat elsewhere), not
# plan's flat 0.7: these commands price a step as simulate does
_FLOPS_HELP = {f.name: f for f in fields(EngineFlags)}["achievable_flops_fraction"].metadata["help"]
FLOPS_OPT = option(EngineFlags, "achievable_flops_fraction", None, also=("--flops-fraction",),
                   help=_FLOPS_HELP + " Same flag as simulate's; "
                        "--flops-fraction is the old spelling.")
JSON_OPT = typer.Option(False, "--json", help="Print JSON for scripts.")
# simulate's flags that price a step (cli/flag_groups.py EngineFlags), for the judgments priced as simulate prices
GPU_PROFILE_OPT = option(EngineFlags, "gpu_profile")
GEMM_OPT = option(EngineFlags, "gemm_efficiency")
EAGER_OPT = option(EngineFlags, "enforce_eager")
WDDM_OPT = option(EngineFlags, "wddm")


@dataclass(frozen=True, slots=True)
class TargetFlags:
    """The plan settings and step pricing the analysis commands share (the options above, as one group for
    ``flag_groups.with_groups``; the field names are the commands' parameter names, which ``cli/limits.py`` reads)."""

    tp: int = flag_like(EngineFlags, "tp", 1, help="Tensor-parallel degree.")
    max_model_len: str | None = flag_like(EngineFlags, "max_model_len", help=(
        "Tokens (8192; 8K = 8,192, 8k = 8,000 as vLLM reads them); default: from the config."))
    gpu_memory_utilization: float | None = flag_like(EngineFlags, "gpu_memory_utilization",
                                                     help="vLLM fraction of the device total (default by version).")
    available_kv_memory: str | None = flag("--available-kv-memory", help=AVAIL_OPT.help)
    block_size: int | None = flag_like(EngineFlags, "block_size", help="Tokens per KV block (default 16).")
    engine_version: str | None = flag_like(EngineFlags, "engine_version", help=VERSION_OPT.help)
    bandwidth_fraction: float | None = flag_like(EngineFlags, "achievable_bandwidth_fraction", help=BW_OPT.help,
                                                 also=("--bandwidth-fraction",))
    flops_fraction: float | None = flag_like(EngineFlags, "achievable_flops_fraction", help=FLOPS_OPT.help,
                                             also=("--flops-fraction",))
    gpu_profile: str | None = flag_like(EngineFlags, "gpu_profile")
    gemm_efficiency: str | None = flag_like(EngineFlags, "gemm_efficiency")
    allreduce_link_share: float | None = flag_like(EngineFlags, "allreduce_link_share")
    enforce_eager: bool | None = flag_like(EngineFlags, "enforce_eager")
    enable_expert_parallel: bool | None = flag_like(EngineFlags, "enable_expert_parallel")
    wddm: bool | None = flag_like(EngineFlags, "wddm")
    quantization: str | None = flag_like(EngineFlags, "quantization", help=(
        "vLLM --quantization fp8: an unquantized checkpoint's weights quantized to FP8 on load, in the plan and every "
        "step priced (as `kvledger plan -q fp8`)."))

    def load(self, model: str, gpu: str):
        """(ModelSpec, GpuSpec, PlanSettings) for these flags (``load_target``)."""
        return load_target(model, gpu, tp=self.tp, max_model_len=self.max_model_len,
                           gpu_memory_utilization=self.gpu_memory_utilization,
                           available_kv_memory=self.available_kv_memory, block_size=self.block_size,
                           engine_version=self.engine_version, bandwidth_fraction=self.bandwidth_fraction,
                           flops_fraction=self.flops_fraction, enforce_eager=bool(self.enforce_eager),
                           enable_expert_parallel=bool(self.enable_expert_parallel), wddm=bool(self.wddm),
                           quantization=self.quantization.lower() if self.quantization else None)

    def pricing(self):
        """``simulate``'s pricing flags (``pricing_flags``) of these flags."""
        return pricing_flags(self.gpu_profile, self.gemm_efficiency, self.flops_fraction, self.bandwidth_fraction,
                             self.allreduce_link_share)


#: how fp8-kv and spec-decode take the group (range errors name each option's first spelling, as they always have)
TARGET = GroupUse(TargetFlags, first_spelling=True)


def list_items(items: list[str] | None, what: str) -> list[str]:
    """The items of repeated and/or comma-separated options ("8K,32K" and "--x 8K --x 32K"), stripped; an empty item
    ("8K,,32K", "8K,") is refused rather than skipped, so a typo does not quietly drop a value."""
    from kvledger.errors import InputError

    out = []
    for item in items or []:
        parts = [c.strip() for c in item.split(",")]
        if any(not c for c in parts):
            raise InputError(f"{what}: {item!r} has an empty item; give comma-separated values like 8K,32K")
        out += parts
    return out


def parse_token_list(items: list[str] | None, what: str) -> list[int] | None:
    """Token counts from repeated and/or comma-separated options ("8K,32K"), tokens; None when none given."""
    from kvledger.errors import InputError
    from kvledger.units import parse_tokens

    out = [parse_tokens(c, what=what) for c in list_items(items, what)]
    if len(out) > 64:  # one row (and one roofline curve point) each: keep the work and the table bounded
        raise InputError(f"{what}: {len(out)} values given; at most 64")
    return out or None


def load_target(model: str, gpu: str, *, tp: int = 1, max_model_len: str | None = None,
                gpu_memory_utilization: float | None = None, available_kv_memory: str | None = None,
                block_size: int | None = None, engine_version: str | None = None,
                    bandwidth_fraction: float | None = None,
                flops_fraction: float | None = None, **extra: Any):
    """(ModelSpec, GpuSpec, PlanSettings) from the CLI options (a fraction not given: 0.7 FLOP/s, 0.8 bandwidth, which
    ``plan_pricing.priced_settings`` replaces by the GPU profile's); errors are KvLedgerError subclasses."""
    from kvledger.accounting.settings import make_settings
    from kvledger.accounting.vllm_auto_len import read_max_model_len
    from kvledger.catalog.gpu_file import resolve_gpu
    from kvledger.catalog.models import load_model
    from kvledger.cli.kv_dtype_flag import check_kv_dtype_for_engine
    from kvledger.units import parse_memory_flag

    check_kv_dtype_for_engine(extra.get("kv_cache_dtype"), "vllm", engine_version)  # vLLM's plan: vLLM's names
    mml, auto = read_max_model_len(max_model_len, "vllm", engine_version)  # as that release reads it, as plan's
    settings = make_settings(
        tp=tp, max_model_len=mml, auto_max_model_len=auto or None,
        gpu_memory_utilization=gpu_memory_utilization, block_size=block_size, engine_version=engine_version,
        available_kv_memory_bytes=parse_memory_flag(available_kv_memory,
                                                    what="--available-kv-memory",
                                                    positive=True) if available_kv_memory else None,
        achievable_bandwidth_fraction=0.8 if bandwidth_fraction is None else bandwidth_fraction,
            achievable_flops_fraction=0.7 if flops_fraction is None else flops_fraction, **extra)
    return load_model(model), resolve_gpu(gpu), settings


def pricing_flags(gpu_profile: str | None = None, gemm_efficiency: str | None = None,
                  flops_fraction: float | None = None, bandwidth_fraction: float | None = None,
                  allreduce_link_share: float | None = None):
    """``simulate``'s pricing flags outside the plan settings (``analyses.serving.plan_pricing.PricingFlags``);
    ``allreduce_link_share``: ``--allreduce-link-share``, winning over a GPU profile's share (``roofline_choice``)."""
    from kvledger.analyses.serving.plan_pricing import PricingFlags

    return PricingFlags(gpu_profile, gemm_efficiency, flops_fraction, bandwidth_fraction, allreduce_link_share)


def gib_option(v: str | None, what: str) -> float | None:
    """A size flag in GiB (``--kv-offloading-size`` and the other tier sizes): a bare number is GiB, as for every
    size flag (units.parse_memory_flag, vLLM's convention), or a size with its unit (256GiB, 300GB); None when not
    given.

    Raises:
        InputError: unreadable text, a unit that is not a size, a negative or non-finite value, 1 PiB or more
            (units.TIER_GIB_MAX).
    """
    from kvledger.units import parse_tier_gib

    return None if v is None else parse_tier_gib(v, what=what)
