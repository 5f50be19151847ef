"""The Python API: ``plan``, ``simulate`` and ``goodput`` by model and GPU name, typed keyword parameters checked at
the call, each result's ``to_dict()`` equal to the command's ``--json`` (``kvledger.plan`` and the others are these)."""

from kvledger.api.calls import goodput, plan, simulate
from kvledger.api.results import GoodputResult, PlanResult

__all__ = ["plan", "simulate", "goodput", "PlanResult", "GoodputResult"]
