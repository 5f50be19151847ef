"""Whether an SLO-capacity probe was long enough to show the load it was run at (Little's law).

Under a load the engine sustains, the requests in the system (arrived, not finished) settle at rate × E2E. A finite
open-loop run of N requests reaches that level only after about one E2E, so its latencies are of that level only when
its arrivals span well past one E2E; when they span less than two, more than half its requests are still in the system
at its last arrival, and what the run measured is a backlog still building: a running batch smaller than the steady
one, a waiting queue shorter. Its attainment is then optimistic whatever the queue did, and a capacity search that
counts it as meeting the target finds a rate the run could not show. A probe whose backlog at its last arrival is more
than ``TOO_SHORT_SHARE`` of its requests therefore counts as missing the target, as one whose queue grew does
(``queue_growth.probe_queue_grew``), and the note asks for ``TOO_SHORT_HINT`` × that backlog requests per probe. The
share is a threshold of this check, not fitted: the point past which the arrivals spanned less than two of the
requests' own times in the system. Measured (uncalibrated roofline, one H100, TTFT ≤ 500 ms and TPOT ≤ 50 ms at 90%,
the first N requests of azure-conv; capacity at N = 200 before → with this check, against longer probes):

- Qwen3-30B-A3B: 28 → 9 req/s (400 and 1,000 requests per probe: 11 and 10.9); at 28 req/s, 154 of the 200 were in the
  system at the last arrival;
- Llama-3.1-8B: 25.75 → 14.5 req/s (600: 21.75; 2,000: 18.5). The first 200 arrivals come 2.28× faster in their second
  half, which inflates the backlog at the last arrival: the check errs low here.

Counting the span against twice the median E2E instead (tried) errs high: 17.25 and 25.25 req/s. The capacity of a
probe this short is uncertain either way; the check keeps it from overshooting, and says how many requests to use.
Only open loops are read (a closed loop's backlog is its concurrency), and not a probe the early-stop rule ended (it
misses anyway, and its unfinished requests are no backlog)."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from kvledger.ledgers.columns import columns_from
from kvledger.records import RunRecords

__all__ = ["TOO_SHORT_SHARE", "TOO_SHORT_HINT", "probe_too_short", "too_short_note", "short_notes",
           "PROBE_LENGTH_CHECK"]

TOO_SHORT_SHARE = 0.5  # requests in the system at the last arrival ÷ requests in the probe, more than (module doc)
TOO_SHORT_HINT = 4  # requests per probe suggested ÷ the backlog at the last arrival (twice the least, rounded up)
MIN_REQUESTS = 20  # fewer requests than this: not read (as queue_growth)

PROBE_LENGTH_CHECK = "kvledger.analyses.serving.probe_length.probe_too_short"
"""This check, as an SLO-capacity search's note names it."""


def probe_too_short(run: RunRecords, mode: str, client_latency_s: float = 0.0) -> tuple[int, int] | None:
    """(requests in the system at the last arrival, requests in the probe) when the former is more than
    ``TOO_SHORT_SHARE`` of the latter (module doc); None when the probe was long enough, or was not read (a closed
    loop, a probe stopped early, fewer than ``MIN_REQUESTS`` requests). A request that never finished counts as in
    the system. ``client_latency_s``: the --client-latency d the records' arrivals were moved earlier by (each TTFT and
    E2E the client's): the engine's last arrival, where the backlog is counted, is the last record's + d, so the check
    judges the engine alike with or without one."""
    if run.metadata.extra.get("stopped_early") is not None or not mode.startswith("open loop"):
        return None
    cols = columns_from(run)
    n = int(cols.arrival_s.size)
    if n < MIN_REQUESTS:
        return None
    finish = np.where(np.isfinite(cols.finish_s), cols.finish_s, np.inf)
    t_last = float(cols.arrival_s.max()) + client_latency_s
    backlog = n - int(np.count_nonzero(finish <= t_last))  # every request has arrived by t_last
    return (backlog, n) if backlog > TOO_SHORT_SHARE * n else None


def too_short_note(short: dict[float, tuple[int, int]], axis: str) -> list[str]:
    """The note for the probes that met the attainment target but were too short to show it (``short``: value →
    (backlog at the last arrival, requests), the passing ones only); [] when there are none."""
    if not short:
        return []
    values = sorted(short)
    backlog, n = short[values[-1]]
    hint = int(math.ceil(TOO_SHORT_HINT * max(b for b, _ in short.values()) / 100.0)) * 100
    one = len(values) == 1
    return [f"too short to tell: {', '.join(f'{v:g}' for v in values)} ({axis}) met the attainment target, but more "
            f"than half of {'its' if one else 'each'} probe's requests were still in the system at its last arrival "
            f"({backlog:,} of {n:,} at {values[-1]:g}; {PROBE_LENGTH_CHECK}): its arrivals spanned less than two of "
            "its requests' times in the system, so it measured a backlog still building, not the load's steady "
            f"state, and count{'s' if one else ''} as missing the target — the capacity found is of what these probes "
            f"could show; more requests per probe (--num-requests; at least {hint:,} here) read the load itself"]


def short_notes(goodputs: dict[float, Any], short: dict[float, tuple[int, int] | None], target: float,
                axis: str) -> list[str]:
    """``too_short_note`` for the probes (``goodputs``: value → its GoodputResult; ``short``: value →
    ``probe_too_short``) whose attainment met ``target`` but were too short to show it."""
    return too_short_note({v: s for v, g in goodputs.items() if (s := short.get(v)) is not None
                           and g.attainment >= target}, axis)
