"""Ledgers: goodput and cost, computed from RunRecords (simulated or measured alike).

Public API: :func:`goodput` (exact for per-request runs, a flagged bounded estimate for
aggregate-only ones) with :func:`parse_slo`/:class:`SLO`; :func:`boundary_from_sweep` and
:func:`search_boundary` (DistServe goodput: the largest load meeting an attainment target);
:func:`build_cost_report` with :class:`SelfHostSetup`, :class:`GpuRate`, :class:`ApiMix`,
:class:`DecisionFactors` and :class:`MonthlyVolume` (the itemised self-host-vs-API ledger).
"""

from kvledger.ledgers.api_cost import ApiMix
from kvledger.ledgers.boundary import boundary_from_sweep, search_boundary
from kvledger.ledgers.cost import GpuRate, SelfHostSetup
from kvledger.ledgers.cost_summary import DecisionFactors, MonthlyVolume, build_cost_report
from kvledger.ledgers.goodput import GoodputResult, goodput
from kvledger.ledgers.slo import SLO, parse_slo

__all__ = ["goodput", "GoodputResult", "SLO", "parse_slo", "boundary_from_sweep", "search_boundary",
           "build_cost_report",
           "SelfHostSetup", "GpuRate", "ApiMix", "DecisionFactors", "MonthlyVolume"]
