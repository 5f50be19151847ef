"""Argument types checked at the public doors (the Python API, ``SimRequestArgs``): a value of the wrong type is refused
with an InputError naming the call, the parameter and the type it takes, not an AttributeError deep inside."""

from __future__ import annotations

import collections.abc
import functools
import inspect
import numbers
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

from kvledger.errors import InputError

__all__ = ["check_value", "check_fields", "checked"]


def _names(hint: Any) -> str:
    """A type hint in words: ``int | None`` → "int or None"; ``Sequence[int | str] | None`` → "a sequence of (int or
    str) or None" (the items' types in brackets, so the None is not read as an item's)."""
    args = typing.get_args(hint) if _is_union(hint) else (hint,)
    return " or ".join("None" if a is type(None) else
                       f"a sequence of {_item_names(_item_hint(a))}" if _item_hint(a) is not None else
                       getattr(a, "__name__", str(a)).replace("Sequence", "a sequence") for a in args)


def _item_names(hint: Any) -> str:
    """``_names`` of a sequence's item type, in brackets where it is a union ("(int or str)")."""
    words = _names(hint)
    return f"({words})" if _is_union(hint) else words


def _item_hint(hint: Any) -> Any:
    """The item type of a sequence hint (``Sequence[int | str]`` → ``int | str``), else None."""
    if typing.get_origin(hint) in (collections.abc.Sequence, list, tuple) and typing.get_args(hint):
        return typing.get_args(hint)[0]
    return None


def _bad_item(v: Any, hint: Any) -> tuple[int, Any] | None:
    """(index, item hint) of the first item of the list or tuple ``v`` that no sequence member of ``hint`` takes."""
    if not isinstance(v, (list, tuple)):
        return None
    for h in (typing.get_args(hint) if _is_union(hint) else (hint,)):
        inner = _item_hint(h)
        if inner is not None:
            return next(((i, inner) for i, x in enumerate(v) if not _fits(x, inner)), None)
    return None


def _is_union(hint: Any) -> bool:
    return typing.get_origin(hint) in (typing.Union, types.UnionType)


def _fits(v: Any, hint: Any) -> bool:
    """Whether ``v`` is a value of ``hint`` (a bool is not a number; any integral number is an int, any real a float;
    a sequence's items are checked; ``Any`` and other hints take everything)."""
    if hint is Any:
        return True
    if _is_union(hint):
        return any(_fits(v, h) for h in typing.get_args(hint))
    if hint is type(None):
        return v is None
    origin = typing.get_origin(hint)
    if origin in (collections.abc.Sequence, list, tuple):
        inner = typing.get_args(hint)[:1] or (Any,)
        return isinstance(v, (list, tuple)) and all(_fits(x, inner[0]) for x in v)
    if origin is typing.Literal:
        return v in typing.get_args(hint)
    if hint is bool:
        return isinstance(v, bool)
    if hint is int:
        return isinstance(v, numbers.Integral) and not isinstance(v, bool)
    if hint is float:
        return isinstance(v, numbers.Real) and not isinstance(v, bool)
    return isinstance(v, hint) if isinstance(hint, type) else True


def check_value(where: str, name: str, v: Any, hint: Any) -> None:
    """Raise InputError unless ``v`` is a value of ``hint``, naming ``where(name=...)``."""
    if not _fits(v, hint):
        if (bad := _bad_item(v, hint)) is not None:
            i, inner = bad
            raise InputError(f"{where}({name}=...): expected {_names(hint)}; item [{i}] is "
                             f"{type(v[i]).__name__} {v[i]!r:.60}, not {_names(inner)}")
        raise InputError(f"{where}({name}=...): expected {_names(hint)}, got {type(v).__name__} {v!r:.60}")


@functools.cache
def _hints(obj: Any) -> Mapping[str, Any]:
    return typing.get_type_hints(obj)


def check_fields(obj: Any) -> None:
    """Check every field of a dataclass instance against its annotation (``SimRequestArgs.__post_init__``); None
    passes everywhere (a field not given yet: ``validate`` fills the model and TP from a run's record)."""
    hints = _hints(type(obj))
    where = type(obj).__name__
    for name, hint in hints.items():
        if name in obj.__dataclass_fields__ and (v := getattr(obj, name)) is not None:
            check_value(where, name, v, hint)


def checked(fn: Callable) -> Callable:
    """``fn`` with each argument checked against its annotation before it runs (the Python API's functions)."""
    sig = inspect.signature(fn)

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as err:
            raise InputError(f"kvledger.{fn.__name__}: {err}") from None
        hints = _hints(fn)
        for name, v in bound.arguments.items():
            if name in hints:
                check_value(f"kvledger.{fn.__name__}", name, v, hints[name])
        return fn(*args, **kwargs)

    return wrapper
