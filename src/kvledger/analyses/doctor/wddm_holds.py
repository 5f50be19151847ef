"""The memory a Windows display driver (WDDM: Windows, WSL2) and its desktop hold on a GPU, from public start-ups:
``benchmarks/data/wddm_holds.csv`` (sources in ``wddm_holds.SOURCES.md``), and the fit the plan's
``accounting/wddm.WDDM_HOLD_FIT`` is taken from.

Each record prints CUDA's whole-board total (WDDM reports nvidia-smi's total) and the free memory at a known point:
vLLM's start-up check ("Free memory on device (free/total GiB) on startup", only its CUDA context made), a fresh torch
process's ``mem_get_info``, or a torch OOM line ("total capacity X of which Y is free … A allocated by PyTorch, and R
reserved but unallocated"). The hold = total − free − the process's torch memory − any other stated context − the
CUDA context a Linux process shows at the same point (``wddm.WDDM_CONTEXT_GIB``): what a process loses under WDDM
beyond what it loses on Linux, where the driver's reserve is left out of the total and the context sits in the
engine's own fitted terms.

The fit is Theil–Sen on the board size (the median of the pairwise slopes between records on boards of different
sizes; intercept the median of hold − slope × board): the desktop records with browsers and GUI applications are kept,
and a median does not let them set the line. Leave-one-card-out: every record of one card predicted by the fit on
the other cards.
"""

from __future__ import annotations

import csv
import statistics as st
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from itertools import combinations
from pathlib import Path

from kvledger.accounting.wddm import WDDM_CONTEXT_GIB

__all__ = ["HoldRecord", "fit_constant", "fit_share", "fit_wddm_hold", "load_wddm_holds", "wddm_hold_loco"]

_SAME_BOARD_GIB = 1.0
"""Pairs of records on boards closer than this (the same card class: 15.92 and 15.99, 23.99 and 24.00 GiB) give no
slope."""


@dataclass(frozen=True)
class HoldRecord:
    """One public record: its id, card (the ``gpu`` column before " class" or " ("), board GiB, and the hold, GiB."""

    id: str
    card: str
    board_gib: float
    hold_gib: float


def _card(gpu: str) -> str:
    return gpu.split(" class", 1)[0].split(" (", 1)[0].strip()


def load_wddm_holds(path: Path, context_gib: float = WDDM_CONTEXT_GIB[1]) -> list[HoldRecord]:
    """The records of ``path`` with their holds: total − free − torch − other context − ``context_gib``."""
    with path.open(newline="", encoding="utf-8") as f:
        rows = list(csv.DictReader(f))
    out = []
    for r in rows:
        used = float(r["total_gib_printed"]) - float(r["free_gib_printed"]) - float(r["torch_gib_printed"] or 0)
        out.append(HoldRecord(r["id"], _card(r["gpu"]), float(r["board_gib"]),
                              used - float(r["other_context_gib"] or 0) - context_gib))
    return out


def fit_wddm_hold(records: Sequence[HoldRecord]) -> tuple[float, float]:
    """Theil–Sen (intercept GiB, GiB per board GiB) of the hold on the board size."""
    slopes = [(b.hold_gib - a.hold_gib) / (b.board_gib - a.board_gib) for a, b in combinations(records, 2)
              if abs(b.board_gib - a.board_gib) > _SAME_BOARD_GIB]
    slope = st.median(slopes)
    return st.median([r.hold_gib - slope * r.board_gib for r in records]), slope


def fit_constant(records: Sequence[HoldRecord]) -> tuple[float, float]:
    """The alternative of an absolute hold: (the median hold GiB, 0)."""
    return st.median(r.hold_gib for r in records), 0.0


def fit_share(records: Sequence[HoldRecord]) -> tuple[float, float]:
    """The alternative of a share of the board: (0, the median hold ÷ board)."""
    return 0.0, st.median(r.hold_gib / r.board_gib for r in records)


Fit = Callable[[Sequence[HoldRecord]], tuple[float, float]]


def _line(fit: tuple[float, float]) -> Callable[[float], float]:
    return lambda board: fit[0] + fit[1] * board


def wddm_hold_loco(records: Sequence[HoldRecord], fit: Fit = fit_wddm_hold) -> dict[str, float]:
    """Leave-one-card-out errors of ``fit`` (the plan's Theil–Sen line unless another is given), GiB: ``per_record``
    (mean |error| over the records), ``per_card`` (the mean over cards of each card's mean |error|), ``max``, and
    ``bias`` (mean signed error, predicted − record)."""
    errs: list[float] = []
    per_card: list[float] = []
    for card in sorted({r.card for r in records}):
        line = _line(fit([r for r in records if r.card != card]))
        e = [line(r.board_gib) - r.hold_gib for r in records if r.card == card]
        errs += e
        per_card.append(st.mean(abs(x) for x in e))
    return {"per_record": st.mean(abs(x) for x in errs), "per_card": st.mean(per_card),
            "max": max(abs(x) for x in errs), "bias": st.mean(errs)}
