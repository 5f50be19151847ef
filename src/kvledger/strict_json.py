"""Strict JSON for every ``--json`` output and every file a command writes: no NaN or Infinity, ever.

Python's ``json`` writes ``NaN`` and ``Infinity``, which are not JSON (RFC 8259) and break
``jq``, JavaScript and most other readers. An infinite request rate (every request at t = 0) is
written where it is made as ``null`` with ``"all_at_once": true`` beside it (:func:`finite_rate`), so a
``*_req_per_s`` field is always a number or null; any other infinite value that still reaches
:func:`dumps` is written as the string ``"inf"`` (or ``"-inf"``), and a NaN ("no value") as ``null``.
Dollar figures (a key naming ``usd``) are rounded here, at
the boundary, never where they are computed: a monthly total to the cent (a key naming the month, or any amount of
a ledger or band in "USD per month" but its unit prices), any other to 15 significant digits.
numpy scalars and arrays become plain numbers and lists; a result object (one with ``to_dict()``, or a read-only
mapping) its document; anything else JSON has no type for is written as its ``str``.
Files are written atomically: to a temporary file in the same folder, then renamed.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any

import numpy as np

from kvledger.outputs import temp_beside, write_text_atomic  # the atomic writes live there

__all__ = ["temp_beside", "dumps", "to_strict", "write_text_atomic", "finite_rate", "ALL_AT_ONCE", "MONEY_DIGITS",
           "MONTHLY"]

#: the key beside a rate written as null because it was infinite: every request arrived at t = 0
ALL_AT_ONCE = "all_at_once"


def _document(obj: Any) -> Any:
    """``obj``'s own document where it has one (a result record's ``to_dict()``, a read-only mapping as a dict), else
    ``obj``: a result object is written as the document it stands for, never as its printed form."""
    to_dict = getattr(obj, "to_dict", None)
    if callable(to_dict):
        return to_dict()
    if isinstance(obj, Mapping) and not isinstance(obj, dict):
        return dict(obj)
    return obj


def _default(obj: Any) -> Any:
    doc = _document(obj)
    if doc is not obj:
        return doc
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


#: money: a monthly total to the cent; any other dollar figure (per request, per Mtok, per GPU-hour, a unit price per
#: GiB-month) to 15 significant digits, as many as a double holds exactly, which keeps every real digit and drops the
#: float noise of its sum or product (0.003935409999999999 → 0.00393541, 1742.0210459999998 → 1742.021046)
MONEY_DIGITS = 15


#: the unit a ledger (``"per"``) or a band (``"unit"``) names when its amounts are monthly bills
MONTHLY = "USD per month"


def _money(key: str, x: float, monthly: bool = False) -> float:
    """``x``, the value at dollar ``key`` (a key naming ``usd``), rounded for JSON (:data:`MONEY_DIGITS`); ``monthly``:
    ``key`` is inside a ledger or band in USD per month, whose amounts (``total_usd``, ``amount_usd``) are monthly
    bills and whose unit prices (``unit_price_usd``, ``usd_per_…``) are not."""
    if "month" in key and "per_gib" not in key and "per_unit" not in key:
        return round(x, 2)
    if monthly and "unit_price" not in key and "_per_" not in key:
        return round(x, 2)
    return float(f"{x:.{MONEY_DIGITS}g}")


def to_strict(obj: Any, key: str = "", monthly: bool = False) -> Any:
    """A copy of ``obj`` with every non-finite float replaced (inf → "inf", -inf → "-inf", NaN → None) and every
    dollar figure (at a key naming ``usd``) rounded (:func:`_money`; ``monthly``: inside a ledger or band in
    :data:`MONTHLY`); numpy values as plain ones; a result object as its document (:func:`_document`)."""
    obj = _document(obj)
    if isinstance(obj, float):
        x = _float(obj)
        return _money(key, x, monthly) if "usd" in key and isinstance(x, float) else x
    if isinstance(obj, dict):
        monthly = monthly or MONTHLY in (obj.get("per"), obj.get("unit"))
        # a figure under a dollar key ({"usd_per_mtok_output": {"min": …, "max": …}}) is a dollar figure too
        return {k: to_strict(v, _child_key(key, k), monthly) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [to_strict(v, key, monthly) for v in obj]
    if isinstance(obj, np.ndarray):
        return [to_strict(v, key, monthly) for v in obj.tolist()]
    if isinstance(obj, np.generic):
        return to_strict(obj.item(), key, monthly)
    return obj


def _child_key(parent: str, key: Any) -> str:
    """The key a value under ``parent`` is rounded by: its own, or its dollar parent's where its own names no dollar
    figure (``min`` under ``usd_per_mtok_output``)."""
    own = key if isinstance(key, str) else ""
    return parent if "usd" in parent and "usd" not in own else own


def dumps(obj: Any, **kwargs: Any) -> str:
    """``json.dumps`` that always produces strict JSON, its dollar figures rounded (see the module docstring)."""
    try:
        text = json.dumps(obj, allow_nan=False, default=_default, **kwargs)
    except ValueError:  # a NaN or an infinity somewhere: rewrite the value (the slow path, rare)
        return json.dumps(to_strict(obj), allow_nan=False, default=_default, **kwargs)
    if "usd" not in text:  # no dollar figure: as written (the common case, and every large document)
        return text
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
