"""The allowed range of every numeric command-line option, checked before a command does any work.

One table (:mod:`kvledger.ranges`, below every layer so the web app and the Python API check the same
ranges), keyed by the option's parameter name (with per-command entries where a name means
something else in one command), so that every command refuses the same impossible values the
same way: a NaN, an infinity where none is meaningful, a negative seed, a zero GPU count or a
fraction above 1 ends with an :class:`~kvledger.errors.InputError` that names the flag, the value
and the allowed range, before any model is loaded or any simulation starts. Upper bounds keep
the work bounded (requests, replicas, users) and match the engine-settings model
(``kvledger.accounting.settings.PlanSettings``) where the two overlap. A value the user gave is
passed on as given: a 0 is refused or used, never replaced by a default.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any, get_args

from kvledger.ranges import (
    COMMAND_RANGES,
    DURATION_OPTIONS,
    OPTION_RANGES,
    Range,
    check_options,
    range_for,
    range_problems,
)

__all__ = ["Range", "OPTION_RANGES", "COMMAND_RANGES", "DURATION_OPTIONS", "SELF_CHECKED", "range_for",
           "range_problems",
           "check_options", "checked"]

#: commands that call :func:`range_problems` themselves, to report range errors together with their other input errors.
SELF_CHECKED = frozenset({"cost"})


def _flag_of(param: inspect.Parameter) -> str:
    info = param.default
    for meta in get_args(param.annotation)[1:]:  # Annotated[type, typer.Option(...)]
        info = meta
    decls = getattr(info, "param_decls", None) or ()
    long = [d for d in decls if d.startswith("--")]
    return (long[0].split("/")[0] if long else "--" + param.name.replace("_", "-"))


def checked(command: str, fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with its numeric options checked against :data:`OPTION_RANGES` before its body runs."""
    sig = inspect.signature(fn)
    flags = {name: _flag_of(p) for name, p in sig.parameters.items()}

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        bound = sig.bind_partial(*args, **kwargs)
        check_options(command, dict(bound.arguments), flags)
        return fn(*args, **kwargs)

    wrapper.range_checked = True  # type: ignore[attr-defined]
    return wrapper
