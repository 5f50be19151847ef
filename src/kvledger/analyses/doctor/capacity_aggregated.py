"""The capacity finding on ``N Engines Aggregated:`` metrics lines (``--aggregate-engine-logging``): the GPU KV usage
such a line prints is the N data-parallel engines' mean, each engine its own pool (``dp_aggregated.py``: vLLM's
``AggregatedLoggingStatLogger`` averages the engines' ``kv_cache_usage`` and sums their preemptions).

A preemption means one engine's pool had no free block for a running request. With one pool, preemptions below
``KV_FULL_PCT`` say a step claimed more blocks than were free (``capacity.py``'s ``preemptions_below_full``). With N
pools the mean U bounds each engine only loosely: the fullest engine held at least U % and at most min(100, N·U) %, and
every engine at least N·U − (N − 1)·100 % (0 when that is negative). So a mean of 60 % over 2 engines fits both engines
at 60 % (no pool full: a step's claim) as well as one at 100 % beside the other at 20 % (one pool full: the traffic
split unevenly) — the mean cannot tell them apart, and where the fullest engine can reach 100 % an uneven split is the
likelier reading (``dp_balance`` reads the same lines for it). The finding says so, with the bounds of the preempting
line of the highest mean, and does not size a step's claim from the mean (the per-engine lines, without
``--aggregate-engine-logging``, show each pool).
"""

from __future__ import annotations

from kvledger.analyses.doctor.kv_usage import KV_FULL_PCT
from kvledger.evidence.vllm_log import StatsSample

__all__ = ["AGGREGATED_VERDICT", "aggregated_preempting", "aggregated_message", "engine_bounds"]

AGGREGATED_VERDICT = "preemptions_below_full_aggregated"
"""The verdict: preemptions while the engines' mean KV usage stayed below ``KV_FULL_PCT`` on aggregated lines."""


def aggregated_preempting(stats: tuple[StatsSample, ...], idx: list[int]) -> bool:
    """Whether the preempting metrics lines ``idx`` are all aggregated lines of more than one engine."""
    return bool(idx) and all(stats[i].engine == "aggregated" and (stats[i].engines_aggregated or 0) > 1 for i in idx)


def engine_bounds(mean_pct: float, engines: int) -> tuple[float, float, float]:
    """(every engine at least, the fullest at least, the fullest at most), % of its pool, at a mean of ``mean_pct`` %
    over ``engines`` pools of the same size: N·U − (N − 1)·100 (≥ 0), U, min(100, N·U)."""
    return max(0.0, engines * mean_pct - (engines - 1) * 100.0), mean_pct, min(100.0, engines * mean_pct)


def aggregated_message(total: int, stats: tuple[StatsSample, ...], idx: list[int], cite: str = "") -> str:
    """The finding's message (module doc): the preemptions, what the mean bounds and what it cannot show."""
    line = max((stats[i] for i in idx), key=lambda s: (s.gpu_kv_usage_pct or 0.0, -s.line_no))
    u, n = line.gpu_kv_usage_pct or 0.0, line.engines_aggregated or 1
    every, _, most = engine_bounds(u, n)
    other = (n * u - 100.0) / (n - 1)  # the others' mean with the fullest engine at 100 %
    others = "the others" if n > 2 else "the other"
    split = (f"one engine at 100% beside {others} at {other:.1f}%{' on average' if n > 2 else ''}" if most >= 100.0
             else f"one engine at {most:.1f}% beside {others} at 0%")
    likelier = ("so an uneven split of the traffic across the DP engines (one pool full while another had room: the "
                "dp_balance finding) is the likelier reading" if most >= KV_FULL_PCT else
                f"no engine can have reached {KV_FULL_PCT:.0f}%, so a step claimed more blocks than were free")
    return (f"{total:,} preemption(s){cite} while the {n} data-parallel engines' mean GPU KV usage stayed below "
            f"{KV_FULL_PCT:.0f}% (up to {u:.1f}% at a preempting line, line {line.line_no}). These are '{n} Engines "
            "Aggregated' lines (--aggregate-engine-logging): the usage is the mean of the engines' pools, not one "
            f"pool's. At a mean of {u:.1f}% over {n} engines every engine held at least N·U − (N − 1)·100% = "
            f"{n} × {u:.1f} − {n - 1} × 100 = {every:.1f}% and the fullest between {u:.1f}% and {most:.1f}%; the "
            f"mean cannot tell all engines at {u:.1f}% (no pool full) from {split}, {likelier}. Drop "
            "--aggregate-engine-logging to read each engine's usage before lowering max_num_batched_tokens.")
