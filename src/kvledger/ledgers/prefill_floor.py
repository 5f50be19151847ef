"""The roofline floor under a measured run's prefill share: GPU-seconds its prompts' FLOPs need at the achievable peak,
as a share of the run's GPU time.

A benchmark file has no step data, so the cost ledger's default split for it is the occupancy
split (Σ TTFT ÷ Σ E2E), wall time, not GPU work. Its prompts' work is known, though: each of the
completed requests' uncached prompt tokens costs 2 FLOPs per matmul parameter, its chunk the LM
head once, and causal attention ``c·p + c(c+1)/2`` query–key pairs for ``c`` new tokens after ``p``
cached ones (``kvledger.accounting.roofline.RooflineStepCost.costs``, TP 1: the FLOPs summed over a
TP group are the same). At the achievable fraction of the GPU's peak (0.7, the roofline's default)
that is the least GPU time the prefills can have taken::

    floor share = (matmul FLOPs ÷ (peak × 0.7) + attention FLOPs ÷ (attention peak × 0.7)) ÷ (GPUs × duration)

A benchmark's engine reaches less than that on prefill, so the true share is above the floor; the
weight reads a bandwidth-bound step shares are left out, which keeps it a floor. The ledger uses the
occupancy split raised to this floor (``ledgers/cost.py``). For an aggregate file the attention
pairs use the mean prompt length (Σ p² ≥ N·mean², so this too errs low).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from kvledger.errors import KvLedgerError
from kvledger.evidence.aggregate import AggregateRun
from kvledger.jsonable import to_jsonable
from kvledger.records import RunRecords

__all__ = ["PrefillFloor", "prefill_floor", "FLOPS_FRACTION"]

FLOPS_FRACTION = 0.7  # RooflineStepCost's default achievable share of peak FLOP/s (an assumption, stated there)


@dataclass(frozen=True, slots=True)
class PrefillFloor:
    """The floor and its arithmetic: prefill GPU-s at the achievable peak, the run's GPU-s, their ratio (0–1)."""

    prefill_gpu_s: float
    run_gpu_s: float
    share: float
    text: str

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)

    def share_text(self) -> str:
        """The floor share in words: what it is, its two GPU-second figures and its unit (a fraction of GPU time)."""
        return (f"floor share = prefill {self.prefill_gpu_s:.4g} ÷ run {self.run_gpu_s:.4g} GPU-s = {self.share:.3f} "
                f"of the run's GPU time")


def _prompts(run: RunRecords | AggregateRun) -> tuple[float, int, float, float] | None:
    """(new prompt tokens, prefills, Σ (new + cached) tokens, Σ causal pairs) of the completed requests, or None."""
    if isinstance(run, RunRecords):
        ok = [r for r in run.records if r.ok and r.num_prompt_tokens > 0]
        if not ok:
            return None
        p = np.array([r.num_prompt_tokens for r in ok], dtype=np.float64)
        c = np.minimum(np.array([r.num_cached_tokens or 0 for r in ok], dtype=np.float64), p)
        n = p - c
        return float(n.sum()), len(ok), float(p.sum()), float((n * c + n * (n + 1) / 2).sum())
    if not run.total_input_tokens or not run.num_completed:
        return None
    m = run.total_input_tokens / run.num_completed
    input_tokens = float(run.total_input_tokens)
    return input_tokens, run.num_completed, input_tokens, run.num_completed * m * (m + 1) / 2


def prefill_floor(run: RunRecords | AggregateRun, model: str | None, gpu: str | None,
                  num_gpus: int) -> tuple[PrefillFloor | None, str]:
    """(the floor, "") for ``run`` served by ``num_gpus`` GPUs named ``gpu`` with the model named ``model``, or (None,
    why
    not): a name the bundled catalogs do not know (no network look-up), no prompt token counts, no duration."""
    from kvledger.accounting.kvcache import kv_ledger
    from kvledger.accounting.roofline import RooflineStepCost
    from kvledger.accounting.stepcost import StepShape
    from kvledger.catalog.gpus import get_gpu
    from kvledger.catalog.models import load_model

    duration = run.duration_s
    prompts = _prompts(run)
    if not model or not gpu:
        return None, f"the run names no {'model' if not model else 'GPU'} (pass --model and --gpu)"
    if not duration or duration <= 0 or prompts is None:
        return None, "the run states no prompt token counts or no duration"
    try:
        spec, g = load_model(model, allow_hub=False), get_gpu(gpu)
        rc = RooflineStepCost(spec, g, kv_ledger(spec, "auto", 1), 1, flops_fraction=FLOPS_FRACTION)
    except KvLedgerError as err:
        return (
            None,
            f"{str(err).split(';')[0]} in the bundled catalogs (pass --model with a bundled name or a config.json)",
        )
    new, seqs, kv_tokens, pairs = prompts
    c = rc.costs(StepShape(int(new), seqs, int(kv_tokens), pairs, 0, 0))  # FLOPs are linear in these sums
    pre_s = c.matmul_flops / (rc.peak_flops * FLOPS_FRACTION) + c.attn_flops / (rc.attn_peak_flops * FLOPS_FRACTION)
    run_s = num_gpus * duration
    text = (f"roofline floor: {seqs:,} prompts, {new:,.0f} uncached tokens of {spec.name} need {c.matmul_flops:.4g} "
            f"matmul + "
            f"{c.attn_flops:.4g} attention FLOPs = {pre_s:.4g} GPU-s at 70% of {g.name}'s {rc.dtype} peak, of the "
            f"run's "
            f"{num_gpus} GPU × {duration:.4g} s = {run_s:.4g} GPU-s (kvledger.ledgers.prefill_floor)")
    return PrefillFloor(pre_s, run_s, min(1.0, pre_s / run_s), text), ""
