"""How much of the running requests' decode time SGLang's prefill steps took: SGLang (0.5.x, ``--enable-mixed-chunk``
off by default; ``managers/scheduler.py :: Scheduler.get_next_batch_to_run`` read in 0.5.23) runs a prefill batch
whenever one can be formed and a decode batch otherwise, so every running request waits out each prefill step without
a token, where vLLM's chunked prefill puts the decodes and the prefill chunk in one step. That wait is in SGLang's
TPOT and ITL and is why they sit above vLLM's at the same load.

Counted where the simulator runs SGLang's steps, exactly under that rule: a step with a prefill and no decode (a
chunked request's earlier chunks too: they emit nothing, and the chunk continues first, so they run just before its
last chunk's step) pauses every running request past its first token that it leaves out, for its duration
(``Replica._skipped``, and ``sglang_settle`` for the prefill steps of an arrival stretch): the run's
``extra["sglang_paused_request_s"]``, per replica. A running request between its first token f and its last F waits
out the prefill steps inside (f, F]; the share is that sum ÷ Σ (F − f) over the finished requests (their records'
first-token and finish times), request-seconds over request-seconds (a request an early stop cut off waited too,
without a record's span). One engine only: the steps of several replicas, or of DP ranks each choosing prefill or
decode for itself, do not share one timeline.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["DecodePauses", "decode_pauses"]


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


def decode_pauses(paused_request_s: float, run: Any) -> DecodePauses | None:
    """The decode time prefill steps took from requests running on one SGLang engine (module docstring): the
    simulator's ``paused_request_s`` over the finished requests' first-token-to-last time in ``run`` (``RunRecords``;
    read from its columns where it holds them, so no record is built); None without a request past its first token,
    or where no prefill step paused one."""
    c = run.columns
    if c is not None:
        done = c.ok & (c.num_output_tokens > 1) & np.isfinite(c.first_token_s) & np.isfinite(c.finish_s)
        span = math.fsum((c.finish_s[done] - c.first_token_s[done]).tolist())
    else:
        span = math.fsum(r.finish_s - r.first_token_s for r in run.records
                         if r.ok and r.num_output_tokens > 1 and r.first_token_s is not None and r.finish_s is not None)
    return DecodePauses(paused_request_s, span) if paused_request_s > 0 and span > 0 else None
