"""A monthly volume resolved against a run's mix: requests and input/output tokens per month from what was given."""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

from kvledger.errors import InputError, show_number
from kvledger.ledgers.cost import HOURS_PER_MONTH, Capacity
from kvledger.ledgers.decision_notes import tokens_text
from kvledger.ledgers.volume_rate import rate_words
from kvledger.ranges import check_options, range_for

__all__ = ["MonthlyVolume", "Volume", "resolve_volume", "refuse_utilization_with_volume",
           "refuse_utilization_above_peak", "check_monthly_tokens",
           "SECONDS_PER_MONTH", "split_tokens", "tokens_per_request", "given_words"]

SECONDS_PER_MONTH = HOURS_PER_MONTH * 3600.0


@dataclass(frozen=True, slots=True)
class MonthlyVolume:
    """Traffic per month: requests, or input and output tokens, or all tokens (split by the run's mix)."""

    requests: float | None = None
    input_tokens: float | None = None
    output_tokens: float | None = None
    tokens: float | None = None
    peak_to_mean: float = 1.0


@dataclass(frozen=True, slots=True)
class Volume:
    """A monthly volume resolved against the run's mean tokens per request (``Capacity.workload_*_tokens_mean``: all
    its completed requests, the traffic sent; a measured file without them: its good requests)."""

    requests: float
    input_tokens: float
    output_tokens: float
    how: str
    peak_to_mean: float = 1.0
    split: bool = False  # input and output tokens both given: the user's own split, not the run's mix
    given: str = ""  # a volume typed per day or hour, restated as the month priced (``volume_rate.rate_words``)

    @property
    def rate_req_per_s(self) -> float:
        """The month's mean request rate."""
        return self.requests / SECONDS_PER_MONTH

    @property
    def peak_rate_req_per_s(self) -> float:
        """The rate the replicas are sized for: the mean × the diurnal peak-to-mean ratio."""
        return self.rate_req_per_s * self.peak_to_mean


def refuse_utilization_with_volume(utilization: float | None, volume_given: bool) -> None:
    """An assumed utilization with a monthly volume is refused (docs/cost.md §10): the volume sets the replicas and the
    utilization they realize, and the bill is those whole replicas, so an assumed one priced the tokens (and the
    secondary line) at a load the bill's replicas do not carry.

    Raises:
        InputError: ``utilization`` given and ``volume_given``.
    """
    if utilization is None or not volume_given:
        return
    raise InputError(
        f"--utilization {utilization:g} cannot be given with a monthly volume (--monthly-tokens, --monthly-requests, "
        "or --monthly-input-tokens with --monthly-output-tokens): the volume sets the replicas, ⌈peak rate ÷ (SLO "
        "capacity × --max-utilization)⌉, and the utilization they realize, mean rate ÷ (replicas × SLO capacity); "
        "the bill is those whole replicas whatever utilization is assumed, so an assumed one would price the tokens at "
        "a load the replicas do not carry. Drop --utilization to price the volume at its realized utilization (with a "
        "volume, --max-utilization caps the utilization each replica is sized for), or drop the volume to price one "
        "replica at the utilization given."
    )


def refuse_utilization_above_peak(utilization: float | None, max_utilization: float, peak_to_mean: float) -> None:
    """An assumed (mean) utilization above what a replica sized for the peak can run at is refused: with
    ``--peak-to-mean`` P a replica carries at most --max-utilization ÷ P on average (the peak must fit under the cap),
    so a higher one is a replica that misses the SLO at the peak. A utilization within it is priced as the mean
    utilization of a replica sized for that peak, and the break-even sizes for the same peak.

    Raises:
        InputError: ``utilization`` above ``max_utilization`` ÷ ``peak_to_mean`` (P > 1).
    """
    if utilization is None or peak_to_mean <= 1 or utilization <= max_utilization / peak_to_mean * (1 + 1e-12):
        return
    raise InputError(
        f"--utilization {utilization:g} with --peak-to-mean {peak_to_mean:g}: a replica sized for a peak "
        f"{peak_to_mean:g}× the mean runs at most --max-utilization {max_utilization:g} ÷ {peak_to_mean:g} = "
        f"{max_utilization / peak_to_mean:.4g} on average (its peak must fit under the cap), so a mean utilization of "
        f"{utilization:g} would miss the SLO at the peak. Give --utilization ≤ {max_utilization / peak_to_mean:.4g}, "
        "or --peak-to-mean 1 to price that utilization with no peak"
    )


def resolve_volume(vol: MonthlyVolume, cap: Capacity) -> Volume:
    """Requests and tokens per month from whichever the user gave (one kind only).

    Raises:
        InputError: none or several kinds given, only one of input/output tokens, or a negative volume.
    """
    kinds = [
        k
        for k, given in (
            ("--monthly-requests", vol.requests is not None),
            ("--monthly-tokens", vol.tokens is not None),
            (
                "--monthly-input-tokens/--monthly-output-tokens",
                vol.input_tokens is not None or vol.output_tokens is not None,
            ),
        )
        if given
    ]
    if len(kinds) != 1:
        raise InputError(
            "give one monthly volume: --monthly-requests, --monthly-tokens, or both --monthly-input-tokens and "
            f"--monthly-output-tokens (got {', '.join(kinds) or 'none'})"
        )
    i, o = cap.workload_input_tokens_mean, cap.workload_output_tokens_mean
    mix = "all its completed requests" if cap.mix_output_tokens else "its good requests (no counts for all of them)"
    if vol.requests is not None:
        v = Volume(
            vol.requests,
            vol.requests * i,
            vol.requests * o,
            f"requests per month given; tokens = requests × the run's mean tokens per request ({mix})",
        )
    elif vol.tokens is not None:
        reqs = vol.tokens / (i + o)
        v = Volume(
            reqs,
            reqs * i,
            reqs * o,
            f"tokens per month given; split {i / (i + o):.0%} input / {o / (i + o):.0%} output as in the run's "
            f"requests ({mix}: mean {i:,.0f} in / {o:,.0f} out tokens); for your own split give "
            "--monthly-input-tokens and --monthly-output-tokens instead",
        )
    else:
        v = _split_volume(vol, i, o)
    if min(v.requests, v.input_tokens, v.output_tokens) < 0 or not math.isfinite(v.requests):
        raise InputError("a monthly volume must be a finite number ≥ 0")
    _check_caps(kinds[0], v, _per_request_words(vol, i, o))
    check_options("cost", {"peak_to_mean": vol.peak_to_mean})  # [1, 100]: the busiest hour's rate ÷ the month's mean
    given = given_words(vol)
    how = f"{given}; {v.how}" if given else v.how
    return replace(v, peak_to_mean=vol.peak_to_mean, given=given, how=how)


def given_words(vol: MonthlyVolume) -> str:
    """The volumes typed per day or hour, each restated as the monthly figure priced (``volume_rate.rate_words``)."""
    words = [rate_words(vol.requests, "requests", tokens_text), rate_words(vol.tokens, "tokens", tokens_text),
             rate_words(vol.input_tokens, "input tokens", tokens_text),
             rate_words(vol.output_tokens, "output tokens", tokens_text)]
    return "; ".join(w for w in words if w)


def _split_volume(vol: MonthlyVolume, i: float, o: float) -> Volume:
    """Input and output tokens given: requests = max(input ÷ the run's mean input, output ÷ its mean output); a split
    (per token given, break-even at this split) only when both are above 0 (a kind given as 0 has no token to price).

    Raises:
        InputError: only one of the two given.
    """
    if vol.input_tokens is None or vol.output_tokens is None:
        raise InputError("--monthly-input-tokens and --monthly-output-tokens go together (or give --monthly-tokens)")
    both = vol.input_tokens > 0 and vol.output_tokens > 0
    how = ("input and output tokens per month given; replicas sized for max(input, output) in requests of the run's "
           + ("mix; the per-token figures are per token given and the break-even is at this split" if both else
              "mix; one kind given as 0, so the per-token figures and the break-even are at the run's mix"))
    return Volume(max(vol.input_tokens / i, vol.output_tokens / o), vol.input_tokens, vol.output_tokens, how,
                  split=both)


def split_tokens(vol: Volume | None, cap: Capacity) -> dict[str, tuple[float, float]] | None:
    """With both token volumes given (``Volume.split``), per kind: (the tokens given, the tokens of the requests the
    replicas are sized for, requests × the run's mean per request). Their ratio is the share of the replicas' good
    tokens the volume holds: 1 on the side that binds the sizing (max), below 1 on the other, whose idle capacity the
    bill still pays, so the per-token ledgers divide the bill by the tokens given. None otherwise (the volume is in
    the run's mix: the ratios are 1)."""
    if vol is None or not vol.split or vol.requests <= 0:
        return None
    return {"input": (vol.input_tokens, vol.requests * cap.workload_input_tokens_mean),
            "output": (vol.output_tokens, vol.requests * cap.workload_output_tokens_mean)}


def tokens_per_request(vol: Volume | None, cap: Capacity) -> tuple[float, float, str]:
    """(input, output tokens per request, which mix in words) for the API's price per request and the break-even:
    with both token volumes given, the user's split (the tokens given ÷ the requests sized, so that the volume scaled
    keeps it); else the run's mix, which also splits a volume given in requests or all tokens."""
    if vol is not None and vol.split and vol.requests > 0:
        i, o = vol.input_tokens / vol.requests, vol.output_tokens / vol.requests
        return i, o, f"at the volume's split, {i / (i + o):.0%} input tokens"
    i, o = cap.workload_input_tokens_mean, cap.workload_output_tokens_mean
    return i, o, f"at the run's mix, {i / (i + o):.0%} input tokens"


def check_monthly_tokens(tokens: float, mean_input_tokens: float, mean_output_tokens: float) -> None:
    """``--monthly-tokens`` split at a workload's mean tokens per request, as ``resolve_volume`` splits it, against the
    caps a volume is held to (``_check_caps``): ``search`` sizes for the rate it converts to, and refuses the volume
    ``cost`` would refuse, in the same words.

    Raises:
        InputError: the requests (or tokens) it converts to are out of their flag's range.
    """
    i, o = mean_input_tokens, mean_output_tokens
    reqs = tokens / (i + o)
    _check_caps("--monthly-tokens", Volume(reqs, reqs * i, reqs * o, ""), f"{i + o:,.1f} tokens a request")


def _per_request_words(vol: MonthlyVolume, i: float, o: float) -> str:
    """The tokens a request the volume was converted at: the run's mean per request, or with input and output tokens
    given the kind that binds the requests (max(input ÷ i, output ÷ o): ``_split_volume``), e.g. "935.4 input tokens
    a request"."""
    if vol.input_tokens is None or vol.output_tokens is None or not (vol.input_tokens or vol.output_tokens):
        return f"{i + o:,.1f} tokens a request"  # requests or all tokens given, or no token: the whole request
    by_input = vol.input_tokens / i >= vol.output_tokens / o
    return f"{i if by_input else o:,.1f} {'input' if by_input else 'output'} tokens a request"


def _check_caps(given: str, v: Volume, per_request: str) -> None:
    """The volume, given or derived, against the caps of the flags that could have given it (``kvledger.ranges``):
    --monthly-tokens 10¹⁵ at 100 tokens a request is 10¹³ requests/month, above what --monthly-requests takes, so it
    is refused as that flag would be; a volume of no requests (0 input and 0 output tokens) prices nothing.

    Raises:
        InputError: naming the flag given, what it converts to, and the range that figure breaks.
    """
    figures = (("requests", "--monthly-requests", v.requests), ("tokens", "--monthly-tokens",
               v.input_tokens + v.output_tokens), ("input tokens", "--monthly-input-tokens", v.input_tokens),
               ("output tokens", "--monthly-output-tokens", v.output_tokens))
    for what, flag, value in figures:
        rng = range_for("cost", flag[2:].replace("-", "_"))
        try:  # a sum or product of the figures given, checked without its float noise (10¹⁵ + 0.1)
            rng.check(flag, float(f"{value:.12g}"))
        except InputError:
            if flag in given.split("/"):
                raise
            shown = f"{value:,.0f}" if value >= 1 else show_number(value)
            raise InputError(f"{given} converts to {shown} {what}/month (the run's mean "
                             f"{per_request}), out of the range {flag} takes: "
                             f"{rng.describe()}") from None
