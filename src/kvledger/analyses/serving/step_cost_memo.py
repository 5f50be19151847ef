"""The step cost of a run kept for the next run that differs only in its offered rate (a capacity search's probes).

``make_step_cost`` builds the roofline anew for every probe, so its per-token-count terms (``token_terms``: weight
read, all-reduce, GEMM efficiency, layer kernels) start empty each time: in a default 8B search three of four look-ups
missed. The model's price is a pure function of its construction, so one kept across a candidate's probes prices the
same floats. Keyed on every argument but ``rate`` (no step cost reads it), the plan object (``load_plan``'s, kept with
it), the engine's overlap and batching, and the modification time of every argument naming a file (a GPU profile, a
calibration, a GEMM table); the last 8 kept. The description is a fresh deep copy each time (runs add to it).
"""

from __future__ import annotations

import copy
import os
from dataclasses import asdict
from typing import Any

from kvledger.analyses.serving.step_cost_choice import make_step_cost

__all__ = ["kept_step_cost", "file_mtime_ns"]

_KEPT: dict[str, tuple[Any, Any, dict[str, Any]]] = {}  # key → (plan, step cost, its description)
_MAX = 8


def file_mtime_ns(v: Any) -> int | None:
    """A file's modification time (ns) when ``v`` is a readable path, else None (a catalog name, a Hub id, not text):
    part of a memo's key, so that an edited file is read again."""
    if not isinstance(v, str) or not v:
        return None
    try:
        return os.stat(v).st_mtime_ns
    except (OSError, ValueError):
        return None


def kept_step_cost(a: Any, plan, overlap_cpu: bool, batching: str) -> tuple[Any, dict[str, Any]]:
    """``make_step_cost(a, plan, overlap_cpu, batching)``, the model kept from an earlier call with the same key."""
    fields = sorted((k, v) for k, v in asdict(a).items() if k != "rate")
    key = repr((fields, [file_mtime_ns(v) for _, v in fields], overlap_cpu, batching))
    hit = _KEPT.get(key)
    if hit is None or hit[0] is not plan:
        cost, info = make_step_cost(a, plan, overlap_cpu=overlap_cpu, batching=batching)
        if len(_KEPT) >= _MAX:
            _KEPT.pop(next(iter(_KEPT)))
        hit = _KEPT[key] = (plan, cost, copy.deepcopy(info))
    return hit[1], copy.deepcopy(hit[2])
