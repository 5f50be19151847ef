"""The Python API: ``plan``, ``simulate``, ``goodput`` and ``cost`` by model and GPU name (or a benchmark file), typed
keyword parameters checked at the call, each result's ``to_dict()`` equal to the command's ``--json``
(``kvledger.plan`` and the others are these)."""

from kvledger.api.calls import goodput, plan, simulate
from kvledger.api.cost_call import cost
from kvledger.api.results import CostResult, GoodputResult, PlanResult

__all__ = ["plan", "simulate", "goodput", "cost", "PlanResult", "GoodputResult", "CostResult"]
