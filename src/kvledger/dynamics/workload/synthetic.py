"""Synthetic workloads: length distributions, shared-prefix groups and named presets, on arrivals.py's arrival times.

Every random draw comes from a ``numpy.random.Generator`` built from the caller's
explicit ``seed`` (an int or a Generator), so the same arguments give the same requests.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import numpy as np

from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.workload.arrivals import arrival_times, make_rng
from kvledger.dynamics.workload.mixture import parse_mixture
from kvledger.dynamics.workload.traces import load_trace, trace_has_arrivals
from kvledger.errors import InputError

__all__ = [
    "make_rng", "arrival_times", "LengthDist", "Fixed", "Uniform", "ExponentialCapped", "LogNormal", "Empirical",
    "parse_lengths", "is_bare_count", "is_fixed", "SharedPrefix", "synthetic_workload", "anyscale_throughput",
    "anyscale_latency", "PRESETS",
]


class LengthDist(Protocol):
    """A distribution of token counts: ``sample(n, rng)`` → int64 array of shape ``(n,)``, every value ≥ 1."""

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray: ...


def _check_positive(name: str, value: float) -> None:
    if not (value >= 1 and math.isfinite(value)):
        raise InputError(f"{name} must be a finite number of tokens ≥ 1, got {value}")


@dataclass(frozen=True, slots=True)
class Fixed:
    """Every request has ``tokens`` tokens."""

    tokens: int

    def __post_init__(self) -> None:
        _check_positive("fixed length", self.tokens)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return np.full(n, int(self.tokens), dtype=np.int64)


@dataclass(frozen=True, slots=True)
class Uniform:
    """Integers uniform on ``[low, high]``, both ends included."""

    low: int
    high: int

    def __post_init__(self) -> None:
        _check_positive("uniform low", self.low)
        if self.high < self.low:
            raise InputError(f"uniform lengths: high ({self.high}) < low ({self.low})")

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return rng.integers(int(self.low), int(self.high), size=n, endpoint=True, dtype=np.int64)


@dataclass(frozen=True, slots=True)
class ExponentialCapped:
    """Exponential with mean ``mean`` (before truncation), keeping only draws ≤ ``cap``, rounded up to ≥ 1 token.

    Truncation, not clipping: draws above the cap are discarded and redrawn, as the Anyscale
    continuous-batching benchmark did (docs/engine-model.md §6.4). Sampled by inverting the truncated CDF,
    x = −mean·ln(1 − u·(1 − e^(−cap/mean))), so one uniform draw per request.
    """

    mean: float
    cap: int

    def __post_init__(self) -> None:
        _check_positive("exponential mean", self.mean)
        _check_positive("exponential cap", self.cap)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        u = rng.random(n)
        x = -self.mean * np.log1p(-u * -np.expm1(-self.cap / self.mean))
        return np.clip(np.ceil(x), 1, self.cap).astype(np.int64)


@dataclass(frozen=True, slots=True)
class LogNormal:
    """``median·exp(sigma·Z)``, Z standard normal, rounded to the nearest integer and clipped to ``[low, high]``."""

    median: float
    sigma: float
    low: int = 1
    high: int | None = None

    def __post_init__(self) -> None:
        _check_positive("lognormal median", self.median)
        if not (self.sigma >= 0 and math.isfinite(self.sigma)):
            raise InputError(f"lognormal sigma must be ≥ 0, got {self.sigma}")
        _check_positive("lognormal low", self.low)

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        x = np.rint(self.median * np.exp(self.sigma * rng.standard_normal(n)))
        return np.clip(x, self.low, self.high if self.high is not None else np.inf).astype(np.int64)


@dataclass(frozen=True, slots=True)
class Empirical:
    """Draws with replacement from observed lengths (e.g. a trace's prompt lengths)."""

    values: tuple[int, ...]
    source: str = ""

    def __post_init__(self) -> None:
        if not self.values or min(self.values) < 1:
            raise InputError(f"empirical lengths {self.source!r}: need at least one value, all ≥ 1")

    @classmethod
    def from_trace(cls, name_or_path: str, column: str = "prompt") -> Empirical:
        """Lengths of a trace (bundled name or path); ``column`` is "prompt" or "output"."""
        if column not in ("prompt", "output"):
            raise InputError(f"empirical lengths: column must be 'prompt' or 'output', got {column!r}")
        reqs = load_trace(name_or_path, rate=math.inf) if _lacks_arrivals(name_or_path) else load_trace(name_or_path)
        attr = "num_prompt_tokens" if column == "prompt" else "num_output_tokens"
        return cls(tuple(getattr(r, attr) for r in reqs), f"{name_or_path}:{column}")

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        return np.asarray(self.values, dtype=np.int64)[rng.integers(0, len(self.values), size=n)]


def _lacks_arrivals(name_or_path: str) -> bool:
    return not trace_has_arrivals(name_or_path)


def _whole(text: str) -> int:
    """A token count of a length distribution, read as every token flag reads one (``units.parse_tokens``: 8K =
    8,192, 8k = 8,000); ValueError in words for anything else (a count that is not positive included)."""
    from kvledger.units import parse_tokens

    try:
        return parse_tokens(text, what="tokens")
    except InputError:
        raise ValueError(f"{text!r} is not a positive token count (8192, or 8K = 8,192 and 8k = 8,000 as vLLM reads "
                         "them)") from None


def _number(text: str) -> float:
    """A mean, median or sigma of a length distribution; ValueError in words for anything else."""
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{text!r} is not a number") from None


def is_bare_count(spec: str) -> bool:
    """Whether a length distribution's text is a bare token count (``512``, ``8K``): read as ``fixed:N``."""
    return ":" not in spec and spec.strip().lstrip("+-")[:1].isdigit()


def is_fixed(spec: str) -> bool:
    """Whether a length distribution's text gives every request the same length (``fixed:N`` or a bare ``N``)."""
    return spec.startswith("fixed:") or is_bare_count(spec)


def parse_lengths(spec: str) -> LengthDist:
    """Read a length distribution from text, for the CLI.

    Forms: ``fixed:512`` (or a bare ``512``: every length that one count),
    ``uniform:1:512``, ``exp:128:1536`` (mean, cap), ``lognormal:1000:0.8[:low[:high]]``
    (median, sigma), ``trace:azure-conv:prompt`` (a trace's prompt or output lengths),
    ``mix:0.9*fixed:2K,0.1*fixed:100K`` (a mixture of the others, weights divided by their sum: mixture.py).

    Raises:
        InputError: unknown kind or unreadable numbers.
    """
    kind, _, rest = spec.partition(":")
    args = rest.split(":") if rest else []
    if is_bare_count(spec):  # a bare count is fixed:N (its unreadable forms, 0 or -5, said as fixed:N's are)
        kind, rest, args = "fixed", spec, [spec]
    try:
        if kind == "fixed" and len(args) == 1:
            return Fixed(_whole(args[0]))
        if kind == "uniform" and len(args) == 2:
            return Uniform(_whole(args[0]), _whole(args[1]))
        if kind == "exp" and len(args) == 2:
            return ExponentialCapped(_number(args[0]), _whole(args[1]))
        if kind == "lognormal" and 2 <= len(args) <= 4:
            nums = [_number(args[0]), _number(args[1])] + [_whole(a) for a in args[2:]]
            return LogNormal(*nums)
        if kind == "trace" and len(args) == 2:
            return Empirical.from_trace(args[0], args[1])
        if kind == "mix" and rest:
            return parse_mixture(rest, parse_lengths)
    except (ValueError, InputError) as err:  # a number not read, or a distribution's own check: the text named
        raise InputError(f"length distribution {spec!r}: {err}") from None
    raise InputError(f"length distribution {spec!r} not understood; use N or fixed:N, uniform:LOW:HIGH, exp:MEAN:CAP, "
                     "lognormal:MEDIAN:SIGMA[:LOW[:HIGH]], trace:NAME:prompt|output or mix:W*DIST,W*DIST")


@dataclass(frozen=True, slots=True)
class SharedPrefix:
    """Shared-prefix groups: a share of requests starts with one of ``num_groups`` common prefixes.

    A grouped request's prompt is its group's ``prefix_tokens`` followed by its own sampled
    prompt (so its length is prefix + sample); it carries ``prefix_segments=(group,)`` with
    ``segment_tokens=prefix_tokens``. Groups are chosen uniformly.

    Attributes:
        num_groups: G, distinct prefixes (≥ 1).
        prefix_tokens: P, tokens per prefix (≥ 1).
        share: fraction of requests that belong to a group, in [0, 1].
    """

    num_groups: int
    prefix_tokens: int
    share: float = 1.0

    def __post_init__(self) -> None:
        if self.num_groups < 1 or self.prefix_tokens < 1 or not 0.0 <= self.share <= 1.0:
            raise InputError(f"shared prefix: need num_groups ≥ 1, prefix_tokens ≥ 1 and 0 ≤ share ≤ 1, got {self}")


def synthetic_workload(
    num_requests: int, *, rate_per_s: float, prompt: LengthDist, output: LengthDist, seed: int | np.random.Generator,
    cv: float = 1.0, prefix: SharedPrefix | None = None, id_prefix: str = "syn",
) -> list[RequestSpec]:
    """Requests with arrivals at ``rate_per_s`` (Gamma gaps of CV ``cv``) and sampled lengths.

    Draw order (fixed, so results are reproducible): arrivals, prompt lengths, output lengths,
    group membership, group ids. Request ids are ``f"{id_prefix}-{i}"``.
    """
    rng = make_rng(seed)
    t = arrival_times(num_requests, rate_per_s, cv=cv, seed=rng)
    p = prompt.sample(num_requests, rng)
    o = output.sample(num_requests, rng)
    grouped = np.zeros(num_requests, dtype=bool)
    groups = np.zeros(num_requests, dtype=np.int64)
    if prefix is not None:
        grouped = rng.random(num_requests) < prefix.share
        groups = rng.integers(0, prefix.num_groups, size=num_requests)
    out = []
    for i in range(num_requests):
        if grouped[i]:
            out.append(RequestSpec(f"{id_prefix}-{i}", float(t[i]), int(p[i]) + prefix.prefix_tokens, int(o[i]),
                                   (int(groups[i]),), prefix.prefix_tokens))
        else:
            out.append(RequestSpec(f"{id_prefix}-{i}", float(t[i]), int(p[i]), int(o[i])))
    return out


def anyscale_throughput(cap: int = 1536, *, seed: int | np.random.Generator, num_requests: int = 1000,
                        prompt_tokens: int = 512, mean_output_tokens: float = 128.0) -> list[RequestSpec]:
    """Anyscale's continuous-batching throughput test (docs/engine-model.md §6.4): 1,000 × 512-token prompts sent in
    one burst at t = 0; outputs exponential with mean 128 truncated at ``cap`` (the blog used 32, 128, 512, 1536)."""
    return synthetic_workload(num_requests, rate_per_s=math.inf, prompt=Fixed(prompt_tokens),
                              output=ExponentialCapped(mean_output_tokens, cap), seed=seed, id_prefix=f"anyscale-{cap}")


def anyscale_latency(rate_per_s: float = 1.0, *, seed: int | np.random.Generator,
                     num_requests: int = 100) -> list[RequestSpec]:
    """Anyscale's latency test (docs/engine-model.md §6.4): 100 requests, prompts uniform on 1–512, outputs exponential
    mean 128 truncated at 1,536, Poisson arrivals (the blog used 1 and 4 req/s)."""
    return synthetic_workload(num_requests, rate_per_s=rate_per_s, prompt=Uniform(1, 512),
                              output=ExponentialCapped(128.0, 1536), seed=seed, id_prefix="anyscale-lat")


PRESETS: dict[str, Callable[..., list[RequestSpec]]] = {
    "anyscale-throughput": anyscale_throughput,
    "anyscale-latency": anyscale_latency,
}
