"""Ledgers: goodput and cost, computed from RunRecords (simulated or measured alike).

Public API: :func:`goodput` (exact for per-request runs, a flagged bounded estimate for
aggregate-only ones) with :func:`parse_slo`/:class:`SLO`; :func:`boundary_from_sweep` and
:func:`search_boundary` (DistServe goodput: the largest load meeting an attainment target);
:func:`build_cost_report` with :class:`SelfHostSetup`, :class:`GpuRate`, :class:`ApiMix`,
:class:`DecisionFactors` and :class:`MonthlyVolume` (the itemised self-host-vs-API ledger).
"""

# eager: the submodule ``goodput`` shares its name with the function, which must win over the module attribute the
# import system sets; both modules are small
from kvledger.ledgers.goodput import GoodputResult, goodput
from kvledger.ledgers.slo import SLO, parse_slo

__all__ = ["goodput", "GoodputResult", "SLO", "parse_slo", "boundary_from_sweep", "search_boundary",
           "build_cost_report",
           "SelfHostSetup", "GpuRate", "ApiMix", "DecisionFactors", "MonthlyVolume"]

# name → the submodule defining it, imported on first use (PEP 562): a command that needs one ledger module (simulate
# reads only error_band) does not import the cost ledgers (about 20 ms of start-up)
_LAZY = {"ApiMix": "api_cost", "boundary_from_sweep": "boundary", "search_boundary": "boundary",
         "GpuRate": "cost", "SelfHostSetup": "cost", "DecisionFactors": "cost_summary",
         "MonthlyVolume": "cost_summary", "build_cost_report": "cost_summary"}


def __getattr__(name: str):
    if name in _LAZY:
        import importlib

        value = getattr(importlib.import_module(f"kvledger.ledgers.{_LAZY[name]}"), name)
        globals()[name] = value
        return value
    raise AttributeError(f"module 'kvledger.ledgers' has no attribute {name!r}")
