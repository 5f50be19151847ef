"""The error band of a figure on a GPU with no measured run: leave one GPU out.

The regime bands (``error_band``) come from deployments on the few GPUs the project has measured runs of. A figure on
another GPU (an L40S, an H200, an MI300X) is priced with nothing measured of that GPU's serving — no GPU profile, no
operator profile's matmul curve: the roofline at 0.7 of peak FLOP/s, the layer-kernel floors carried from the profiled
GPUs and the bandwidth share carried from its measured copy bandwidth (``accounting/carried_kernels.py``) — and its
error is a new draw of *the GPU's* error, which the regime bands, pooled over deployments of measured GPUs, do not
hold.

``benchmarks/gpu_holdout.py`` (``python benchmarks/validate_all.py --sections lodo --write-bands``) holds out every run
of one GPU in turn and prices it so (``--gemm-efficiency carried --gpu-profile none``: what the held-out GPU would
have had, had nobody measured it), and collects the errors per regime and metric, each tagged with its GPU. From them
:func:`held_out_gpu_interval` takes the 80% band: split-conformal ranks with each GPU weighted once
(``kvledger.ledgers.conformal``) where nine GPUs and ten values stand behind it; below that no rank reaches 80%
((k − 1)/(k + 1) < 0.8), and the band is the widest defensible envelope, said so: the held-out errors' smallest …
largest, the t prediction interval over GPUs (each weighted once; from two GPUs) and the measured GPUs' own band
(``floor``), per side the widest. The result goes into ``error_bands.json`` under ``unmeasured_gpu``, with the GPUs,
deployments and counts behind it.

:func:`measured_gpu_ids` is the set of GPUs with a measured run behind any stored band (read from the file, never a
list kept here); :func:`widened` takes a band, per side, to the unmeasured-GPU band of its architecture and engine
(:func:`unmeasured_entry`), for ``Band.on_gpu``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

__all__ = ["held_out_gpu_interval", "measured_gpu_ids", "unmeasured_entry", "widened", "RANKS_FROM_GPUS",
           "RANKS_FROM_VALUES"]

#: conformal ranks reach 80% from nine groups ((k − 1)/(k + 1) = 0.8) and, as for the regime bands, ten values
RANKS_FROM_GPUS = 9
RANKS_FROM_VALUES = 10


def held_out_gpu_interval(values: Sequence[float], gpus: Sequence[str],
                          floor: tuple[float, float] | None = None) -> tuple[float, float, str]:
    """(q10, q90, method) of the errors ``values`` (predicted/measured − 1), each measured on the held-out GPU named
    in ``gpus``. From ``RANKS_FROM_GPUS`` GPUs and ``RANKS_FROM_VALUES`` values: the split-conformal 80% interval with
    each GPU weighted once. Below: too few for a quantile, so the widest of the values' smallest … largest, the t
    prediction interval over the GPUs (from two) and ``floor`` (the measured GPUs' own q10, q90), per side.

    Raises:
        ValueError: no values, or not one GPU per value.
    """
    from kvledger.ledgers.conformal import conformal_interval, few_groups_interval

    if not values or len(values) != len(gpus):
        raise ValueError(f"{len(values)} errors and {len(gpus)} GPUs: one GPU per error, at least one")
    k = len(set(gpus))
    if k >= RANKS_FROM_GPUS and len(values) >= RANKS_FROM_VALUES:
        lo, hi = conformal_interval(values, gpus)
        how = f"split-conformal 80% interval, each of {k} held-out GPUs weighted once"
    else:
        lo, hi = min(values), max(values)
        parts = ["their smallest … largest"]
        if k >= 2:
            t_lo, t_hi = few_groups_interval(values, gpus)
            lo, hi = min(lo, t_lo), max(hi, t_hi)
            parts.append("the t prediction interval over the GPUs, each weighted once")
        how = (f"too few held-out GPUs for a split-conformal 80% quantile ({k} GPU{'s' * (k != 1)}, "
               f"{len(values)} value{'s' * (len(values) != 1)}; ranks need {RANKS_FROM_GPUS} GPUs and "
               f"{RANKS_FROM_VALUES} values): the widest envelope, per side, of " + ", ".join(parts))
    if floor is not None and (floor[0] < lo or floor[1] > hi):
        lo, hi = min(lo, floor[0]), max(hi, floor[1])
        how += ", never narrower than the measured GPUs' own band"
    return float(lo), float(hi), how


def measured_gpu_ids(table: dict[str, Any]) -> frozenset[str]:
    """Catalog ids of the GPUs with a measured run behind a band of ``table`` (``error_bands.json``): every ``gpu_ids``
    of the regime and cross-model bands, and the held-out GPUs of the unmeasured-GPU band."""
    out: set[str] = set()
    for section in (table.get("regimes") or {}, table.get("cross_model") or {}):
        for ms in section.values():
            for b in (ms.values() if isinstance(ms, dict) else ()):
                out.update(b.get("gpu_ids") or () if isinstance(b, dict) else ())
    out.update((table.get("unmeasured_gpu") or {}).get("held_out_gpus") or {})
    return frozenset(out)


def unmeasured_entry(table: dict[str, Any], regime: str, metric: str) -> tuple[str, dict[str, Any]] | None:
    """(key, stored entry) of ``table``'s unmeasured-GPU band for ``regime``'s architecture and engine: its own, else
    the same architecture's vLLM one, else the dense vLLM one (the nearest that has ``metric``); None where none has
    it."""
    regimes = (table.get("unmeasured_gpu") or {}).get("regimes") or {}
    _, arch, engine = regime.split("/")
    for key in dict.fromkeys((f"uncalibrated/{arch}/{engine}", f"uncalibrated/{arch}/vllm",
                              "uncalibrated/dense/vllm")):
        e = (regimes.get(key) or {}).get(metric)
        if e is not None:
            return key, e
    return None


def widened(regime: str, q: tuple[float, float], found: tuple[str, dict[str, Any]],
            gpu_name: str) -> tuple[float, float, str, str]:
    """(q10, q90, clause, detail) of a band of ``regime`` with errors ``q`` on ``gpu_name``, a GPU with no measured run,
    widened per side to the unmeasured-GPU band ``found`` (``unmeasured_entry``): the clause says so and from how
    many GPUs and runs; the detail, how the held-out GPUs were priced, the method and the band's ends."""
    key, e = found
    lo, hi = min(q[0], e["q10"]), max(q[1], e["q90"])
    lent = "" if key.split("/")[1:] == regime.split("/")[1:] else f" (of {key}: none of its own)"
    k = e["num_gpus"]
    short = (f"no measured run on {gpu_name}: the unmeasured-GPU band {e['q10']:+.1%} … {e['q90']:+.1%}{lent}, from "
             f"{e['num_runs']} measured points of {e['num_deployments']} deployments on {k} GPU{'s' * (k != 1)}, "
             "each GPU held out in turn")
    detail = (f"and priced with no GPU profile, flat matmul efficiency and the kernel floors and bandwidth share "
              f"carried from the other profiled GPUs; {e['method']}; this band widened, per side, to {lo:+.1%} … "
              f"{hi:+.1%}")
    return lo, hi, short, detail
