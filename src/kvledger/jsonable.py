"""One serializer for every record that crosses into JSON: dataclasses, pydantic models, enums and numpy values.

``to_jsonable(obj)`` walks a dataclass's fields in declaration order (the keys of its JSON object).
A class whose JSON says more or other than its fields declares it once, as data: ``__json__``, its
keys in order, each an attribute name or a ``(key, attribute path)`` pair; the attribute may be a
field, a property or a method taking no arguments (called), and a dotted path (``"volume.requests"``)
reads through nested objects; an entry ``"**name"`` writes the keys of the dict at ``name`` in its place (a record's
open-ended extras); the keys named in ``__json_optional__`` are left out while their value is None. A
nested value with a ``to_dict`` is written by it. Tuples become lists,
enums their values, numpy scalars and arrays plain numbers and lists; floats are left as they are
(``kvledger.strict_json.dumps`` writes the non-finite ones). numpy is never imported here: a numpy
value can only exist once something else imported it.
"""

from __future__ import annotations

import dataclasses
import enum
import inspect
import math
import sys
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

__all__ = ["to_jsonable", "JsonKeys", "json_fields", "whole_bytes"]

_C = TypeVar("_C", bound=type)

#: a class's ``__json__``: its JSON keys in order, each an attribute name or a (key, attribute path) pair.
JsonKeys = tuple[str | tuple[str, str], ...]


def to_jsonable(obj: Any, *, exclude: tuple[str, ...] = ()) -> Any:
    """``obj`` as plain dicts, lists, strings, numbers, booleans and None; the keys in ``exclude`` are left out (only
    at the top level). A dataclass gives its fields in order, unless its class declares ``__json__``."""
    if isinstance(obj, type):
        return _value(obj)
    plan = _PLANS.get(type(obj)) or _plan(type(obj))
    if plan is None:
        return _value(obj)
    entries, optional, plain = plan
    if plain and not exclude:  # the common case: every field, in order
        return {key: v if type(v := getattr(obj, key)) in _SCALARS else _value(v) for key, _ in entries}
    out = {}
    for key, path in entries:
        if key in exclude:
            continue
        v = _read(obj, path)
        if v is None and key in optional:
            continue
        if key.startswith("**"):
            out.update(_value(v))
        else:
            out[key] = _value(v)
    return out


def whole_bytes(obj: Any) -> Any:
    """``obj`` (plain JSON values) with every finite float under a key ``bytes`` or ending ``_bytes`` (or in a list
    there, a range) rounded to an int: a byte count is a whole number, however it was computed (a model's weights
    summed as floats, a ±% range); other values as they are."""
    if isinstance(obj, dict):
        return {k: _whole(v) if k == "bytes" or k.endswith("_bytes") else whole_bytes(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [whole_bytes(v) for v in obj]
    return obj


def _whole(v: Any) -> Any:
    if isinstance(v, float) and math.isfinite(v):
        return round(v)
    if isinstance(v, list):
        return [_whole(x) for x in v]
    return whole_bytes(v)


#: per class: its (key, attribute path) entries, the optional keys, and whether it is plain (fields only, no optional)
_PLANS: dict[type, tuple[tuple[tuple[str, str], ...], frozenset[str], bool] | None] = {}


def _plan(cls: type) -> tuple[tuple[tuple[str, str], ...], frozenset[str], bool] | None:
    keys, optional = getattr(cls, "__json__", None), frozenset(getattr(cls, "__json_optional__", ()))
    plain = keys is None and not optional
    if keys is None and dataclasses.is_dataclass(cls):
        keys = tuple(f.name for f in dataclasses.fields(cls))
    plan = None if keys is None else (tuple(_entries(keys)), optional, plain)
    _PLANS[cls] = plan
    return plan


def json_fields(*, exclude: tuple[str, ...] = (), read: dict[str, str] | None = None,
                extra: JsonKeys = (), rename: dict[str, str] | None = None) -> Callable[[_C], _C]:
    """Class decorator, outside ``@dataclass``: ``__json__`` = the fields in order less ``exclude``, each read from
    ``read.get(name, name)`` under the key ``rename.get(name, name)`` (the JSON's name with its unit), then
    ``extra``."""
    def apply(cls: _C) -> _C:
        keys = tuple(((rename or {}).get(f.name, f.name), (read or {}).get(f.name, f.name))
                     for f in dataclasses.fields(cls) if f.name not in exclude)
        cls.__json__ = keys + tuple(extra)  # type: ignore[attr-defined]
        return cls
    return apply


def _entries(keys: JsonKeys) -> Iterator[tuple[str, str]]:
    for entry in keys:
        if isinstance(entry, str):
            yield entry, entry.removeprefix("**")
        else:
            yield entry


def _read(obj: Any, path: str) -> Any:
    """The attribute at a dotted ``path`` of ``obj``; a method at its end is called without arguments."""
    if "." in path:
        for part in path.split("."):
            obj = getattr(obj, part)
    else:
        obj = getattr(obj, path)
    return obj() if inspect.ismethod(obj) else obj


_SCALARS = frozenset({str, bool, int, float, type(None)})


def _value(v: Any) -> Any:
    t = type(v)
    if t in _SCALARS:
        return v
    if t is list or t is tuple:
        return [x if type(x) in _SCALARS else _value(x) for x in v]
    if t is dict:
        return {k: x if type(x) in _SCALARS else _value(x) for k, x in v.items()}
    if isinstance(v, enum.Enum):
        return v.value
    np = sys.modules.get("numpy")
    if np is not None and isinstance(v, np.generic):  # before str/int/float: np.float64 is a float subclass
        return v.item()
    if np is not None and t is np.ndarray:
        return v.tolist()
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
