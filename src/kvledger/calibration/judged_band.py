"""A validated figure's 80% band with the measured figure beside it and whether the band covers it (``covers``), as
``kvledger validate`` prints it (✓ inside, ✗ outside) and writes it in ``error_bands`` of its ``--json``."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvledger.analyses.serving.prediction_bands import PredictionBand
from kvledger.jsonable import to_jsonable

__all__ = ["JudgedBand", "band_covers", "judged"]


def band_covers(band: Any, measured: float | None) -> bool | None:
    """Whether the measured figure lies inside a band (None without a band or a measured figure). An end is the
    prediction over (1 + an error measured on a run), so a run whose error *is* that end lands on it up to float
    rounding (kubecon `batch_size` stage 0: 6.9e-18 s past 33.319 ms): within 1e-9 of an end counts inside.

    >>> band_covers(PredictionBand(1.0, 0.5, 2.0, "r", 3, "s"), 2.0 + 1e-12), band_covers(None, 1.0)
    (True, None)
    """
    if band is None or measured is None:
        return None
    tol = 1e-9 * max(abs(band.low), abs(band.high))
    return band.low - tol <= measured <= band.high + tol


@dataclass(frozen=True)
class JudgedBand(PredictionBand):
    """A ``PredictionBand`` with the measured figure it judges (``measured``, same unit; None: the run states none
    that can be judged) and ``covers``: True inside, False outside, None unjudged."""

    __json__ = ("predicted", "low", "high", "regime", "num_runs", "source", "measured", "covers")
    measured: float | None = None

    @property
    def covers(self) -> bool | None:
        return band_covers(self, self.measured)

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


def judged(band: Any, value: float | None, measured: float | None) -> JudgedBand | None:
    """The band of the simulated ``value`` (``Band.around``) judging ``measured``; None without a band or a value."""
    if band is None or value is None:
        return None
    lo, hi = band.around(value)
    return JudgedBand(value, lo, hi, band.regime, band.num_runs, band.source, measured=measured)
