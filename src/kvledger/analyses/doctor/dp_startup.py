"""Data-parallel engines' start-up capacity lines checked against each other.

With ``--data-parallel-size`` N each engine core process (tagged ``EngineCore_DP0``, ``EngineCore_DP1``, … in the
log) profiles its own GPUs and sizes its own KV pool (vLLM 0.19 ``v1/engine/core.py::_initialize_kv_caches``: nothing
is reduced across DP ranks), then prints ``GPU KV cache size: N tokens`` and ``Maximum concurrency …``
(``kv_cache_utils.py``, ``info_once`` scoped to the process). The API server adds the ranks' block counts into one
``num_gpu_blocks`` (``v1/engine/utils.py`` at start-up), so its own ``num_gpu_blocks is: N`` line is their sum, not a
rank's. Ranks of one launch on identical GPUs size identical pools; a rank whose pool is smaller started on a GPU with
less free memory (another process on it, a different board), and under an even split of the traffic it fills and
preempts first.
"""

from __future__ import annotations

from kvledger.analyses.doctor.context import DoctorContext
from kvledger.analyses.doctor.types import Finding

__all__ = ["DP_STARTUP_RULE", "diagnose_dp_startup"]

_FIELDS = {"kv_cache_tokens": ("GPU KV cache size", "tokens"), "num_gpu_blocks": ("GPU blocks", "blocks"),
           "available_kv_bytes": ("available KV cache memory", "B")}

DP_STARTUP_RULE = ("data-parallel engines' start-up lines (one 'GPU KV cache size' line per EngineCore_DP<k> process): "
                   "each rank sizes its own pool (v1/engine/core.py::_initialize_kv_caches, no reduction across DP "
                   "ranks), so ranks of one launch on identical GPUs print the same KV cache size and block count; "
                   "any difference is flagged, with each rank's line")


def _shown(field: str, value: float) -> str:
    return f"{value / 2**30:.2f} GiB" if field == "available_kv_bytes" else f"{int(value):,} {_FIELDS[field][1]}"


def diagnose_dp_startup(ctx: DoctorContext) -> Finding | None:
    """The finding for a log where two or more DP ranks print their capacity lines; None otherwise."""
    ranks = ctx.log.startup.dp_ranks
    fields = [f for f in _FIELDS if sum(f in r for r in ranks.values()) >= 2]
    if len(ranks) < 2 or not fields:
        return None
    evidence, differ = [], []
    for f in fields:
        have = {k: r[f] for k, r in ranks.items() if f in r}
        evidence += [{"line": line, "time": None, "what": f"EngineCore_DP{k}: {_FIELDS[f][0]}",
                      "value": _shown(f, v)} for k, (v, line) in have.items()]
        lo, hi = min(have.items(), key=lambda x: x[1][0]), max(have.items(), key=lambda x: x[1][0])
        if lo[1][0] != hi[1][0]:
            differ.append(f"{_FIELDS[f][0]}: DP{lo[0]} {_shown(f, lo[1][0])} (line {lo[1][1]}) against DP{hi[0]} "
                          f"{_shown(f, hi[1][0])} (line {hi[1][1]}), {(hi[1][0] - lo[1][0]) / hi[1][0]:.1%} less")
    shown = "; ".join(f"DP{k} " + ", ".join(f"{_shown(f, r[f][0])} (line {r[f][1]})" for f in fields if f in r)
                      for k, r in ranks.items())
    if not differ:
        return Finding("dp_startup", False, "ranks_agree", f"{len(ranks)} DP ranks sized the same KV cache: {shown}",
                       DP_STARTUP_RULE, tuple(evidence))
    msg = (f"{len(ranks)} DP ranks sized different KV caches: {'; '.join(differ)}. Each rank profiles its own GPU, so "
           "the smaller one had less free memory at start-up (another process on that GPU, or a different board); "
           "with the traffic split evenly it fills and preempts first. Check that GPU (nvidia-smi) before the next "
           f"start (per rank: {shown})")
    return Finding("dp_startup", True, "ranks_differ", msg, DP_STARTUP_RULE, tuple(evidence))
