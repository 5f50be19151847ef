"""The load a search sizes for, as ``kvledger cost`` reads a monthly volume (``kvledger.ledgers.volume``): ``--rate``
(mean req/s), ``--monthly-tokens`` (split at the probes' mean tokens per request), or ``--monthly-input-tokens`` with
``--monthly-output-tokens`` (requests = max(input ÷ mean input, output ÷ mean output), ``volume.resolve_volume``), and
``--peak-to-mean``, the busiest hour's rate ÷ the month's mean: replicas are sized for the peak, the month is priced
at the mean."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvledger.ledgers.cost import HOURS_PER_MONTH

__all__ = ["has_load", "load_problems", "mean_rate", "monthly_tokens_priced", "split_given", "peak_figures",
           "offered_words", "split_for", "volume_given"]


@dataclass(frozen=True, slots=True)
class _Mix:
    """The probes' mean tokens per request, read by ``volume.resolve_volume`` as a run's mix."""

    workload_input_tokens_mean: float
    workload_output_tokens_mean: float
    mix_output_tokens: bool = True


def split_given(spec: Any) -> bool:
    """Whether the load is input and output tokens per month (either given: both are then required)."""
    return getattr(spec, "monthly_input_tokens", None) is not None or \
        getattr(spec, "monthly_output_tokens", None) is not None


def has_load(spec: Any) -> bool:
    """Whether the spec names a load to size replicas for (a rate or a monthly volume)."""
    return spec.rate_req_per_s is not None or spec.monthly_tokens is not None or split_given(spec)


def load_problems(spec: Any, *, priced: bool = True) -> list[str]:
    """What is wrong with the spec's load, in the flags' words: two loads at once, only one of input/output tokens,
    a peak-to-mean ratio without a load to size for, and where ``priced`` neither a load nor a utilization (a search
    prices its candidates; ``--show-command`` alone plans one)."""
    given = [f for f, v in (("--rate", spec.rate_req_per_s), ("--monthly-tokens", spec.monthly_tokens),
                            ("--monthly-input-tokens/--monthly-output-tokens", split_given(spec) or None))
             if v is not None]
    bad = []
    if len(given) > 1:
        bad.append(f"give the load as --rate (req/s), --monthly-tokens, or --monthly-input-tokens with "
                   f"--monthly-output-tokens, {'not both' if len(given) == 2 else 'only one'} (got {', '.join(given)})")
    if split_given(spec) and (spec.monthly_input_tokens is None or spec.monthly_output_tokens is None):
        bad.append("--monthly-input-tokens and --monthly-output-tokens go together (or give --monthly-tokens)")
    elif split_given(spec) and spec.monthly_input_tokens + spec.monthly_output_tokens <= 0:
        bad.append("--monthly-input-tokens and --monthly-output-tokens are both 0: a volume of no tokens sizes no "
                   "replica; give a volume above 0")
    if priced and spec.utilization is None and not given:
        bad.append("the cost per token needs a utilization: give --utilization, or a load (--rate, --monthly-tokens, "
                   "or --monthly-input-tokens with --monthly-output-tokens) whose sizing then sets it")
    if spec.peak_to_mean != 1.0 and not given:
        bad.append(f"--peak-to-mean {spec.peak_to_mean:g} sizes replicas for the busiest hour of a load: give one "
                   "(--rate, --monthly-tokens, or --monthly-input-tokens with --monthly-output-tokens) or drop it")
    return bad


def mean_rate(spec: Any, mean_input_tokens: float, mean_output_tokens: float) -> float | None:
    """The month's mean request rate, req/s, of the spec's load at the workload's mean tokens per request; None
    without a load. A volume is held to the caps and the peak to the range ``cost`` holds them to.

    Raises:
        InputError: a volume that converts to more requests or tokens a month than cost's flags take.
    """
    from kvledger.ledgers.volume import MonthlyVolume, check_monthly_tokens, resolve_volume

    if spec.rate_req_per_s is not None:
        return spec.rate_req_per_s
    if spec.monthly_tokens is not None:
        check_monthly_tokens(spec.monthly_tokens, mean_input_tokens, mean_output_tokens)
        return spec.monthly_tokens / ((mean_input_tokens + mean_output_tokens) * HOURS_PER_MONTH * 3600.0)
    if split_given(spec):
        vol = MonthlyVolume(None, spec.monthly_input_tokens, spec.monthly_output_tokens, None, spec.peak_to_mean)
        return resolve_volume(vol, _Mix(mean_input_tokens, mean_output_tokens)).rate_req_per_s
    return None


def monthly_tokens_priced(spec: Any, rate: float, mean_input_tokens: float,
                          mean_output_tokens: float) -> tuple[float, float]:
    """(input, output tokens a month) the API is priced on: those given, else the mean rate's requests × the workload's
    mean tokens per request."""
    if split_given(spec):
        return spec.monthly_input_tokens, spec.monthly_output_tokens
    secs = HOURS_PER_MONTH * 3600.0
    return rate * secs * mean_input_tokens, rate * secs * mean_output_tokens


def peak_figures(spec: Any, rate: float) -> dict[str, float]:
    """A sizing's peak keys where the traffic is not flat (``--peak-to-mean`` above 1): the ratio and the rate sized
    for; nothing for flat traffic (its sizing unchanged)."""
    if spec.peak_to_mean == 1.0:
        return {}
    return {"peak_to_mean": spec.peak_to_mean, "peak_rate_req_per_s": rate * spec.peak_to_mean}


def offered_words(spec: Any, rate: float) -> str:
    """The rate the replicas are sized for, in a sizing's derivation: the mean, or the peak and the mean it is of."""
    if spec.peak_to_mean == 1.0:
        return f"{rate:.4g} req/s offered"
    return (f"{rate * spec.peak_to_mean:.4g} req/s offered at the peak ({spec.peak_to_mean:g} × the {rate:.4g} req/s "
            "mean)")


def split_for(spec: Any, rate: float, cap: Any) -> dict[str, tuple[float, float]] | None:
    """With input and output tokens both given and above 0, per kind (the tokens given, those of the requests sized
    for: the mean rate's month × the run's mean per request), as ``cost`` spreads the bill over the tokens given
    (``volume.split_tokens``); else None."""
    from kvledger.ledgers.volume import SECONDS_PER_MONTH, Volume, split_tokens

    if not split_given(spec):
        return None
    i, o = spec.monthly_input_tokens, spec.monthly_output_tokens
    return split_tokens(Volume(rate * SECONDS_PER_MONTH, i, o, "", spec.peak_to_mean, split=i > 0 and o > 0), cap)


def volume_given(spec: Any) -> str:
    """The spec's volume typed per day or hour, restated as the month the search sizes and prices, in cost's words
    (``volume.given_words``: "100M tokens/day × 30.42 days = 3.04B tokens/month"); "" for a monthly one or a rate."""
    from kvledger.ledgers.volume import MonthlyVolume, given_words

    return given_words(MonthlyVolume(None, spec.monthly_input_tokens, spec.monthly_output_tokens,
                                     spec.monthly_tokens))
