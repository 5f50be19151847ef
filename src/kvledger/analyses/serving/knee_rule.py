"""Whether a run sat at or past its knee: its waits for a first token grew through the run, though its queue may not
have grown enough for the saturation tests (``kvledger.analyses.serving.queue_growth``). ``validate`` reads it on both
sides of a compared run (``kvledger.calibration.knee_growth``), ``simulate`` on its own run (``prediction_bands``).

The rule (``KNEE_GROWTH``): the arrivals, in order, are cut into four quarters, and the mean TTFT of each quarter is
read; the run is at or past its knee when a later quarter's mean is at least twice the first quarter's. TTFT stands
for the wait: it is the time in the engine's waiting queue plus the request's own prefill.

Why twice, from queueing: a run starts with an empty queue, so its first quarter is its least-queued stretch. Under
a load the engine sustains, the queue settles long before a quarter of a run of thousands of requests is over, and
every quarter's mean TTFT is about the same (ratio ≈ 1; the empty start only lowers the first). At the knee
(utilisation ρ = 1) the queue of a run started empty grows as √t, so the last quarter's mean wait is
(1 − 0.75^1.5) / 0.25^1.5 = 2.8 × the first's; past it the queue grows linearly and the ratio is 7 (7/8 ÷ 1/8).
Just below the knee the queue's excursions last about 1/(1 − √ρ)² service times, a good part of the run, and a
quarter caught in one waits several times longer than the first. Twice lies between the settled 1 and the knee's
2.8, and it means a later quarter spent at least as long queued as the first quarter spent in all (its prefill
included): queueing, not the step cost, makes up at least half of that quarter's TTFT. The saturation tests stay as
they are: they size capacity searches, and a run just past its knee (its backlog under 5 % of its requests, its
engine serving nearly all of the rate) passes them.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from kvledger.ledgers.columns import columns_from

__all__ = ["KNEE_GROWTH", "MIN_PER_QUARTER", "KNEE_RULE", "QUARTER_NAMES", "quarter_growth"]

#: a later quarter of the arrivals' mean TTFT ÷ the first quarter's, at least (module docstring)
KNEE_GROWTH = 2.0
#: a later quarter of the arrivals by its number (``quarter_growth``'s ``peak_quarter``), in words
QUARTER_NAMES = {2: "second", 3: "third", 4: "fourth"}
#: requests per quarter below which the quarters are not read (as ``saturation.waits_grew``)
MIN_PER_QUARTER = 5

KNEE_RULE = (f"the mean TTFT of a later quarter of the arrivals ≥ {KNEE_GROWTH:g} × the first quarter's "
             "(kvledger.analyses.serving.knee_rule)")


def quarter_growth(run: Any) -> dict[str, Any] | None:
    """The mean TTFT (s) of each quarter of ``run``'s arrivals (requests with a first token, in arrival order, cut as
    evenly as they divide), the first quarter's, the largest later one's (``peak_s``, its quarter 2–4), their ratio
    and whether it reached ``KNEE_GROWTH`` (``grew``). None when a quarter would hold fewer than ``MIN_PER_QUARTER``
    requests or the first quarter's mean is not positive."""
    cols = columns_from(run)
    order = np.argsort(cols.arrival_s, kind="stable")
    ttft = cols.ttft_s()[order]
    ttft = ttft[np.isfinite(ttft)]
    if ttft.size < 4 * MIN_PER_QUARTER:
        return None
    means = [float(q.mean()) for q in np.array_split(ttft, 4)]
    first = means[0]
    if not first > 0:
        return None
    peak_q = 1 + int(np.argmax(means[1:]))
    peak = means[peak_q]
    return {"quarter_ttft_mean_s": means, "first_s": first, "peak_s": peak, "peak_quarter": peak_q + 1,
            "ratio": peak / first, "grew": peak >= KNEE_GROWTH * first}
