"""A second starting point for the model-scope fit, read off the measured runs regime by regime: the prefill regime
from the least-loaded run's TTFT against prompt length, the decode regime from each run's token-weighted TPOT against
its mean number of decoding requests.

The fit's objective has several local minima (the per-sequence and KV-read decode terms trade against each other, and
dearer prompt steps can stand in for dearer decodes by pausing them longer); starting only from the start model's
projection, the fit on DistServe's five runs ends at 1.138, from this start at 0.643. Only the runs being fitted are
read (a left-out run never shapes its own fold's start).
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from kvledger.accounting.fitted_cost import LinearStepCost
from kvledger.calibration.replay import MeasuredRun

__all__ = ["regime_start"]

MIN_REQUESTS = 10  # per run, for its TTFT slope or its TPOT point to count


def _ok(run: MeasuredRun) -> list:
    return [r for r in run.measured.records if r.ok and r.first_token_s is not None and r.finish_s is not None]


def regime_start(runs: list[MeasuredRun], projection: LinearStepCost) -> LinearStepCost | None:
    """``projection`` with its prefill-token cost set to the least-loaded run's measured TTFT slope per prompt token
    (the pair term 0) and its decode cost to the slope of the runs' TPOT (Σ decode time / Σ decode tokens) against
    their mean number of decoding requests (Σ decode time / run length; the KV-read term 0). None when fewer than two
    runs have ``MIN_REQUESTS`` per-request records (aggregate-only runs have none) or a slope is not positive."""
    pts = []
    for run in runs:
        recs = _ok(run)
        if len(recs) < MIN_REQUESTS:
            continue
        span_s = max(r.finish_s for r in recs) - min(r.arrival_s for r in recs)
        decode_s = sum(r.finish_s - r.first_token_s for r in recs)
        tokens = sum(r.num_output_tokens - 1 for r in recs)
        if span_s <= 0 or tokens <= 0:
            continue
        pts.append((float(np.mean([r.ttft_s for r in recs])), recs, decode_s / span_s, decode_s / tokens))
    if len(pts) < 2:
        return None
    _, low, _, _ = min(pts, key=lambda p: p[0])
    prompt = np.array([r.num_prompt_tokens for r in low], dtype=np.float64)
    if np.ptp(prompt) == 0:
        return None
    prefill_slope = float(np.polyfit(prompt, np.array([r.ttft_s for r in low]), 1)[0])
    decode_slope = float(np.polyfit([p[2] for p in pts], [p[3] for p in pts], 1)[0])
    if prefill_slope <= 0 or decode_slope <= 0:
        return None
    return replace(projection, prefill_token_s=prefill_slope, prefill_pair_s=0.0, decode_seq_s=decode_slope,
                   decode_kv_token_s=0.0)
