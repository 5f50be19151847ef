"""The warnings a reader attached to a run (its notes that start with ``records.WARNING_PREFIX``: a report read without
the run's settings beside it, a TPOT judged on a field not trusted), printed above goodput's table, once for the runs
that share one."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from kvledger.records import WARNING_PREFIX

__all__ = ["is_warning", "run_warnings"]


def is_warning(note: str) -> bool:
    """Whether ``note`` is a warning (printed above the table, not again among the run's notes)."""
    return note.startswith(WARNING_PREFIX)


def run_warnings(results: list[Any]) -> list[str]:
    """Each warning once, without its prefix; one that not every run carries names its run (#K FILE [LABEL])."""
    out: list[str] = []
    for k, r in enumerate(results, start=1):
        for note in filter(is_warning, r.notes):
            text = note.removeprefix(WARNING_PREFIX)
            if len(results) > 1 and not all(note in other.notes for other in results):
                text = f"run #{k} {Path(r.file).name}" + (f" [{r.run_label}]" if r.run_label else "") + f": {text}"
            if text not in out:
                out.append(text)
    return out
