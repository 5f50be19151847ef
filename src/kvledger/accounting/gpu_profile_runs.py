"""The runs a GPU profile file says it was fitted on (``runs``) or checked against (``out_of_sample``), read strictly:
they decide the profile's poor-fit warning and how far its bands widen (``kvledger.accounting.gpu_profile``)."""

from __future__ import annotations

from kvledger.errors import FormatError

__all__ = ["checked_runs"]

_ERRORS = ("ttft_mean_rel_error", "tpot_mean_rel_error", "throughput_rel_error")  # the poor-fit test's


def checked_runs(d: dict, key: str, where: str) -> list[dict]:
    """The profile's ``runs`` (or ``out_of_sample``) as written: absent or null, none; else a list of objects, each
    ``tp`` (where stated) a whole number ≥ 1 and its errors a number or null. A damaged list is refused rather than
    read as no runs: the runs decide the poor-fit warning and the widening of every band the profile prices, so
    dropping them would narrow the bands."""
    runs = d.get(key)
    if runs is None:
        return []
    bad = (f"\"{key}\" is {type(runs).__name__}, not a list" if not isinstance(runs, list) else
           next((f"{key}[{i}] is {type(r).__name__}, not an object" for i, r in enumerate(runs)
                 if not isinstance(r, dict)), None) or
           next((f"{key}[{i}].tp {r['tp']!r}, not a whole number ≥ 1" for i, r in enumerate(runs)
                 if r.get("tp") is not None and not (isinstance(r["tp"], int) and not isinstance(r["tp"], bool)
                                                     and r["tp"] >= 1)), None) or
           next((f"{key}[{i}].{k} {r[k]!r}, not a number or null" for i, r in enumerate(runs) for k in _ERRORS
                 if r.get(k) is not None and (isinstance(r[k], bool) or not isinstance(r[k], (int, float))
                                              or r[k] != r[k])), None))
    if bad:
        raise FormatError(where, f"malformed GPU profile ({bad}): its runs say what it was fitted on and how well, "
                                 "which sets its bands; refit with `kvledger calibrate FILE... --scope gpu --out "
                                 "GPU.json`")
    return runs
