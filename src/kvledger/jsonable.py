"""One serializer for every record that crosses into JSON: dataclasses, pydantic models, enums and numpy values.

``to_jsonable(obj)`` walks a dataclass's fields in declaration order (the keys of its JSON object);
a nested value with its own ``to_dict`` (one that adds computed fields) is written by it, so a class
keeps a ``to_dict`` only where it says more than its fields, built on this walk. Tuples become lists,
enums their values, numpy scalars and arrays plain numbers and lists; floats are left as they are
(``kvledger.strict_json.dumps`` writes the non-finite ones). numpy is never imported here: a numpy
value can only exist once something else imported it.
"""

from __future__ import annotations

import dataclasses
import enum
import sys
from typing import Any

__all__ = ["to_jsonable"]


def to_jsonable(obj: Any, *, exclude: tuple[str, ...] = ()) -> Any:
    """``obj`` as plain dicts, lists, strings, numbers, booleans and None; a dataclass's fields in ``exclude`` are left
    out (only at the top level)."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _value(getattr(obj, f.name)) for f in dataclasses.fields(obj) if f.name not in exclude}
    return _value(obj)


def _value(v: Any) -> Any:
    if v is None or type(v) in (str, bool, int, float):
        return v
    if isinstance(v, enum.Enum):
        return v.value
    np = sys.modules.get("numpy")
    if np is not None and isinstance(v, np.generic):  # before str/int/float: np.float64 is a float subclass
        return v.item()
    if isinstance(v, (str, bool, int, float)):
        return v
    if isinstance(v, dict):
        return {k: _value(x) for k, x in v.items()}
    if isinstance(v, (list, tuple)):
        return [_value(x) for x in v]
    to_dict = getattr(v, "to_dict", None)
    if callable(to_dict) and not isinstance(v, type):
        return to_dict()
    if dataclasses.is_dataclass(v) and not isinstance(v, type):
        return to_jsonable(v)
    if callable(getattr(v, "model_dump", None)):  # a pydantic model
        return _value(v.model_dump())
    if np is not None and isinstance(v, np.ndarray):
        return v.tolist()
    return v
