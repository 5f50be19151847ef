"""Whether a capacity search's probes replay a representative sample of their trace.

A probe replays the trace's first N requests (rescaled to the probe's rate). A short window of a real trace need not
look like the trace: the first 60 requests of azure-conv average 722 prompt and 122 output tokens against 1,105 and
265 over its first 2,000, and 60-request probes on Llama-3.1-8B / H100 (TTFT ≤ 200 ms) find 35.5 req/s where
2,000-request probes find 19.75. When the window's prompt or output mean differs from the first
``REFERENCE_REQUESTS`` requests' by more than ``TOLERANCE`` (a threshold of this check, not fitted), the search says
the capacity is of that sample. A synthetic workload draws every probe from its distributions and is not checked.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

__all__ = ["REFERENCE_REQUESTS", "TOLERANCE", "sample_note"]

REFERENCE_REQUESTS = 2000
"""The window the probes' sample is compared with: the default probe size (sim_boundary.PROBE_NUM_REQUESTS)."""
TOLERANCE = 0.2
"""Relative difference of a mean token count, more than, that makes the sample unrepresentative."""


def sample_note(sim: Any) -> list[str]:
    """``unrepresentative sample: …`` for a trace-driven probe (``SimulatedRun``) whose first N requests' prompt or
    output mean differs from the trace's first ``REFERENCE_REQUESTS`` by more than ``TOLERANCE``; else []."""
    if sim.synthetic is not None or not sim.args.trace:
        return []
    info = sim.setup.workload_info
    n = int(info.get("num_requests") or 0)
    if not n or n >= REFERENCE_REQUESTS:
        return []
    count, prompt_ref, output_ref = _reference(str(sim.args.trace), _mtime(str(sim.args.trace)))
    if count <= n:
        return []
    prompt, output = float(info["prompt_tokens_mean"]), float(info["output_tokens_mean"])
    off = [abs(x / ref_x - 1.0) for x, ref_x in ((prompt, prompt_ref), (output, output_ref)) if ref_x > 0]
    if not off or max(off) <= TOLERANCE:
        return []
    lighter = prompt + output < prompt_ref + output_ref
    return [f"unrepresentative sample: each probe replays the trace's first {n:,} requests, prompt mean {prompt:,.0f} "
            f"and output mean {output:,.0f} tokens, against {prompt_ref:,.0f} and {output_ref:,.0f} over its first "
            f"{count:,} (kvledger.analyses.serving.probe_sample): the capacity is of this "
            f"{'lighter' if lighter else 'heavier'} sample, not of the trace — more requests per probe "
            f"(--num-requests {REFERENCE_REQUESTS:,} or more) read the trace"]


def _mtime(trace: str) -> float | None:
    """A trace file's modification time (a changed file is read again); None for a bundled trace name."""
    p = Path(trace)
    return p.stat().st_mtime if p.is_file() else None


@lru_cache(maxsize=8)
def _reference(trace: str, mtime: float | None) -> tuple[int, float, float]:
    """(requests read, prompt mean, output mean) of the trace's first ``REFERENCE_REQUESTS``: read once per trace in a
    process, however many candidates a search probes (``mtime`` only keys the cache)."""
    from kvledger.dynamics.workload.traces import load_trace

    ref = load_trace(trace, num_requests=REFERENCE_REQUESTS)
    if not ref:
        return 0, 0.0, 0.0
    return (len(ref), sum(r.num_prompt_tokens for r in ref) / len(ref),
            sum(r.num_output_tokens for r in ref) / len(ref))
