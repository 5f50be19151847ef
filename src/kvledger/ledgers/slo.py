"""Latency SLOs: parsing ``ttft=200ms,tpot=50ms,itl=...,e2e=...`` and what each threshold means per request.

A request meets an SLO when its value is **≤** the threshold (equality is good, as in
vLLM ``calculate_metrics`` and AIPerf); it is *good* when it meets every SLO given and
did not fail. Per-request values follow records.py: TTFT, TPOT excluding the first token
(0 for ≤ 1 output token), E2E. ITL is per gap, so an ITL SLO needs a per-request
statistic of the gaps, and the name says which: ``itl_max`` = the request's largest gap (every
gap within the SLO, the strictest reading), ``itl_mean`` = the request's mean gap
(inference-perf's ``itl`` constraint), ``itl_p99`` (any ``itl_pQ``) = that percentile of the
request's own gaps. These are per-request statistics, not the percentiles over all gaps of all
requests that ``kvledger simulate`` and most benchmark tools print as "ITL p99"; a bare ``itl``
(the old spelling) is still read as ``itl_max``, with a note saying so.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from kvledger.errors import InputError, UnknownNameError, range_error
from kvledger.jsonable import to_jsonable
from kvledger.units import fmt_duration, parse_duration_s

__all__ = ["SLO", "parse_slo", "SLO_KEYS"]

SLO_KEYS = {
    "ttft": "time to first token, per request",
    "tpot": "time per output token excluding the first, per request",
    "e2e": "end-to-end latency, per request (alias e2el)",
    "itl_max": "largest gap between consecutive chunks of a request (every gap within the SLO)",
    "itl_mean": "mean gap between chunks of a request",
    "itl_pQ": "Q-th percentile (0 < Q ≤ 100) of a request's own gaps, e.g. itl_p99",
}
_ALIASES = {"e2el": "e2e", "request_latency": "e2e"}
SLO_MAX_S = 86_400.0  # one day: as --think-time's bound; beyond it a limit is a typo or an overflow, not an SLO
ITL_OLD_SPELLING_NOTE = ("'itl' is read as itl_max: each request's largest gap must be within the limit. "
                         "It is not the ITL p50/p99 over all gaps that simulate and benchmark tools print; "
                         "write itl_max, itl_mean or itl_p99 (a percentile of each request's own gaps) to say which.")
_ITL_PCT = re.compile(r"^itl_p(\d+(?:\.\d+)?)$")


@dataclass(frozen=True, slots=True)
class SLO:
    """Per-request latency thresholds, s; None = not constrained.

    Attributes:
        ttft_s, tpot_s, e2e_s, itl_s: thresholds, s.
        itl_stat: the per-request statistic of the gaps compared with ``itl_s``: "max", "mean" or
            a percentile such as 99.0.
    """

    __json__ = ("ttft_s", "tpot_s", "e2e_s", "itl_s", "itl_stat", ("itl_key", "constrained_itl_key"),
                ("text", "describe"), "definitions", "notes")
    ttft_s: float | None = None
    tpot_s: float | None = None
    e2e_s: float | None = None
    itl_s: float | None = None
    itl_stat: str | float = "max"
    notes: tuple[str, ...] = ()

    def constraints(self) -> list[tuple[str, float]]:
        """(metric, threshold_s) pairs in a fixed order: ttft, tpot, itl, e2e (``itl`` stands for :attr:`itl_key`)."""
        pairs = [("ttft", self.ttft_s), ("tpot", self.tpot_s), ("itl", self.itl_s), ("e2e", self.e2e_s)]
        return [(k, v) for k, v in pairs if v is not None]

    @property
    def itl_key(self) -> str:
        """The key this ITL statistic is written with: itl, itl_mean or itl_pQ."""
        if self.itl_stat == "max":
            return "itl_max"
        if self.itl_stat == "mean":
            return "itl_mean"
        return f"itl_p{float(self.itl_stat):g}"

    def describe(self) -> str:
        """Human text, e.g. ``"ttft ≤ 200.00 ms, tpot ≤ 50.00 ms"``."""
        if not self.constraints():
            return "no SLO (every completed request counts as good)"
        names = {"itl": self.itl_key}
        return ", ".join(f"{names.get(k, k)} ≤ {fmt_duration(v)}" for k, v in self.constraints())

    def definitions(self) -> list[str]:
        """One line per constrained metric: its name and what it measures, per request."""
        out = []
        for k, _ in self.constraints():
            if k == "itl":
                key = self.itl_key
                if self.itl_stat in ("max", "mean"):
                    text = SLO_KEYS[f"itl_{self.itl_stat}"]
                else:
                    text = f"{float(self.itl_stat):g}-th percentile of a request's own gaps between chunks"
            else:
                key, text = k, SLO_KEYS[k]
            out.append(f"{key}: {text}")
        return out

    @property
    def constrained_itl_key(self) -> str | None:
        """:attr:`itl_key` when an ITL threshold is set, else None."""
        return self.itl_key if self.itl_s is not None else None

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


#: a percentile over requests written into a per-request key: p99_ttft, ttft_p99, tpot_p90, e2el_p95
_OVER_REQUESTS = re.compile(r"^(?:p(\d+(?:\.\d+)?)_)?(ttft|tpot|e2e|e2el)(?:_p(\d+(?:\.\d+)?))?$")


def _key_stat(name: str, notes: list[str]) -> tuple[str, str | float | None]:
    """(canonical key, ITL statistic or None) of an SLO key as written (aliases and the old 'itl' spelling read).

    Raises:
        InputError: an ITL percentile outside (0, 100].
        UnknownNameError: an unknown key (close names suggested).
    """
    key = _ALIASES.get(name.lower(), name.lower())
    if key == "itl":
        notes.append(ITL_OLD_SPELLING_NOTE)
        key = "itl_max"
    if key in ("itl_max", "itl_mean"):
        return key, key.removeprefix("itl_")
    if _ITL_PCT.match(key):
        q = float(_ITL_PCT.match(key).group(1))
        if not 0 < q <= 100:
            raise range_error(f"SLO key {key!r}: percentile", q, "(0, 100]")
        return key, q
    if key not in ("ttft", "tpot", "e2e") and (pm := _OVER_REQUESTS.match(key)):
        metric, q = _ALIASES.get(pm.group(2), pm.group(2)), float(pm.group(1) or pm.group(3))
        raise InputError(f"SLO key {name!r}: each limit here holds per request, and a percentile over requests is the "
                         f"share of them within it: 'p{q:g} {metric.upper()} within X' is --slo {metric}=X with "
                         f"--target {q / 100:g} (goodput --target, cost and search take it; ITL alone has per-request "
                         "percentiles, itl_pQ, of each request's own gaps)")
    if key not in ("ttft", "tpot", "e2e"):
        raise UnknownNameError("SLO key", name, list(SLO_KEYS) + ["itl_p99", "e2el", "itl"],
                               hint="(ttft, tpot, itl_max, itl_mean, itl_pQ, e2e)")
    return key, None


def _repeated(first: str, again: str, slot: str, text: str) -> InputError:
    """The error for a second key on one limit, naming the keys as given."""
    if first.lower() == again.lower():
        return InputError(f"SLO key {again!r} given twice in {text!r}: give each limit once")
    if slot == "itl":
        return InputError(f"SLO keys {first!r} and {again!r} in {text!r} are both ITL statistics (one ITL statistic "
                          "at a time)")
    return InputError(f"SLO keys {first!r} and {again!r} in {text!r} set the same {slot} limit: give it once")


_VLLM_ITEM = re.compile(r"^([A-Za-z0-9_.]+):(\d+(?:\.\d*)?|\.\d+)$")


def _from_vllm_goodput(text: str, notes: list[str]) -> str:
    """``text`` in kvledger's syntax: vLLM's ``--goodput`` syntax (``"ttft:300 tpot:50"``: items apart by spaces, each
    KEY:NUMBER in milliseconds, vllm/benchmarks/serve.py parse_goodput) rewritten as ``"ttft=300ms,tpot=50ms"`` with
    a note saying so; anything else as given."""
    parts = text.split()
    if "," in text or not parts or not all(_VLLM_ITEM.match(p) for p in parts):
        if "," not in text and len(parts) > 1 and all(re.match(r"^[A-Za-z0-9_.]+[=:]\S", p) for p in parts):
            raise InputError(f"--slo {text.strip()!r}: items are separated by commas, each value with its unit "
                             "(e.g. 'ttft=300ms,tpot=50ms'); vLLM's --goodput syntax, "
                             "'ttft:300 tpot:50' (every value a bare number of milliseconds), is read too")
        return text
    out = ",".join(f"{k}={v}ms" for k, v in (_VLLM_ITEM.match(p).groups() for p in parts))  # type: ignore[union-attr]
    notes.append(f"--slo {text.strip()!r} read as vLLM's --goodput syntax, milliseconds implied: {out}")
    return out


def parse_slo(text: str) -> SLO:
    """Parse ``"ttft=200ms,tpot=50ms"`` (``:`` also accepted instead of ``=``; every value needs a unit), or vLLM's
    ``--goodput`` syntax ``"ttft:200 tpot:50"`` (milliseconds, as vLLM takes them; a note says so).

    Raises:
        InputError: empty text or an empty item, a part without ``=``, a value without unit or not above zero, a
            repeated key, or more than one ITL statistic.
        UnknownNameError: an unknown key (close names suggested).
    """
    if not text or not text.strip():
        raise InputError("--slo is empty; write e.g. 'ttft=200ms,tpot=50ms' (keys: " + ", ".join(SLO_KEYS) + ")")
    values: dict[str, float] = {}
    given: dict[str, str] = {}  # slot → the key as written
    itl_stat: str | float = "max"
    notes: list[str] = []
    text = _from_vllm_goodput(text, notes)
    for part in text.split(","):
        part = part.strip()
        if not part:
            raise InputError(f"--slo {text!r} has an empty item (two commas together, or a comma at an end); write "
                             "KEY=VALUE items separated by one comma, e.g. 'ttft=200ms,tpot=50ms'")
        m = re.match(r"^([A-Za-z0-9_.]+)\s*[=:]\s*(.+)$", part)
        if not m:
            raise InputError(f"SLO part {part!r} is not KEY=VALUE; write e.g. 'ttft=200ms'")
        key, stat = _key_stat(m.group(1), notes)
        slot = "itl" if stat is not None else key
        if slot in values:
            raise _repeated(given[slot], m.group(1), slot, text)
        given[slot] = m.group(1)
        values[slot] = parse_duration_s(m.group(2).strip(), what=f"SLO {m.group(1)}")
        if values[slot] <= 0:
            raise InputError(f"SLO {m.group(1)}: {m.group(2).strip()!r} is no limit — no request meets a zero "
                             "latency; give a positive one, e.g. 'ttft=200ms'")
        if values[slot] > SLO_MAX_S:
            raise InputError(f"SLO {m.group(1)}: {m.group(2).strip()!r} is longer than a day ({SLO_MAX_S:,.0f} s), the "
                             "longest limit read; a serving SLO is milliseconds to minutes")
        if stat is not None:
            itl_stat = stat
    return SLO(values.get("ttft"), values.get("tpot"), values.get("e2e"), values.get("itl"), itl_stat, tuple(notes))
