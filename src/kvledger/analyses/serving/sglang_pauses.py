"""How much of the running requests' decode time SGLang's prefill steps took: SGLang (0.5.x, ``--enable-mixed-chunk``
off by default; ``managers/scheduler.py :: Scheduler.get_next_batch_to_run`` read in 0.5.23) runs a prefill batch
whenever one can be formed and a decode batch otherwise, so every running request waits out each prefill step without
a token, where vLLM's chunked prefill puts the decodes and the prefill chunk in one step. That wait is in SGLang's
TPOT and ITL and is why they sit above vLLM's at the same load.

Read from the records' token times (``chunk_times_s``), exactly under that rule: every step ends at one instant that
all the tokens it emits carry; a decode step includes every running request, so a step end with any token past a
request's first is a decode step, and an end with first tokens only is a prefill step (a chunked request's earlier
chunks emit nothing, but the chunk continues first, so they run just before its last chunk's step and fall in the
same interval). A running request between its first token f and its last F waited out the prefill intervals inside
(f, F]; the share is Σ over requests of that wait ÷ Σ (F − f), request-seconds over request-seconds. One engine only:
the steps of several replicas, or of DP ranks each choosing prefill or decode for itself, do not share one timeline.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["DecodePauses", "decode_pauses", "needs_token_times"]

_TICK_S = 1e-9  # step ends closer than this are one end (float noise; a step is ≥ microseconds), s


@dataclass(frozen=True)
class DecodePauses:
    """The running requests' decode time and the part of it prefill steps took, request-seconds."""

    paused_request_s: float
    decode_request_s: float

    @property
    def share(self) -> float:
        """paused ÷ decode time, a fraction."""
        return self.paused_request_s / self.decode_request_s

    def note(self) -> str:
        """The one line ``simulate`` prints."""
        return (f"SGLang's prefill steps paused the running decodes (no mixed batches by default): {self.share:.1%} "
                f"of their decode time ({self.paused_request_s:,.4g} of {self.decode_request_s:,.4g} request-s, first "
                "token to last), in TPOT and ITL; vLLM's mixed steps do not pause")


def needs_token_times(args: Any) -> bool:
    """Whether ``simulate``'s run (``SimRequestArgs``) keeps its records' token times for ``decode_pauses``: SGLang's
    scheduling on one replica (a DP-attention run is left out where the document is made)."""
    return "sglang" in (args.policy, args.batching) and args.replicas == 1


def decode_pauses(records: list[Any]) -> DecodePauses | None:
    """The decode time prefill steps took from requests running on one SGLang engine (module docstring); None without
    token times, without a request past its first token, or where no prefill step paused one."""
    runs = [r.chunk_times_s for r in records if r.ok and r.chunk_times_s is not None and len(r.chunk_times_s) > 1]
    if not runs:
        return None
    times = np.round(np.concatenate(runs) / _TICK_S) * _TICK_S
    later = np.concatenate([np.arange(len(t)) > 0 for t in runs])  # a token past its request's first
    ends, where = np.unique(times, return_inverse=True)
    decode = np.zeros(len(ends), dtype=bool)
    decode[where[later]] = True
    gaps = np.diff(ends, prepend=ends[0])  # the step (or steps) ending at each end; the first end: 0
    waited = np.cumsum(np.where(decode, 0.0, gaps))  # Σ prefill-step time up to each end, s
    first = np.searchsorted(ends, [np.round(t[0] / _TICK_S) * _TICK_S for t in runs])
    last = np.searchsorted(ends, [np.round(t[-1] / _TICK_S) * _TICK_S for t in runs])
    paused = float(np.sum(waited[last] - waited[first]))
    span = float(sum(t[-1] - t[0] for t in runs))
    return DecodePauses(paused, span) if paused > 0 and span > 0 else None
