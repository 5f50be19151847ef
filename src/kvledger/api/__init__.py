"""The Python API: ``plan``, ``simulate``, ``goodput``, ``cost`` and ``search`` by model and GPU name (or a benchmark
file), typed keyword parameters checked at the call, each result's ``to_dict()`` equal to the command's ``--json``
(``kvledger.plan`` and the others are these)."""

from kvledger.analyses.search.offload_report import OffloadVariant
from kvledger.api.calls import plan
from kvledger.api.cost_call import cost
from kvledger.api.results import CostResult, GoodputResult, PlanResult
from kvledger.api.search_call import SearchDocument, search
from kvledger.api.sim_call import SessionReport, SimDocument, SimTierReport, goodput, simulate

__all__ = ["plan", "simulate", "goodput", "cost", "search", "PlanResult", "GoodputResult", "CostResult", "SimDocument",
           "SessionReport", "SimTierReport", "SearchDocument", "OffloadVariant"]
