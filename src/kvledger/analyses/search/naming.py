"""The names a search candidate goes by: its id (``nvidia_h100_sxm:tp1:kv-auto``, what the ledger keys) and its short
name in the search table (``h100_sxm tp1 auto``, plus ``seqs N``, ``mnbt N``, ``pc on|off`` for the settings that
vary), and the reading of either back into the candidate (``kvledger search --show-command``)."""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

from kvledger.errors import InputError

__all__ = ["short_name", "resolve_candidate", "parse_candidate_id"]

_SHOWN = 12
"""Valid choices listed in an error, at most."""


def short_name(gpu_id: str, layout: str, kv_cache_dtype: str) -> str:
    """``h100_sxm tp1 auto``: the GPU id without its vendor prefix, the unit's layout and the KV dtype, as the search
    table starts each candidate's name."""
    return f"{gpu_id.removeprefix('nvidia_')} {layout} {kv_cache_dtype}"


def _settings_match(words: list[str], cand: Any) -> bool:
    """Whether ``seqs N`` / ``mnbt N`` / ``pc on|off`` pairs agree with the candidate (a setting the candidate leaves
    to the engine's default agrees with any value: the table shows the planned value)."""
    if len(words) % 2:
        return False
    values = {"seqs": cand.max_num_seqs, "mnbt": cand.max_num_batched_tokens,
              "pc": None if cand.enable_prefix_caching is None else ("on" if cand.enable_prefix_caching else "off")}
    for key, val in zip(words[::2], words[1::2]):
        if key not in values:
            return False
        if values[key] is not None and str(values[key]) != val.replace(",", ""):
            return False
    return True


def resolve_candidate(text: str, candidates: Sequence[Any]) -> Any:
    """The candidate of ``candidates`` that ``text`` names: its id, or its short name as the search table prints it
    (``h100_sxm tp1 auto``; the GPU may carry its ``nvidia_`` prefix; case and spacing do not matter).

    Raises:
        InputError: no candidate or several go by that name; the message lists the valid choices.
    """
    want = " ".join(text.lower().split())
    by_id = [c for c in candidates if c.id.lower() == want]
    if by_id:
        return by_id[0]
    want = want.removeprefix("nvidia_")
    found = []
    for c in candidates:
        base = short_name(c.gpu_id, c.layout, c.kv_cache_dtype).lower()
        if want == base or (want.startswith(base + " ") and _settings_match(want[len(base):].split(), c)):
            found.append(c)
    if len(found) == 1:
        return found[0]
    if found:
        raise InputError(f"{text!r} names {len(found)} candidates; give one id: {_choices(found)}")
    raise InputError(f"{text!r} is not a candidate of this search; give a rank number of the table (1 = the winner; "
                     f"the search then runs), a candidate id or its name in the table: {_choices(candidates)}")


def _choices(candidates: Sequence[Any]) -> str:
    shown = [f"{c.id} ({short_name(c.gpu_id, c.layout, c.kv_cache_dtype)})" for c in candidates[:_SHOWN]]
    more = len(candidates) - _SHOWN
    return ", ".join(shown) + (f", … and {more} more (--json of the search lists every id)" if more > 0 else "")


def parse_candidate_id(text: str) -> Any:
    """The ``spec.Candidate`` an id names (``nvidia_h100_sxm:tp4:kv-fp8:seqs-256``, ``…:tp2:kv-auto:ep``), as printed
    in the ledger.

    Raises:
        InputError: an id of another shape.
    """
    from kvledger.analyses.search.spec import Candidate

    parts = text.strip().split(":")
    dp = re.fullmatch(r"dp(\d+)xtp(\d+)", parts[1]) if len(parts) >= 3 else None  # vLLM's DP ranks (dp_axis.py)
    shape = re.fullmatch(r"tp(\d+)|p(\d+)xtp(\d+)\+d(\d+)xtp(\d+)", f"tp{dp.group(2)}" if dp else parts[1]) \
        if len(parts) >= 3 else None
    if shape is None or not parts[2].startswith("kv-"):
        raise InputError(f"{text!r} is not a candidate id; ids look like nvidia_h100_sxm:tp4:kv-auto, "
                         "nvidia_h200:dp8xtp1:kv-auto:ep or nvidia_h100_sxm:p2xtp2+d1xtp4:kv-auto (the ledger lists "
                         "them)")
    kw: dict[str, Any] = {"data_parallel_size": int(dp.group(1))} if dp else {}
    if shape.group(1) is None:
        p, pt, d, dt = (int(shape.group(i)) for i in range(2, 6))
        kw.update(prefill_replicas=p, decode_replicas=d, decode_tp=dt)
    tp = int(shape.group(1) or shape.group(3))
    for p in parts[3:]:
        key, _, val = p.partition("-")
        if key == "seqs" and val.isdigit():
            kw["max_num_seqs"] = int(val)
        elif key == "mnbt" and val.isdigit():
            kw["max_num_batched_tokens"] = int(val)
        elif key == "pc" and val in ("on", "off"):
            kw["enable_prefix_caching"] = val == "on"
        elif p == "ep" and shape.group(1) is not None:
            kw["enable_expert_parallel"] = True
        else:
            raise InputError(f"{text!r}: unknown part {p!r} (expected seqs-N, mnbt-N, pc-on, pc-off or ep)")
    return Candidate(parts[0], tp, parts[2][3:], **kw)
