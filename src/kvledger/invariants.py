"""What a result must satisfy before it is printed: a check that turns an impossible number into a loud internal error.

An impossible result (attainment above 1, goodput above throughput, KV usage above 100 % or a
mean above the maximum, a negative time) is a bug in kvledger, never a property of the input:
the input was validated at the boundary. So a failed check raises
:class:`ImpossibleResultError`, which is deliberately *not* a ``KvLedgerError``: it is reported
with its traceback, to be fixed, instead of being printed as a polite message or as a number.
"""

from __future__ import annotations

import math
from typing import Any, TypeVar

__all__ = ["ImpossibleResultError", "check_goodput_result", "check_sim_summary"]

_EPS = 1e-9


class ImpossibleResultError(RuntimeError):
    """A computed result breaks its own definition (a bug; please report it with the command line)."""


def _fail(what: str, detail: str) -> None:
    raise ImpossibleResultError(f"{what}: {detail} — an impossible result; this is a kvledger bug, please report the "
                                f"command")


def _nonneg(what: str, name: str, v: Any) -> None:
    if v is not None and not (isinstance(v, (int, float)) and (math.isnan(v) or v >= 0)):
        _fail(what, f"{name} = {v} is negative")


def check_goodput_result(res: Any) -> Any:
    """Goodput ≤ throughput (requests and tokens), good ≤ completed ≤ requests, attainment in [0, 1], rates ≥ 0."""
    what = f"goodput of {res.source}"
    for name in ("attainment", "attainment_upper", "attainment_of_completed"):
        v = getattr(res, name, None)
        if v is not None and not (0.0 <= v <= 1.0 + _EPS):
            _fail(what, f"{name} = {v} outside [0, 1]")
    if not (0 <= res.num_good <= res.num_completed <= res.num_requests):
        _fail(what, f"good {res.num_good}, completed {res.num_completed}, requests {res.num_requests}")
    for name in ("duration_s", "goodput_req_per_s", "throughput_req_per_s", "goodput_output_tok_per_s",
                 "throughput_output_tok_per_s", "goodput_input_tok_per_s", "throughput_input_tok_per_s"):
        _nonneg(what, name, getattr(res, name, None))
    for good, thr in (("goodput_req_per_s", "throughput_req_per_s"), ("goodput_output_tok_per_s",
                                                                      "throughput_output_tok_per_s"),
                      ("goodput_input_tok_per_s", "throughput_input_tok_per_s")):
        a, b = getattr(res, good, None), getattr(res, thr, None)
        if a is not None and b is not None and a > b * (1 + _EPS) + _EPS:
            _fail(what, f"{good} {a} > {thr} {b}")
    return res


_S = TypeVar("_S")


def check_sim_summary(s: _S) -> _S:
    """A simulation summary (``kvledger.dynamics.outputs.metrics.Summary``, read by attribute): counts add up, times
    ≥ 0, percentiles in order, KV usage in [0, 1] with mean ≤ max, prefix-cache hit rate in [0, 1]."""
    what = "simulation summary"
    fin, rej, n = (getattr(s, k, 0) for k in ("num_finished", "num_rejected", "num_requests"))
    if fin + rej > n:
        _fail(what, f"finished {fin} + rejected {rej} > requests {n}")
    for name in ("duration_s", "throughput_req_per_s", "throughput_output_tok_per_s", "total_throughput_tok_per_s",
                 "num_preemptions"):
        _nonneg(what, name, getattr(s, name, None))
    for metric in ("ttft_s", "itl_s", "tpot_s", "e2e_s"):
        st = getattr(s, metric, None)
        if st is None:
            continue
        d = vars(st)
        for k, v in d.items():
            _nonneg(what, f"{metric}.{k}", v)
        ps = [d[k] for k in ("p50", "p90", "p99") if isinstance(d.get(k), (int, float)) and not math.isnan(d[k])]
        if any(b < a - _EPS for a, b in zip(ps, ps[1:])):
            _fail(what, f"{metric} percentiles out of order: {ps}")
    hit = getattr(s, "prefix_cache_hit_rate", None)
    if isinstance(hit, (int, float)) and not (0.0 <= hit <= 1.0 + _EPS):
        _fail(what, f"prefix_cache_hit_rate = {hit}")
    kv = getattr(s, "kv_usage", None)
    if isinstance(kv, dict):
        vals = {k: kv.get(k) for k in ("mean", "mean_busy", "max") if isinstance(kv.get(k), (int, float))}
        for k, v in vals.items():
            if not (0.0 <= v <= 1.0 + _EPS):
                _fail(what, f"kv_usage.{k} = {v} outside [0, 1]")
        if "mean" in vals and "max" in vals and vals["mean"] > vals["max"] + _EPS:
            _fail(what, f"kv_usage mean {vals['mean']} > max {vals['max']}")
    return s
