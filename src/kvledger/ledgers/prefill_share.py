"""How a measured or simulated run's GPU time splits between prefill (input tokens) and decode (output tokens), when
the user gives no ``--prefill-share``: the simulator's step attribution, else the occupancy split raised to the roofline
floor (``ledgers/cost.py``'s docstring says why)."""

from __future__ import annotations

import numpy as np

from kvledger.errors import InputError
from kvledger.evidence.aggregate import AggregateRun
from kvledger.ledgers.columns import columns_from
from kvledger.ledgers.goodput import GoodputResult
from kvledger.ledgers.prefill_floor import PrefillFloor
from kvledger.records import RunRecords

__all__ = ["measured_prefill_share", "OCCUPANCY_CAVEAT"]

OCCUPANCY_CAVEAT = ("wall time to first token, not GPU work: it understates prefill when many requests share each "
                    "step, "
                    "as a prompt's chunk can take most of a step's time while its TTFT is a few steps long")


def measured_prefill_share(run: RunRecords | AggregateRun, gp: GoodputResult,
                            floor: PrefillFloor | str | None) -> tuple[float, str]:
    split = run.metadata.extra.get("gpu_time_split") if isinstance(run, RunRecords) else None
    if split and split.get("gpu_s", 0) > 0:
        return split["prefill_share"], (f"simulated step attribution: Σ prefill-attributed step time ÷ Σ step time "
                                        f"({split['prefill_gpu_s']:.4g} ÷ {split['gpu_s']:.4g} GPU-s, all requests), "
                                        f"{split['rule']}, "
                                        f"step cost {split['cost_model']}")
    try:
        share, how = _occupancy_share(run, gp)
    except InputError:
        if not isinstance(floor, PrefillFloor):
            raise
        return floor.share, f"{floor.text} (no occupancy split: {_missing_for_split(run)})"
    if not isinstance(floor, PrefillFloor):
        return share, how + f"; no roofline floor under it: {floor or 'not computed'}"
    if floor.share > share:
        return floor.share, f"{floor.text}; {floor.share_text()}, raised from the {how}"
    return share, f"{how}; above the {floor.text}; {floor.share_text()}"


def _occupancy_share(run: RunRecords | AggregateRun, gp: GoodputResult) -> tuple[float, str]:
    if isinstance(run, RunRecords) and gp.good_mask is not None:
        cols = columns_from(run)
        good = gp.good_mask
        ttft, e2e = float(cols.ttft_s()[good].sum()), float(cols.e2e_s()[good].sum())
        if e2e > 0 and np.isfinite(ttft):
            return (
                ttft / e2e,
                f"occupancy split Σ TTFT ÷ Σ E2E over {int(good.sum())} good requests ({OCCUPANCY_CAVEAT})",
            )
    if isinstance(run, AggregateRun) and "ttft" in run.metrics and "e2e" in run.metrics:
        t, e = run.metrics["ttft"].mean_s, run.metrics["e2e"].mean_s
        if t is not None and e:
            return (
                t / e,
                f"occupancy split mean TTFT ÷ mean E2E from the file's aggregates, all completed requests "
                f"({OCCUPANCY_CAVEAT})",
            )
    raise InputError(f"cannot split GPU time between prefill and decode: {_missing_for_split(run)}; pass "
                     f"--prefill-share "
                     "(share of GPU time charged to input tokens)")


def _missing_for_split(run: RunRecords | AggregateRun) -> str:
    """What the prefill/decode split (mean TTFT ÷ mean E2E, or Σ TTFT ÷ Σ E2E over good requests) lacks in this run."""
    if isinstance(run, RunRecords):
        return "the good requests have no TTFT or E2E (a non-streaming run has no first-token time)"
    have = []
    for name, key in (("TTFT", "ttft"), ("E2E", "e2e")):
        m = run.metrics.get(key)
        if m is None:
            have.append(f"no {name} at all")
        elif m.mean_s is None:
            pts = ", ".join(f"p{p:g}" for p in sorted(m.percentiles_s)) or "no statistic"
            have.append(f"{name} only as {pts} (no mean)")
    text = "the split is mean TTFT ÷ mean E2E, and the file gives " + " and ".join(have)
    t, e = run.metrics.get("ttft"), run.metrics.get("e2e")
    if t is not None and e is not None and t.percentiles_s.get(50.0) is not None and e.percentiles_s.get(50.0):
        tm, em = t.percentiles_s[50.0], e.percentiles_s[50.0]
        text += f" (the medians' ratio, {tm:.3g} s ÷ {em:.3g} s = {tm / em:.3f}, is a rough stand-in)"
    return text
