"""The step cost of a run as ``simulate`` prints it, and which calibration scope priced it; the judgment commands
(``fp8-kv``, ``spec-decode``, ``disagg``, ``offload``) print the same lines for the step cost they share with it."""

from __future__ import annotations

__all__ = ["step_cost_lines", "step_cost_source_line", "step_cost_warnings", "print_step_cost_warnings", "priced_by",
           "SOURCE_BELOW"]

#: what the step-cost line above the figures says of its source, printed under them (``step_cost_source_line``): the
#: answer first, the long provenance after it
SOURCE_BELOW = "its source under the figures"


def step_cost_warnings(cost: dict) -> list[str]:
    """One line per warning about the step cost's fit to this run (``cost["warnings"]``: a model-scope profile on
    another model or TP, or beyond the range it was fitted on; ``analyses/serving/profile_scope.py``)."""
    return [f"[bold yellow]warning[/]: {w}" for w in cost.get("warnings") or ()]


def step_cost_lines(cost: dict, warnings: bool = True) -> list[str]:
    """The step cost's name and the calibration scope that priced it, as ``simulate`` prints them above its figures
    (rich markup), after its warnings unless ``warnings`` is off (``simulate`` prints them first of all); the judgment
    commands print the same lines for the cost ``analyses.serving.plan_pricing`` chose. Its source, a paragraph, is
    ``step_cost_source_line``, printed under the figures."""
    weights = f"; {cost['weights']}" if cost.get("weights") else ""  # --quantization fp8 (online_quant.py)
    return (step_cost_warnings(cost) if warnings else []) + [
        f"[bold]step cost[/]: {cost['name']} ({SOURCE_BELOW}){weights}", f"[bold]priced by[/]: {priced_by(cost)}"]


def step_cost_source_line(cost: dict) -> str:
    """``step cost source: …``: how the step cost named above the figures prices a step (formula, fractions, the
    data and error of what was fitted), printed under them."""
    return f"[dim]step cost source: {cost['source']}[/]"


def priced_by(cost: dict) -> str:
    """Which calibration scope priced the steps (docs/calibration/guide.md): ``gpu: GPU profile FILE (fitted on …)``,
    ``model (…)`` or ``uncalibrated``."""
    if cost.get("priced_by"):
        return str(cost["priced_by"])
    scope = str(cost.get("scope") or "uncalibrated")
    if scope.startswith("model"):
        return f"model: {cost.get('name')}" + (" (bundled measurements)" if "bundled" in scope else "")
    from kvledger.analyses.serving.roofline_choice import UNCALIBRATED_PRICED_BY

    return UNCALIBRATED_PRICED_BY if scope == "uncalibrated" else scope


def print_step_cost_warnings(sim) -> None:
    """Print ``step_cost_warnings`` of a simulated run (``analyses.serving.sim_ledgers.SimulatedRun``; None: nothing),
    first of a command's output (``cost --simulate``, ``goodput --simulate``)."""
    from rich.console import Console

    con = Console(highlight=False)
    for line in step_cost_warnings(getattr(getattr(sim, "setup", None), "cost_info", None) or {}):
        con.print(line)
