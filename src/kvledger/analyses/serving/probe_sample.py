"""Whether a capacity search's probes replay a representative sample of their trace.

A probe replays the trace's first N requests (rescaled to the probe's rate). A window of a real trace need not look
like the trace: the first 60 requests of azure-conv average 722 prompt and 122 output tokens, its first 2,000 1,105 and
265, the whole trace (19,366) 1,155 and 211; on Llama-3.1-8B / H100 (TTFT ≤ 200 ms, TPOT ≤ 50 ms) probes of 60, 2,000
and all 19,366 requests find 35.5, 19.75 and 16 req/s. When the window's prompt or output mean differs from the whole
trace's (its first ``REFERENCE_MAX_REQUESTS`` at most) by more than ``TOLERANCE`` (a threshold of this check, not
fitted), the search says the capacity is of that sample. The token means are a proxy: a window also has its own
arrival bursts, which the probe keeps. A synthetic workload draws every probe from its distributions and is not
checked.
"""

from __future__ import annotations

from functools import lru_cache
from pathlib import Path
from typing import Any

__all__ = ["REFERENCE_MAX_REQUESTS", "TOLERANCE", "sample_note", "workload_sample_note"]

REFERENCE_MAX_REQUESTS = 100_000
"""The most requests of a trace read for the reference means (a longer trace is read to this many)."""
TOLERANCE = 0.2
"""Relative difference of a mean token count, more than, that makes the sample unrepresentative."""


def sample_note(sim: Any) -> list[str]:
    """``unrepresentative sample: …`` for a trace-driven probe (``SimulatedRun``) whose first N requests' prompt or
    output mean differs from the whole trace's by more than ``TOLERANCE``; else []."""
    return workload_sample_note(sim.args.trace, sim.synthetic, sim.setup.workload_info)


def workload_sample_note(trace: Any, synthetic: Any, info: dict[str, Any]) -> list[str]:
    """``sample_note`` for probes of ``trace`` (None or a ``synthetic`` workload: not checked) whose requests are
    described by ``info`` (``num_requests``, ``prompt_tokens_mean``, ``output_tokens_mean``): a search's disaggregated
    unit and tier variant replay the same first N requests as its colocated probes, and say so alike."""
    if synthetic is not None or not trace:
        return []
    n = int(info.get("num_requests") or 0)
    if not n:
        return []
    count, prompt_ref, output_ref = _reference(str(trace), _mtime(str(trace)))
    if count <= n:
        return []
    prompt, output = float(info["prompt_tokens_mean"]), float(info["output_tokens_mean"])
    off = [abs(x / ref_x - 1.0) for x, ref_x in ((prompt, prompt_ref), (output, output_ref)) if ref_x > 0]
    if not off or max(off) <= TOLERANCE:
        return []
    whole = "the whole trace's" if count < REFERENCE_MAX_REQUESTS else f"those of its first {count:,}"
    return [f"unrepresentative sample: each probe replays the trace's first {n:,} requests, prompt mean {prompt:,.0f} "
            f"and output mean {output:,.0f} tokens, against {prompt_ref:,.0f} and {output_ref:,.0f} over {count:,} "
            f"requests, {whole} (kvledger.analyses.serving.probe_sample): the capacity is of this sample, not "
            f"necessarily of the trace — more requests per probe (--num-requests, up to {count:,}) read more of it"]


def _mtime(trace: str) -> float | None:
    """A trace file's modification time (a changed file is read again); None for a bundled trace name."""
    p = Path(trace)
    return p.stat().st_mtime if p.is_file() else None


@lru_cache(maxsize=8)
def _reference(trace: str, mtime: float | None) -> tuple[int, float, float]:
    """(requests read, prompt mean, output mean) of the trace, its first ``REFERENCE_MAX_REQUESTS`` at most: read once
    per trace in a process, however many candidates a search probes (``mtime`` only keys the cache)."""
    from kvledger.dynamics.workload.traces import load_trace

    ref = load_trace(trace)[:REFERENCE_MAX_REQUESTS]
    if not ref:
        return 0, 0.0, 0.0
    return (len(ref), sum(r.num_prompt_tokens for r in ref) / len(ref),
            sum(r.num_output_tokens for r in ref) / len(ref))
