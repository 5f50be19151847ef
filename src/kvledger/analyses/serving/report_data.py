"""``ReportData``: what ``kvledger report`` and the web app draw, one typed record between the analyses and the views.

Each section is the ``--json`` of the command named in ``commands`` (``kvledger.analyses.serving.decision_data``
builds them); ``to_dict`` is ``report --json``, and ``ReportData.from_dict`` reads it back, so the HTML is a function
of the printed JSON.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from kvledger.jsonable import to_jsonable

__all__ = ["ReportData"]


@dataclass(frozen=True, kw_only=True)
class ReportData:
    """The report's sections, in the order ``--json`` writes them.

    Attributes:
        inputs: the request (``ReportRequest``'s fields), the SLO in words and how the GPU price was chosen.
        plan: ``plan --json`` of the deployment.
        cost: ``cost --simulate --json`` at the SLO capacity (its ``simulation.capacity_search`` is the search).
        rate_sweep: ``simulate --json`` summaries at fractions of the capacity; None when not run (key left out).
        engine_savings: the same requests under static batching and contiguous KV; None when not run (key left out).
        kv_tiers: at the rate sized on, the run with the KV tiers given and a document pool's expected hit shares
            (``report_tiers.tier_section``); None without either (key left out).
        curves: self-hosted against API cost by utilization and by monthly volume.
        measured: one row per benchmark file given (``--bench``).
        commands: the kvledger command line whose ``--json`` each section equals.
    """

    __json_optional__ = ("rate_sweep", "engine_savings", "kv_tiers")
    inputs: dict[str, Any]
    plan: dict[str, Any]
    cost: dict[str, Any]
    rate_sweep: list[dict[str, Any]] | None = None
    engine_savings: dict[str, Any] | None = None
    kv_tiers: dict[str, Any] | None = None
    curves: dict[str, Any]
    measured: list[dict[str, Any]]
    commands: dict[str, str]

    def to_dict(self) -> dict[str, Any]:
        """``report --json``: the sections in field order, the optional ones only when run."""
        return to_jsonable(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> ReportData:
        """The record back from its JSON (``to_dict``'s output, e.g. a saved ``report --json``)."""
        return cls(**{f.name: d[f.name] for f in fields(cls) if f.name in d})
