"""How an SLO is shown next to a result: the thresholds, what each metric means per request, and notes."""

from __future__ import annotations

from typing import Any

__all__ = ["slo_block"]


def slo_block(slo: Any) -> str:
    """``"ttft ≤ 200.00 ms, itl_max ≤ 50.00 ms"`` followed by one indented line per definition and note.

    ``slo`` is a :class:`kvledger.ledgers.slo.SLO` or its ``to_dict()``.
    """
    d = slo if isinstance(slo, dict) else slo.to_dict()
    lines = [d["text"]]
    lines += [f"  {x}" for x in d.get("definitions", [])]
    lines += [f"  note: {x}" for x in d.get("notes", [])]
    return "\n".join(lines)
