"""Strict JSON for reports and the web app: no NaN or Infinity (NaN → null, ±inf → "inf"/"-inf"), dollar figures
rounded as every ``--json`` rounds them (``kvledger.strict_json``)."""

from __future__ import annotations

import json
import math
from typing import Any

__all__ = ["strict_json"]


def _finite(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None if math.isnan(x) else ("inf" if x > 0 else "-inf")
    if isinstance(x, dict):
        return {k: _finite(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_finite(v) for v in x]
    return x


def strict_json(data: Any, indent: int | None = None) -> str:
    """``data`` as strict JSON; objects json cannot encode are written with ``str``."""
    from kvledger.strict_json import to_strict

    return json.dumps(to_strict(_finite(json.loads(json.dumps(data, default=str)))), indent=indent, allow_nan=False)
