"""Every measured file ``calibrate`` and ``validate`` accept, as fit/compare targets: per-request runs, inference-perf
stage files, and aggregate-only benchmark runs (one per request rate) compared by rate.

A per-request run replays its own requests; a stage or an aggregate run replays a synthetic workload like it
(``kvledger.calibration.sweep``) and is compared on the aggregates it holds. A file with several aggregate runs
(an SGLang or vLLM ``bench_serving`` sweep over request rates) gives one target per rate, in rate order.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from kvledger.calibration.replay import DISTSERVE_PREFIX, MeasuredRun, load_measured
from kvledger.calibration.sweep import Stage, aggregate_stage, looks_like_stage, read_stage, stage_run
from kvledger.errors import FormatError

__all__ = ["Target", "load_targets"]


@dataclass
class Target:
    """One run to fit or compare: the replayable run and, for aggregates, the stage it stands for (else None)."""

    run: MeasuredRun
    stage: Stage | None = None


def _aggregates(path: str, seed: int, client_concurrency: int | None) -> list[Target] | None:
    """The aggregate-only runs in ``path`` as targets, or None when it holds per-request records."""
    from kvledger.evidence.aggregate import AggregateRun
    from kvledger.evidence.llmservingsim import looks_like_llmservingsim
    from kvledger.evidence.read import read_runs

    p = Path(path)
    if path.startswith(DISTSERVE_PREFIX) or path.endswith(".exp") or not p.is_file() or looks_like_llmservingsim(p):
        return None
    try:
        runs = read_runs(p)
    except FormatError:
        return None  # not a benchmark file the readers know: load_measured says why
    if not runs or not all(isinstance(r, AggregateRun) for r in runs):
        return None
    out = []
    for i, agg in enumerate(runs):
        label = f"{p.stem} @ {agg.metadata.request_rate:g} req/s" if agg.metadata.request_rate else f"{p.stem} #{i}"
        st = aggregate_stage(agg, label)
        out.append(Target(stage_run(st, label, seed + i, client_concurrency), st))
    return sorted(out, key=lambda t: t.stage.requested_rate)


def load_targets(path: str, *, seed: int = 0, client_concurrency: int | None = None) -> list[Target]:
    """The targets in ``path`` (module docstring).

    Raises:
        FormatError / InputError: unreadable file, or nothing in it to compare (the reason named).
    """
    if looks_like_stage(path):
        st = read_stage(path)
        return [Target(stage_run(st, Path(path).stem, seed, client_concurrency), st)]
    agg = _aggregates(path, seed, client_concurrency)
    if agg:
        return agg
    return [Target(load_measured(path))]
