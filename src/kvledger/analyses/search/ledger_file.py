"""The search ledger file: one JSON line per candidate under a header that names the search, appended as candidates
finish and rewritten whole, in candidate order, at the end (``kvledger.analyses.search.runner``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kvledger.analyses.search.spec import Candidate, SearchSpec
from kvledger.errors import FormatError, InputError

__all__ = ["LEDGER_FORMAT", "ledger_header", "ledger_line", "read_ledger", "resumable_entries", "write_whole"]

LEDGER_FORMAT = "kvledger-search-ledger/1"


def ledger_header(spec: SearchSpec, cands: list[Candidate]) -> dict[str, Any]:
    """The ledger's first line: its format, the search's inputs and its candidates in order."""
    return {"format": LEDGER_FORMAT, "spec": spec.to_dict(), "candidates": [c.id for c in cands]}


def ledger_line(obj: dict[str, Any]) -> str:
    """One ledger line: the object as strict, compact JSON, its keys in the order the search built them, so an entry
    read back from a resumed ledger renders in ``--json`` byte for byte as the fresh run's (sorted keys did not)."""
    return json.dumps(obj, allow_nan=False, separators=(",", ":")) + "\n"


def read_ledger(path: Path) -> tuple[dict[str, Any], dict[str, dict[str, Any]]]:
    """(header, {candidate id: last entry}) from a ledger file; a torn last line (interrupted write) is ignored.

    Raises:
        FormatError: not a search ledger (no header line of this format) or a corrupt line before the last.
    """
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as err:
        raise InputError(f"cannot read the ledger {path}: {err.strerror}") from None
    except UnicodeDecodeError:
        raise FormatError(str(path), "not a kvledger search ledger (not UTF-8 text)", "line 1") from None
    try:
        header = json.loads(lines[0]) if lines else None
    except json.JSONDecodeError:
        header = None
    if not isinstance(header, dict) or header.get("format") != LEDGER_FORMAT:
        raise FormatError(str(path), f"not a kvledger search ledger (first line must be a {LEDGER_FORMAT} header)",
                          "line 1")
    entries: dict[str, dict[str, Any]] = {}
    for n, text in enumerate(lines[1:], start=2):
        try:
            e = json.loads(text)
        except json.JSONDecodeError:
            if n == len(lines):
                break  # the last line was being written when the search stopped
            raise FormatError(str(path), "corrupt ledger entry", f"line {n}") from None
        if not isinstance(e, dict) or not isinstance(e.get("id"), str):
            raise FormatError(str(path), "ledger entry is not an object with a string 'id'", f"line {n}")
        entries[e["id"]] = e
    return header, entries


def resumable_entries(path: Path, header: dict[str, Any]) -> dict[str, dict[str, Any]]:
    """The finished entries (feasible or rejected) of the ledger at ``path``, whose header must describe the same
    search.

    Raises:
        InputError: the ledger of another search (different inputs or candidates).
    """
    old, entries = read_ledger(path)
    spec = old.get("spec")
    if isinstance(spec, dict) and spec.get("synthetic") is not None:  # written before to_dict left the unused trace
        spec = {k: v for k, v in spec.items() if k != "trace"}    # out of a synthetic search: still the same search
    if spec != header["spec"] or old.get("candidates") != header["candidates"]:
        raise InputError(f"{path} is the ledger of another search (different inputs or candidates); resume it with the "
                         "same flags, or start a new ledger")
    return {cid: _with_sized_keys(_current_names(e)) for cid, e in entries.items()
            if e.get("status") in ("feasible", "rejected")}


#: keys a ledger written before one name per quantity across commands holds, and their names now (in place, in order)
_RENAMED = {"boundary_rate_req_per_s": "slo_capacity_req_per_s",
            "base_boundary_rate_req_per_s": "base_slo_capacity_req_per_s"}
#: the same inside a ``sizing`` section alone: the rate sized on is cost's ``capacity.sizing_req_per_s`` and the rented
#: replicas' bill cost's ``rental_usd_per_month``; in its ``at_band_low``/``at_band_high`` k × that rate (once
#: ``slo_capacity_req_per_s``) is cost's ``decision.band_ends[].sizing_req_per_s``; inside ``bounds``, the capacity's
#: upper bound is goodput's and cost's ``capacity_bound_req_per_s``
_SIZING = {**_RENAMED, "capacity_req_per_s": "sizing_req_per_s", "monthly_usd": "rental_usd_per_month"}
_BAND_END = {**_SIZING, "boundary_rate_req_per_s": "sizing_req_per_s", "slo_capacity_req_per_s": "sizing_req_per_s"}
_RENAMED_IN = {"sizing": _SIZING, "at_band_low": _BAND_END, "at_band_high": _BAND_END,
               "bounds": {**_RENAMED, "capacity_req_per_s": "capacity_bound_req_per_s"}}


def _current_names(obj: Any, names: dict[str, str] = _RENAMED) -> Any:
    """``obj`` (a ledger entry) with its keys under their current names (``_RENAMED``; ``_RENAMED_IN`` under a
    ``sizing``, band-end or ``bounds`` key), nested dicts too, in order."""
    if isinstance(obj, dict):
        return {names.get(k, k): _current_names(v, _RENAMED_IN.get(k, names))
                for k, v in obj.items()}
    if isinstance(obj, list):
        return [_current_names(v, names) for v in obj]
    return obj


def _with_sized_keys(entry: dict[str, Any]) -> dict[str, Any]:
    """``entry`` with the sized-rate keys and ``at_volume_load`` of its ``capacity`` where a ledger written before they
    were always there left them out (the bound did not cap the rate found; no load priced): null, in the places a fresh
    run writes them (``evaluate.capacity_figures``), the run's own goodput moved beside them."""
    cap = entry.get("capacity")
    if not isinstance(cap, dict) or "goodput_req_per_s" not in cap:
        return entry
    if "at_volume_load" not in cap:  # written before it was always there: null (no load priced), before the goodput
        items = list(cap.items())
        i = list(cap).index("goodput_req_per_s")
        cap = dict([*items[:i], ("at_volume_load", None), *items[i:]])
    if "sized_on_req_per_s" in cap:
        return {**entry, "capacity": cap}
    out: dict[str, Any] = {}
    for k, v in cap.items():
        if k == "goodput_at_boundary_req_per_s":
            continue  # written after the attainment, as now
        out[k] = v
        if k == "attainment":
            out.update(sized_on_req_per_s=None, attainment_at_sized_rate=None,
                       goodput_at_boundary_req_per_s=cap.get("goodput_at_boundary_req_per_s"),
                       sustained_good_req_per_s_at_boundary=None)
        elif k == "goodput_req_per_s":
            out["goodput_at_sized_rate_req_per_s"] = None
    return {**entry, "capacity": out}


def write_whole(path: Path, lines: list[dict[str, Any]]) -> None:
    """Replace ``path`` with these JSON lines at once (a temporary file renamed over it)."""
    from kvledger.outputs import write_text_atomic

    write_text_atomic(path, "".join(ledger_line(x) for x in lines))
