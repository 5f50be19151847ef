"""The MI300X start-ups replayed leave-one-out: the ROCm non-torch term refitted without the start-up it predicts.

``accounting/vllm_rocm.py``'s non-torch table (point, low, high per TP) is the residual of the same MI300X start-ups
of ``benchmarks/data/vme_startups.csv`` that the accuracy report checks, so checking them against it is in-sample. Here
each fitted start-up gets the table rebuilt from the other start-ups at its TP: point = their median residual, range =
their lowest and highest, and its available KV, point and range, moves by the difference:

  residual_i      = table point + (predicted − printed available KV) + (predicted − printed weights)
                    (= budget − printed available KV − printed weights − activation peak − CUDA graphs)
  available_LOO   = available + (table point − LOO point)
  low_LOO         = low + (table high − LOO high)          high_LOO = high + (table low − LOO low)

KV tokens and concurrency (point, low, high) are scaled by the same end's available_LOO ÷ available (the block floor
ignored: ≤ 1 block). The fit set
is the table's own: MI300X, vLLM 0.11–0.18, TP 1/4/8, PP 1, no development build.
"""

from __future__ import annotations

import statistics
from dataclasses import replace
from typing import Any

from kvledger.accounting.vllm_rocm import ROCM_NON_TORCH_GIB
from kvledger.analyses.doctor.public_startups import PublicReplay, PublicTerm

__all__ = ["in_rocm_fit", "leave_one_out_rocm"]


def in_rocm_fit(r: dict[str, str]) -> bool:
    """The start-up is one of those ``ROCM_NON_TORCH_GIB`` was read from (module docstring)."""
    ver = tuple(int(x) for x in r["vllm_version"].split(".")[:2])
    return (r["gpu"] == "amd_mi300x" and (0, 11) <= ver < (0, 19) and int(r["tp"] or 1) in ROCM_NON_TORCH_GIB
            and int(r["pp"] or 1) == 1 and "dev" not in r["version_note"] and "available" in r["checks"]
            and bool(r["weights_gib"]))


def _term(x: PublicReplay, name: str) -> PublicTerm | None:
    return next((t for t in x.terms if t.term == name), None)


def _residual(r: dict[str, str], x: PublicReplay) -> float:
    """The non-torch GiB that makes this start-up's available KV exact, with its printed weights."""
    av, w = _term(x, "available KV"), _term(x, "weights")
    dw = (w.predicted - w.printed) if w is not None else 0.0  # no weights term: the plan used the printed figure
    return ROCM_NON_TORCH_GIB[int(r["tp"])][0] + (av.predicted - av.printed) + dw


def leave_one_out_rocm(rows: list[dict[str, str]], pubs: list[PublicReplay]) -> tuple[list[PublicReplay],
                                                                                        list[dict[str, Any]]]:
    """``pubs`` with every fitted MI300X start-up's available KV (and tokens, concurrency) refitted without it, and
    one record per such start-up (TP, residual, LOO point/low/high, in-sample and LOO errors)."""
    idx = [i for i, r in enumerate(rows) if in_rocm_fit(r) and _term(pubs[i], "available KV") is not None]
    res = {i: _residual(rows[i], pubs[i]) for i in idx}
    out, recs = list(pubs), []
    for i in idx:
        tp = int(rows[i]["tp"])
        others = [res[j] for j in idx if j != i and int(rows[j]["tp"]) == tp]
        if not others:
            continue
        pt, lo, hi = statistics.median(others), min(others), max(others)
        tpt, tlo, thi = ROCM_NON_TORCH_GIB[tp]
        av = _term(pubs[i], "available KV")
        new_av = replace(av, predicted=av.predicted + (tpt - pt), low=av.low + (thi - hi), high=av.high + (tlo - lo))
        ratios = tuple(b / a if a else 1.0 for a, b in ((av.predicted, new_av.predicted), (av.low, new_av.low),
                                                         (av.high, new_av.high)))
        terms = tuple(new_av if t is av else _scaled(t, ratios) for t in pubs[i].terms)
        out[i] = replace(pubs[i], terms=terms)
        recs.append({"id": rows[i]["id"], "tp": tp, "residual_gib": res[i], "loo_point_gib": pt, "loo_low_gib": lo,
                     "loo_high_gib": hi, "in_sample_rel_error": av.rel_error, "loo_rel_error": new_av.rel_error,
                     "loo_inside": new_av.inside})
    return out, recs


def _scaled(t: PublicTerm, ratios: tuple[float, float, float]) -> PublicTerm:
    """Tokens, blocks and concurrency follow available KV: point, low and high each by its own ratio."""
    if t.term not in ("KV tokens", "max concurrency", "blocks"):
        return t
    p, lo, hi = ratios
    return replace(t, predicted=t.predicted * p, low=None if t.low is None else t.low * lo,
                   high=None if t.high is None else t.high * hi)
