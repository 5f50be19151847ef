"""The lines under ``preemptions (recompute): N`` in ``kvledger simulate``'s summary: why the run preempted and what to
change (``analyses.serving.preemption_why``; --json: ``preemptions``)."""

from __future__ import annotations

from typing import Any

__all__ = ["preemption_lines"]


def preemption_lines(p: dict[str, Any] | None) -> list[str]:
    """Two lines, "why" and "what to change", for a run that preempted; none otherwise."""
    if not p:
        return []
    return [f"  why: {p['why']}", f"  what to change: {p['what_to_change']}"]
