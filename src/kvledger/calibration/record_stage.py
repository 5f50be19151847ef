"""A per-request run's place in a load sweep: the stage it stands for (``kvledger.calibration.sweep.Stage``) — its
request rate (or clients), what its client sent and what the engine served — read off its own records.

A sweep (``validate --sweep``, or one SGLang ``bench_serving`` JSONL file holding a line per rate) orders its stages by
load and reads its knee and saturation throughput across them. A per-request run is still replayed request by request
and compared on its own records (``compare.compare_timed``); this stage only places it on the sweep's axis and says
whether it was below saturation (``sweep_bands.below_saturation``), as an aggregate run's stage does, with the drain
allowance its records give (the first quarter's median E2E: ``ledgers.fell_behind.typical_e2e_s``).

- The level: the file's request rate where it is finite, else its client cap (``max_concurrency``: a closed loop of
  that many clients, ``client_users``); a run stating neither has no place in a sweep (None).
- The rate the client achieved: (n − 1) ÷ the span of its send times when the file recorded them; where the file keeps
  none and the replay drew them at the file's rate (``send_times.drawn_send_times``), the rate itself: the drawn
  schedule is the client's, not a measurement of it.
- The rate the engine served: finished requests ÷ the run's duration (the file's stated one, else first send to last
  finish: ``RunRecords.duration_s``), as ``compare_timed``'s throughput row.
"""

from __future__ import annotations

import math

from kvledger.calibration.replay import MeasuredRun
from kvledger.calibration.sweep import Stage
from kvledger.evidence.metadata_keys import cap_source
from kvledger.ledgers.fell_behind import typical_e2e_s

__all__ = ["record_stage"]


def record_stage(run: MeasuredRun) -> Stage | None:
    """The stage ``run`` (a per-request run: ``measured`` holds its records) stands for in a sweep (module docstring),
    or None when its file states neither a finite request rate nor a client cap."""
    meta = run.measured.metadata
    recs = run.measured.records
    rate = meta.request_rate
    finite = rate is not None and math.isfinite(rate) and rate > 0
    cap = run.concurrency or meta.concurrency
    if not recs or not (finite or cap):
        return None
    sends = sorted(r.arrival_s for r in recs)
    span = sends[-1] - sends[0]
    drawn = "client_loop" in meta.extra  # send times drawn at the file's rate, not recorded
    dur = run.measured.duration_s  # the file's stated duration, else first send to last finish: compare's own
    served = len(recs) / dur if dur and dur > 0 else 0.0
    users = int(cap) if cap else None  # under a cap, as an aggregate run's stage: the clients, and what they drew
    achieved = served if users else float(rate) if drawn or span <= 0 else (len(sends) - 1) / span
    out_tokens = sum(r.num_output_tokens for r in recs)
    prompts = sorted(r.num_prompt_tokens for r in recs)
    outputs = sorted(r.num_output_tokens for r in recs)
    backend = meta.extra.get("backend")
    return Stage(run.source, float(rate) if finite else math.inf, len(recs) + run.num_dropped,
                 span, {}, [(0.0, float(prompts[0])), (1.0, float(prompts[-1]))],
                 [(0.0, float(outputs[0])), (1.0, float(outputs[-1]))], served,
                 out_tokens / dur if dur and dur > 0 else 0.0, run.num_dropped,
                 achieved, backend if isinstance(backend, str) else None, client_users=users,
                 client_users_source=None if users is None else cap_source(meta, users),
                 typical_e2e_s=typical_e2e_s(recs) if finite else None)  # the fell-behind rule's drain
