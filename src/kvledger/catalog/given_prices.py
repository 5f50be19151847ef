"""``--gpu-usd-per-hour``: the user's own GPU price, read and checked once for every command that takes it.

Two forms: one number, the price of every GPU (``2.49``, as the flag always took), or a price per GPU,
``H100=2.49,A100-80GB=1.29``, each name resolved through the GPU catalog's names and aliases
(``catalog.gpu_file.resolve_gpu``) to the catalog id the candidates and the price table use (a GPU file keeps its path
as given, as ``search`` keys its candidates). A list is kept as ``{catalog id: USD per GPU-hour}``, sorted by id.

Refused, each in one line (``InputError``, exit status 2): a price that is not a number, a number out of range (one
number: the command's range in ``kvledger.ranges``, as before; a listed price: (0, 1e6] USD/GPU-hour, so no GPU is
free by mistake), an unknown GPU name (the catalog's suggestions), a GPU named twice (by any two of its names), an
item without a name in a list. What a command does with a GPU the list leaves out is its own rule: ``search`` prices
it from the table (:func:`given_usd` is None), a command that prices one GPU refuses (:func:`price_of`).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

from kvledger.errors import InputError, KvLedgerError, UnknownNameError, range_error
from kvledger.ranges import Range, range_for

__all__ = ["FLAG", "FORMS", "parse_gpu_usd", "gpu_key", "given_usd", "given_source", "price_of", "one_gpu_usd",
           "describe"]

FLAG = "--gpu-usd-per-hour"
FORMS = "one price for every GPU (2.49) or GPU=PRICE pairs (H100=2.49,A100-80GB=1.29)"
_LISTED = Range(0.0, 1e6, lo_open=True, unit="USD/GPU-hour")  # a listed price: never 0 (a GPU free by mistake)


def _number(text: str, item: str) -> float:
    try:
        return float(text)
    except ValueError:
        where = "" if text == item else f" {item.strip()!r}:"  # the item of a list it was written in
        raise InputError(f"{FLAG}{where} {text.strip()!r} is not a number; give {FORMS}") from None


def gpu_key(name: str) -> str:
    """The key a price list gives the GPU ``name``: its catalog id (any catalog name or alias of it), or a GPU file's
    path as given.

    Raises:
        UnknownNameError: a name the catalog does not know (the closest names suggested); ConfigError: a bad GPU file.
    """
    from kvledger.catalog.gpu_file import resolve_gpu

    g = resolve_gpu(name)
    return name if g.gpu_id == "custom" else g.gpu_id


def _pairs(value: Any) -> list[tuple[str, float, str]]:
    """(GPU name, price, the item as written) of a list given as text or as a mapping."""
    if isinstance(value, Mapping):
        return [(str(k), v, f"{k}={v}") for k, v in value.items()]
    out = []
    for item in str(value).split(","):
        name, eq, price = item.strip().rpartition("=")
        if not item.strip():
            continue
        if not eq or not name.strip():
            raise InputError(f"{FLAG} {item.strip()!r} names no GPU: in a list each item is GPU=PRICE; give {FORMS}")
        out.append((name.strip(), _number(price, item), item.strip()))
    return out


def parse_gpu_usd(value: Any, command: str = "search") -> float | dict[str, float] | None:
    """``--gpu-usd-per-hour`` as given (text, a number, a mapping or None) → one price (float), the per-GPU prices
    ``{catalog id: USD/GPU-h}`` (sorted by id), or None. ``command``'s range (``kvledger.ranges``) bounds one number.

    Raises:
        InputError: as the module docstring lists, in one line naming the flag.
    """
    if value is None:
        return None
    if isinstance(value, str) and "=" not in value or isinstance(value, (int, float)) and not isinstance(value, bool):
        usd = _number(value, value) if isinstance(value, str) else float(value)
        rng = range_for(command, "gpu_usd_per_hour") or _LISTED
        rng.check(FLAG, usd)  # worded as when the flag took a float
        return usd
    out: dict[str, float] = {}
    named: dict[str, str] = {}
    for name, usd, item in _pairs(value):
        if isinstance(usd, bool) or not isinstance(usd, (int, float)) or not math.isfinite(usd) or not (
                _LISTED.lo < usd <= _LISTED.hi):
            raise range_error(FLAG, item, _LISTED.describe())
        try:
            key = gpu_key(name)
        except UnknownNameError as err:  # the catalog's suggestions, not its hints on GPU files and overrides
            close = f"; did you mean: {', '.join(err.suggestions)}?" if err.suggestions else ""
            raise InputError(f"{FLAG} {item}: unknown GPU {name!r}{close} (`kvledger gpus` lists the catalog; a GPU "
                             "file is named by its path)") from None
        except KvLedgerError as err:  # a GPU file that cannot be read
            raise InputError(f"{FLAG} {item}: {err}") from None
        if key in out:
            raise InputError(f"{FLAG} names {key} twice ({named[key]} and {name}): give each GPU one price")
        out[key], named[key] = float(usd), name
    if not out:
        raise InputError(f"{FLAG} {value!r} gives no price; give {FORMS}")
    return dict(sorted(out.items()))  # one order, however the list was written: the same notes, the same ledger


def given_usd(given: float | Mapping[str, float] | None, gpu_id: str) -> float | None:
    """The user's price for the GPU keyed ``gpu_id`` (a catalog id, or a GPU file's path): one number for every GPU,
    the listed price, or None (not given, or left out of the list: the price table's then)."""
    if given is None or not isinstance(given, Mapping):
        return given
    return given.get(gpu_id)


def given_source(given: float | Mapping[str, float] | None, gpu_id: str, provider: str | None = None) -> str:
    """Where a given price comes from, as every $ figure priced on it states: ``user input (--gpu-usd-per-hour,
    nvidia_h100_sxm)``, the GPU priced (none known: the flag alone), ``… nvidia_h100_sxm at Nebius)`` with the
    ``--gpu-provider`` that labels it."""
    from kvledger.catalog.price_names import gpu_provider_label

    what = ", ".join(w for w in (FLAG, gpu_id) if w) + (f" at {gpu_provider_label(provider)}" if gpu_id and provider
                                                         else "")
    return f"user input ({what})"


def describe(given: Mapping[str, float]) -> str:
    """The per-GPU prices in words: ``nvidia_h100_sxm $2.49/GPU-h, nvidia_a100_80gb_sxm $1.29/GPU-h``."""
    return ", ".join(f"{k} ${v:g}/GPU-h" for k, v in given.items())


def price_of(given: float | Mapping[str, float] | None, name: str | None,
             provider: str | None = None) -> tuple[float, str] | None:
    """(USD per GPU-hour, its source, labelled with ``provider`` when given) of the one GPU a command prices
    (``name``: as the command knows it), or None when no price was given.

    Raises:
        InputError: a list that does not name that GPU (or a run that does not name its GPU at all).
    """
    if given is None:
        return None
    if not isinstance(given, Mapping):
        return float(given), given_source(given, _key_or_name(name) if name else "", provider)
    if name is None:
        raise InputError(f"{FLAG} lists prices per GPU ({describe(given)}), but the run does not name its GPU: pass "
                         "--gpu, or one number for its price")
    key = _key_or_name(name)
    if key not in given:
        raise InputError(f"{FLAG} lists prices for {', '.join(given)}, not for the GPU priced here, {name}"
                         f"{'' if key == name else f' ({key})'}: add {key}=PRICE to the list, or give one number")
    return given[key], given_source(given, key, provider)


def _key_or_name(name: str) -> str:
    """The catalog id of the GPU ``name`` names, else ``name`` itself (a GPU file's path)."""
    try:
        return gpu_key(name)
    except UnknownNameError:
        return name


def one_gpu_usd(value: Any, gpu: str, command: str) -> float | None:
    """``--gpu-usd-per-hour`` as given to a command that prices the one GPU ``gpu`` (``report``, ``offload``): the
    price (one number, or the list's for ``gpu``), or None.

    Raises:
        InputError: what :func:`parse_gpu_usd` and :func:`price_of` refuse.
    """
    got = price_of(parse_gpu_usd(value, command), gpu)
    return None if got is None else got[0]
