"""The TP all-reduce's link share fitted on a GPU's measured runs: how much of the link's one-direction bandwidth the
host gave the all-reduces (``tp_comm.link_bytes_per_s(gpu, share)``).

Over PCIe the share is the host's, not the GPU's: whether the GPUs have peer access, whether NCCL goes through host
memory, the PCIe switches and NUMA layout (``tp_comm.py``: 0.20–0.65 measured; 0.35 by default). A run at TP > 1 on
that host fixes it, so ``calibrate --scope gpu`` fits it where any run has TP > 1 and the all-reduce runs over PCIe
(``link_applies``): a golden-section search over log(share) in ``SHARE_RANGE`` at the grid's best fractions
(``start_share``, ``SHARE_ITERS`` steps), then the share moves with the fractions in the pattern search
(``gpu_fit``: multiplicative moves, alone and against the FLOP fraction — a prefill's matmul FLOPs and all-reduce bytes
both grow with its tokens, so one model at one TP tells only their sum; a TP 1 run, or another model, tells them
apart). The share is kept where the runs see it (``kept_share``: moving it ×1.5 either way raises the objective by
``SEEN_GAIN`` of itself); otherwise the default rule prices the all-reduces. A scale-up link (NVLink) keeps its
catalog figure: its all-reduces are a few percent of a step, which the runs cannot tell from the bandwidth fraction.
Deterministic.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from kvledger.accounting.tp_comm import over_pcie
from kvledger.calibration.search1d import golden_min

__all__ = ["SHARE_RANGE", "SHARE_ITERS", "SEEN_GAIN", "link_applies", "given_share", "start_share", "kept_share"]

SHARE_RANGE = (0.05, 1.0)
SHARE_ITERS = 24  # golden-section steps over ln(1.0 / 0.05) ≈ 3.0: 3.0 × 0.618^24 ≈ 3e-5 in ln(share)
SEEN_GAIN = 0.01  # the runs see the share when moving it by ×1.5 either way raises the objective by this share of it


def link_applies(items: list[tuple[Any, Any]]) -> bool:
    """Whether the runs fix the link share: some run has TP > 1 with its all-reduces over PCIe, and no share was
    given (``--allreduce-link-share`` holds it fixed)."""
    return given_share(items) is None and any(s.tp > 1 and over_pcie(s.plan.gpu) for _, s in items)


def given_share(items: list[tuple[Any, Any]]) -> float | None:
    """The share ``--allreduce-link-share`` gave the runs' step costs (the fit holds it and the profile records it),
    or None."""
    return next((v for _, s in items if (v := getattr(s.cost, "allreduce_link_share", None)) is not None), None)


def start_share(total: Callable[[float], float], best: tuple[float, float, float]) -> tuple[float, tuple]:
    """The share the pattern search starts from: the golden-section minimum at the grid's best fractions ``best`` =
    (FLOP fraction, bandwidth fraction, objective), and ``best`` with the objective there."""
    share, f = _golden(total)
    return share, (best[0], best[1], f)


def kept_share(total: Callable[[float | None], float], share: float, objective: float) -> float | None:
    """``share`` (rounded as the profile keeps it) if the runs see it (module docstring), else None: the default
    rule prices the all-reduces, as a profile fitted on runs that do not tell the share apart should."""
    share = round(share, 4)
    seen = max(total(share / 1.5), total(min(1.0, share * 1.5))) > objective * (1 + SEEN_GAIN)
    return share if seen else None


def _golden(total: Callable[[float], float]) -> tuple[float, float]:
    """(share, objective) at the golden-section minimum of ``total`` over log(share) in ``SHARE_RANGE``."""
    x, fx = golden_min(lambda u: total(math.exp(u)), math.log(SHARE_RANGE[0]), math.log(SHARE_RANGE[1]), SHARE_ITERS)
    return math.exp(x), fx
