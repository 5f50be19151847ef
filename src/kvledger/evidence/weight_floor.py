"""The physical floor under a measured TPOT: one decode step reads every weight once, so a dense model's time per
output token is at least its weight bytes per GPU ÷ the GPU's HBM bandwidth.

The inference-perf check (``calibration/sweep.py``: the kubecon stage's stated 3.47 ms against the 4.79 ms an H100
needs to read Llama-3.1-8B's 16.06 GB of bf16 weights at 3.35 TB/s) applied to every reader, for a bundled dense
model on a catalog GPU: a TPOT below the floor is aggregates in seconds under millisecond keys, a TPOT field that means
something else, or a run whose weights or decoding were not what the file says (FP8 weights halve the floor,
speculative decoding divides it by the tokens accepted per step). MoE models are left out (a step reads only the
experts its tokens route to). The GPUs the weights are split over: the run's tensor_parallel_size, else its GPU
count, else 8 (the floor at the most GPUs one node usually serves a model on, so an unstated TP never warns falsely).
"""

from __future__ import annotations

from typing import Any

from kvledger.errors import KvLedgerError
from kvledger.evidence.aggregate import AggregateRun
from kvledger.records import RunRecords
from kvledger.units import fmt_duration

__all__ = ["weight_read_floor_s", "tpot_floor_warning", "UNSTATED_GPUS"]

UNSTATED_GPUS = 8


def weight_read_floor_s(model: str | None, gpu: str | None, gpus: int) -> tuple[float, str] | None:
    """(seconds to read the weights once on one of ``gpus`` GPUs, how it was priced), or None for a model that is not
    bundled, an MoE model, or a GPU not in the catalog."""
    if not model or not gpu:
        return None
    from kvledger.catalog.gpus import get_gpu
    from kvledger.catalog.models import load_model, resolve_bundled

    bm = resolve_bundled(model)
    if bm is None:
        return None
    try:
        spec, g = load_model(bm.hf_id, allow_hub=False), get_gpu(gpu)
    except KvLedgerError:
        return None
    if spec.is_moe:
        return None
    wb = spec.weight_bytes() / gpus
    floor = wb / g.hbm_bandwidth_bytes_per_s
    return floor, (f"{model}'s {wb / 1e9:.2f} GB of weights per GPU ({gpus} GPU{'s' if gpus > 1 else ''}) read "
                   f"at {g.name}'s {g.hbm_bandwidth_bytes_per_s / 1e12:.2f} TB/s")


def _gpus(meta: Any) -> tuple[int, str]:
    tp = (meta.extra.get("engine_kwargs") or {}).get("tensor_parallel_size")
    if isinstance(tp, int) and not isinstance(tp, bool) and tp >= 1:
        return tp, "the run's tensor_parallel_size"
    if meta.num_gpus:
        return meta.num_gpus, "the run's GPU count"
    return UNSTATED_GPUS, f"no TP stated, so at most {UNSTATED_GPUS} GPUs"


def _field(fields: str, stat: str) -> str:
    """The one of a summary's source fields ("mean_tpot_ms, median_tpot_ms") that holds ``stat``."""
    names = [f.strip() for f in fields.split(",") if f.strip()]
    return next((f for f in names if stat in f), names[0] if names else "tpot")


def _stated_tpot(run: RunRecords | AggregateRun) -> tuple[float, str] | None:
    """(the run's typical TPOT, s, and where it was read) or None."""
    if isinstance(run, AggregateRun):
        m = run.metrics.get("tpot")
        if m is not None and m.mean_s is not None:
            return m.mean_s, f"mean TPOT ({_field(m.source_field, 'mean')})"
        if m is not None and 50.0 in m.percentiles_s:
            return m.percentiles_s[50.0], f"median TPOT ({_field(m.source_field, 'median')})"
        return None
    import numpy as np

    c = run.columns
    if c is not None:
        n = c.num_output_tokens
        keep = c.ok & (n > 1)
        tpot = (c.finish_s[keep] - c.first_token_s[keep]) / (n[keep] - 1)
    else:
        tpot = np.array([r.tpot_s for r in run.records if r.ok and r.num_output_tokens > 1], dtype=float)
    tpot = tpot[np.isfinite(tpot)]
    return (float(np.median(tpot)), "median per-request TPOT") if tpot.size else None


def tpot_floor_warning(run: RunRecords | AggregateRun) -> str | None:
    """The sentence for a TPOT below the weight-read floor (module docstring), with the file, the figures and the
    floor's terms; None when there is no floor to judge by or the TPOT is above it."""
    meta = run.metadata
    gpus, why = _gpus(meta)
    floor = weight_read_floor_s(meta.model, meta.hardware, gpus)
    tpot = _stated_tpot(run) if floor is not None else None
    if floor is None or tpot is None or tpot[0] <= 0 or tpot[0] >= floor[0]:
        return None
    return (f"{meta.source}: the {tpot[1]} is {fmt_duration(tpot[0])}, below the {fmt_duration(floor[0])} one decode "
            f"step needs to read the weights once ({floor[1]}; GPUs: {why}), which no dense model can beat: "
            "aggregates in seconds under *_ms keys, a TPOT field with another meaning, FP8 weights or speculative "
            "decoding the file does not state? "
            + ("The TPOT judged is (E2E − TTFT)/(output − 1) from the same file, not this field"
               if meta.extra.get("tpot_from_e2e") else "The figures are used as read"))
