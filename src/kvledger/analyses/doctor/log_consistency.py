"""A log's start-up figures checked against each other, before the ledger: a utilization whose requested memory the
log prints otherwise (an edited log, or lines of different runs), and how much of a residual 2-decimal rounding can
make (vLLM prints GiB to 2 decimals, so each printed figure is off by at most half a unit of the last)."""

from __future__ import annotations

from kvledger.evidence.vllm_log import StartupFacts
from kvledger.units import GiB

__all__ = ["ROUNDING_GIB", "rounding_bound_bytes", "residual_words", "utilization_contradiction"]

ROUNDING_GIB = 0.005
"""The most a GiB figure printed to 2 decimals is off from the bytes it stands for, GiB."""


def rounding_bound_bytes(figures: int) -> float:
    """The most a sum or difference of ``figures`` printed GiB figures can be off by rounding alone, B."""
    return figures * ROUNDING_GIB * GiB


def residual_words(resid: float, figures: int) -> str:
    """The available-KV residual (ledger − log less every itemised term's difference, B) in words: rounding where the
    ``figures`` printed figures it sums can make it, else more than rounding (never called rounding past that)."""
    bound = rounding_bound_bytes(figures) / GiB
    if abs(resid) <= rounding_bound_bytes(figures):
        return (f"residual {resid / GiB:+.2f} GiB (2-decimal rounding: at most ±{bound:.3f} GiB over these {figures} "
                "printed figures)")
    return (f"residual {resid / GiB:+.2f} GiB: more than 2-decimal rounding of these {figures} printed figures can "
            f"make (±{bound:.3f} GiB), so a term the log does not itemise, or printed figures that disagree with each "
            "other")


def utilization_contradiction(st: StartupFacts) -> str | None:
    """The warning where the log prints a requested memory that is not its own gpu_memory_utilization × its device
    total (both read from other lines), beyond what 2-decimal rounding of both allows; None where they agree or the
    log prints no such pair. vLLM computes the request from the setting (v1/worker/utils.py::request_memory), so the
    lines cannot both be one run's as printed."""
    req, total, util = st.requested_memory_bytes, st.total_gpu_memory_bytes, st.gpu_memory_utilization
    r_line, u_line, t_line = (st.lines.get(k) for k in ("requested_memory_bytes", "gpu_memory_utilization",
                                                        "total_gpu_memory_bytes"))
    if None in (req, total, util, r_line, u_line, t_line) or r_line == u_line or not total:
        return None
    expect, slack = total * util, (1 + util) * ROUNDING_GIB * GiB  # the request's rounding, and the total's × util
    if abs(req - expect) <= slack:
        return None
    return (f"the log disagrees with itself: line {u_line} sets gpu_memory_utilization {util:g}, but line {r_line} "
            f"prints a requested memory of {req / GiB:.2f} GiB, {req / total:.3f} of the {total / GiB:.2f} GiB device "
            f"total (line {t_line}); {util:g} of it is {expect / GiB:.2f} GiB ({(req - expect) / GiB:+.2f} GiB, more "
            f"than the ±{slack / GiB:.4f} GiB 2-decimal rounding allows). The log was edited, or its lines come from "
            f"different runs: the comparison below takes line {u_line}'s setting, so the gap shows in the requested "
            "memory, not as rounding")
