"""Strict JSON for reports and the web app: no NaN or Infinity (NaN → null, ±inf → "inf"/"-inf"), dollar figures
rounded as every ``--json`` rounds them (``kvledger.strict_json.to_strict`` does both)."""

from __future__ import annotations

import json
from typing import Any

__all__ = ["strict_json"]


def strict_json(data: Any, indent: int | None = None) -> str:
    """``data`` as strict JSON; objects json cannot encode are written with ``str``."""
    from kvledger.strict_json import to_strict

    return json.dumps(to_strict(json.loads(json.dumps(data, default=str))), indent=indent, allow_nan=False)
