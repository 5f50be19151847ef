"""Ledgers: goodput and cost, computed from RunRecords (simulated or measured alike).

Public API: :func:`goodput` (exact for per-request runs, a flagged bounded estimate for
aggregate-only ones) with :func:`parse_slo`/:class:`SLO`; :func:`boundary_from_sweep` and
:func:`search_boundary` (DistServe goodput: the largest load meeting an attainment target);
:func:`build_cost_report` with :class:`SelfHostSetup`, :class:`GpuRate`, :class:`ApiMix`,
:class:`DecisionFactors` and :class:`MonthlyVolume` (the itemised self-host-vs-API ledger).
"""

from importlib import import_module
from typing import Any

_WHERE = {"ApiMix": "api_cost", "boundary_from_sweep": "boundary", "search_boundary": "boundary", "GpuRate": "cost",
          "SelfHostSetup": "cost", "DecisionFactors": "cost_report", "MonthlyVolume": "cost_report",
          "build_cost_report": "cost_report", "GoodputResult": "goodput", "goodput": "goodput", "SLO": "slo",
          "parse_slo": "slo"}

__all__ = ["goodput", "GoodputResult", "SLO", "parse_slo", "boundary_from_sweep", "search_boundary", "build_cost_report",
           "SelfHostSetup", "GpuRate", "ApiMix", "DecisionFactors", "MonthlyVolume"]


def __getattr__(name: str) -> Any:
    """The public names load their module on first use: a command importing one ledger module (``simulate``'s
    ``ledgers.columns``) does not pay for the others (about 20 ms of imports)."""
    if name not in _WHERE:
        raise AttributeError(f"module 'kvledger.ledgers' has no attribute {name!r}")
    value = getattr(import_module(f"kvledger.ledgers.{_WHERE[name]}"), name)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(__all__)
