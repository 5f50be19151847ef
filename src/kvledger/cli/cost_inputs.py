"""The input checks of ``kvledger cost`` (``cost_boundary`` runs them): every value error at once, --seeds, the GPU
rate when the GPU is known before the run."""

from __future__ import annotations

from typing import Any

__all__ = ["gpu_rate_for", "collect", "check_inputs", "check_seeds"]


def gpu_rate_for(name: str | None, provider: str | None, instance: str | None,
                 usd: float | dict[str, float] | None) -> Any:
    from kvledger.analyses.serving.cost_run import gpu_rate

    return gpu_rate(name, provider, instance, usd)


def collect(problems: list[Exception], fn: Any) -> Any:
    from kvledger.errors import KvLedgerError

    try:
        return fn()
    except KvLedgerError as err:
        problems.append(err)
        return None


def check_inputs(p: dict[str, Any], gpu_known: str | None, flags: dict[str, str] | None = None) -> tuple[Any, Any,
    Any, Any]:
    """(API price row, GPU rate or None when the GPU is named only by the run or priced by --gpu-usd-per-hour, SLO,
    --gpu-usd-per-hour read: one number, {catalog id: USD/GPU-h} or None) — every input error at once.

    Checks that --slo is given, then --slo, every numeric option's range (``kvledger.cli.limits``), no
    --utilization with a monthly volume (``ledgers.volume.refuse_utilization_with_volume``),
    --gpu-usd-per-hour (``catalog.given_prices``: a list must name ``gpu_known``), the --api row and, when
    ``gpu_known``, its price row, and raises them together (one error alone keeps its type).
    """
    from kvledger.catalog.api_match import find_api_price
    from kvledger.catalog.given_prices import parse_gpu_usd, price_of
    from kvledger.catalog.price_names import check_gpu_provider
    from kvledger.cli.limits import range_problems
    from kvledger.errors import InputError
    from kvledger.ledgers.slo import parse_slo
    from kvledger.ledgers.volume import refuse_utilization_above_peak, refuse_utilization_with_volume

    problems: list[Exception] = []
    if p["slo"] is None:
        problems.append(InputError("missing --slo: cost needs the SLO (e.g. --slo ttft=200ms,tpot=50ms); the API rows "
                                   "default "
                                   "to those serving the same model (--api names another), the utilization to the "
                                   "volume's"))
    slo = collect(problems, lambda: parse_slo(p["slo"])) if p["slo"] is not None else None
    problems += list(range_problems("cost", p, flags))
    volume_given = any(p.get(k) is not None for k in ("monthly_requests", "monthly_tokens", "monthly_input_tokens",
                                                      "monthly_output_tokens"))
    collect(problems, lambda: refuse_utilization_with_volume(p.get("utilization"), volume_given))
    collect(problems, lambda: refuse_utilization_above_peak(p.get("utilization"), p.get("max_utilization") or 0.8,
                                                            p.get("peak_to_mean") or 1.0))
    given = p["gpu_usd_per_hour"]
    usd = collect(problems, lambda: parse_gpu_usd(given, "cost")) if given is not None else None
    api = collect(problems, lambda: find_api_price(p["api"])) if p["api"] is not None else None
    rate = None
    if given is None and gpu_known is not None:
        rate = collect(problems, lambda: gpu_rate_for(gpu_known, p["gpu_provider"], p["instance"], None))
    elif isinstance(usd, dict) and gpu_known is not None:  # a list must price this GPU: refused with the rest
        collect(problems, lambda: price_of(usd, gpu_known))
    if given is not None:  # the provider then labels the user's price: an unknown one is refused all the same
        collect(problems, lambda: check_gpu_provider(p["gpu_provider"]))
    if len(problems) == 1:
        raise problems[0]
    if problems:
        raise InputError(f"{len(problems)} problems with the inputs:\n" + "\n".join(f"  - {e}" for e in problems))
    return api, rate, slo, usd


def check_seeds(is_file: bool, at_offered_load: bool, params: dict[str, Any]) -> None:
    """Refuse ``--seeds N`` (N > 1) where there is no SLO-capacity search to repeat per seed."""
    from kvledger.errors import InputError

    if is_file:
        raise InputError("--seeds repeats the simulated SLO-capacity search per seed: it applies to --simulate, not "
                         "to a measured FILE")
    if at_offered_load:
        raise InputError("--seeds repeats the SLO-capacity search per seed, which --at-offered-load skips; for one "
                         "run's figures over seeds use kvledger simulate --seeds N")
    if params.get("kv_tier_host") is not None:
        raise InputError("--seeds is not run with --kv-tier-host (its tier probe follows one search); drop one")
