"""A pydantic validation failure of the plan settings in words: the allowed values or bounds, not pydantic's wording
(``settings.make_settings`` and the web app's forms)."""

from __future__ import annotations

import math

__all__ = ["reason_in_words"]


def reason_in_words(e: dict) -> str:
    """One pydantic validation failure (an item of ``ValidationError.errors()``) in words: the allowed values or
    bounds, not pydantic's wording."""
    ctx, kind, value = e.get("ctx") or {}, e.get("type", ""), e.get("input")
    if isinstance(value, float) and not math.isfinite(value):
        return "must be a finite number"
    bounds = {"greater_than": "> {gt}", "greater_than_equal": "≥ {ge}", "less_than": "< {lt}",
              "less_than_equal": "≤ {le}"}
    if kind == "literal_error":
        return f"must be one of {ctx.get('expected')}"
    if kind in bounds:
        return "must be " + bounds[kind].format(**{k: f"{v:,}" if isinstance(v, int) else f"{v:,g}"
                                                   if isinstance(v, float) else v for k, v in ctx.items()})
    if kind == "finite_number":
        return "must be a finite number"
    if kind.startswith(("int_", "float_")):
        return "must be a whole number" if kind.startswith("int_") else "must be a number"
    return str(e.get("msg", "is not valid")).replace("Value error, ", "")
