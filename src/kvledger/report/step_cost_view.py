"""The step cost of a run as ``simulate`` prints it, and which calibration scope priced it; the judgment commands
(``fp8-kv``, ``spec-decode``, ``disagg``, ``offload``) print the same lines for the step cost they share with it."""

from __future__ import annotations

__all__ = ["step_cost_lines", "priced_by"]


def step_cost_lines(cost: dict) -> list[str]:
    """The step cost and the calibration scope that priced it, as ``simulate`` prints them (rich markup); the judgment
    commands print the same two lines for the cost ``analyses.serving.plan_pricing`` chose."""
    return [f"[bold]step cost[/]: {cost['name']} — {cost['source']}", f"[bold]priced by[/]: {priced_by(cost)}"]


def priced_by(cost: dict) -> str:
    """Which calibration scope priced the steps (docs/calibration/guide.md): ``gpu: GPU profile FILE (fitted on …)``,
    ``model (…)`` or ``uncalibrated``."""
    if cost.get("priced_by"):
        return str(cost["priced_by"])
    scope = str(cost.get("scope") or "uncalibrated")
    if scope.startswith("model"):
        return f"model: {cost.get('name')}" + (" (bundled measurements)" if "bundled" in scope else "")
    return scope + (" (roofline at the default or given fractions; no GPU profile)" if scope == "uncalibrated" else "")
