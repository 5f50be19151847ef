"""Strict JSON for every ``--json`` output and every file a command writes: no NaN or Infinity, ever.

Python's ``json`` writes ``NaN`` and ``Infinity``, which are not JSON (RFC 8259) and break
``jq``, JavaScript and most other readers. An infinite request rate (every request at t = 0) is
written where it is made as ``null`` with ``"all_at_once": true`` beside it (:func:`finite_rate`), so a
``*_req_per_s`` field is always a number or null; any other infinite value that still reaches
:func:`dumps` is written as the string ``"inf"`` (or ``"-inf"``), and a NaN ("no value") as ``null``.
numpy scalars and arrays become plain numbers and lists; anything else JSON has no type for is written as its ``str``.
Files are written atomically: to a temporary file in the same folder, then renamed.
"""

from __future__ import annotations

import json
import math
from typing import Any

import numpy as np

from kvledger.outputs import temp_beside, write_text_atomic  # the atomic writes live there

__all__ = ["temp_beside", "dumps", "to_strict", "write_text_atomic", "finite_rate", "ALL_AT_ONCE"]

#: the key beside a rate written as null because it was infinite: every request arrived at t = 0
ALL_AT_ONCE = "all_at_once"


def _default(obj: Any) -> Any:
    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    return str(obj)


def _float(x: float) -> float | str | None:
    if math.isnan(x):
        return None
    if math.isinf(x):
        return "inf" if x > 0 else "-inf"
    return x


def to_strict(obj: Any) -> Any:
    """A copy of ``obj`` with every non-finite float replaced (inf → "inf", -inf → "-inf", NaN → None)."""
    if isinstance(obj, float):
        return _float(obj)
    if isinstance(obj, dict):
        return {k: to_strict(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_strict(v) for v in obj]
    if isinstance(obj, np.ndarray):
        return [to_strict(v) for v in obj.tolist()]
    if isinstance(obj, np.generic):
        return to_strict(obj.item())
    return obj


def dumps(obj: Any, **kwargs: Any) -> str:
    """``json.dumps`` that always produces strict JSON (see the module docstring)."""
    try:
        return json.dumps(obj, allow_nan=False, default=_default, **kwargs)
    except ValueError:  # a NaN or an infinity somewhere: rewrite the value (the slow path, rare)
        return json.dumps(to_strict(obj), allow_nan=False, default=_default, **kwargs)




def finite_rate(info: dict[str, Any], key: str) -> dict[str, Any]:
    """``info`` for JSON: an infinite ``info[key]`` (a request rate, every request at t = 0) as null, with
    ``"all_at_once": true`` after it; ``info`` itself, unchanged, when the rate is finite or absent."""
    v = info.get(key)
    if not (isinstance(v, float) and math.isinf(v)):
        return info
    out: dict[str, Any] = {}
    for k, x in info.items():
        out[k] = None if k == key else x
        if k == key:
            out[ALL_AT_ONCE] = True
    return out
