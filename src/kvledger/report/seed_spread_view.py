"""Terminal words for ``--seeds N``: each figure's min–max over the seeds (``analyses.serving.seed_spread``), next to
the first seed's figures, which stay the reported ones."""

from __future__ import annotations

from typing import Any

__all__ = ["mean_range_ms", "spread_line", "spread_note_line", "capacity_range_text"]


def _range(s: dict[str, Any] | None, fmt: str, scale: float = 1.0) -> str:
    if s is None or s["min"] is None:
        return "—"
    return f"{s['min'] * scale:{fmt}}–{s['max'] * scale:{fmt}}"


def mean_range_ms(spread: Any, key: str) -> str:
    """The latency table's ``seeds`` cell: the mean's min–max over the seeds, ms (``12.1–14.0``)."""
    return _range(spread.get(f"{key}.mean"), ",.1f", 1e3)


def spread_line(spread: Any) -> str:
    """One line of the other printed figures' min–max over the seeds."""
    g = spread.get
    return (f"over {spread.label} (min–max; the figures above are seed {spread.seeds[0]}'s): throughput "
            f"{_range(g('throughput_req_per_s'), ',.2f')} req/s, "
            f"{_range(g('throughput_output_tok_per_s'), ',.0f')} output tok/s; KV usage mean "
            f"{_range(g('kv_usage.mean'), '.1%')}, max {_range(g('kv_usage.max'), '.1%')}; "
            f"preemptions {_range(g('num_preemptions'), ',.0f')}; finished {_range(g('num_finished'), ',.0f')}; "
            f"prefix-cache hit rate {_range(g('prefix_cache_hit_rate'), '.1%')}; the seeds column: the mean's range; "
            "every percentile's in --json (seed_spread)")


def spread_note_line(spread: Any) -> str | None:
    """The bold line under the error bands: the draw moves a banded figure more than 10 % (or the workload has no
    draw); None when neither."""
    if spread.seed_free:
        from kvledger.analyses.serving.seed_spread import SEED_FREE_NOTE

        return f"[bold]seed spread[/]: none over {spread.label} — {SEED_FREE_NOTE}"
    return None if spread.note is None else f"[bold]seed spread[/]: {spread.note}"


def capacity_range_text(cap: Any, unit: str) -> str:
    """``seeds 0–4: 18.9–21.3 req/s`` for a searched capacity (``… 9 concurrent users for each`` when the seeds
    agree; ``…; none for seed 2`` where a seed's search found none; ``seeds 0–4: the same — …`` for a workload that
    draws nothing from the seed)."""
    if cap.seed_free:
        return f"{cap.label}: the same — the workload draws nothing from the seed"
    s = cap.metrics["boundary_value"]
    missing = [str(seed) for seed, v in cap.per_seed if v is None]
    if s["min"] is None:
        return f"{cap.label}: none found for any"
    found = f"{s['min']:g}{unit} for each" if s["min"] == s["max"] else f"{s['min']:g}–{s['max']:g}{unit}"
    return f"{cap.label}: {found}" + (f"; none for seed {', '.join(missing)}" if missing else "")
