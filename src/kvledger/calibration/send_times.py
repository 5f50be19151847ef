"""Send times for a per-request benchmark file that keeps none: SGLang ``bench_serving --output-details`` (its arrays
have no ``start_times``) and vLLM files from before ``start_times`` was saved.

The reader puts every such request at t = 0 (``evidence._arrays``: each on its own clock), which is right for
goodput but not for a replay: replayed so, a run sent at 8 req/s becomes a burst of all its requests at once. The
clients send in file order (both gather their request tasks in the order they were sent), the first at once and each
next after a gap drawn from a gamma distribution of mean 1/rate and shape ``burstiness`` (1: Poisson; vLLM
``vllm/benchmarks/serve.py::get_request``, SGLang ``bench_serving.py::get_request``), under a semaphore of
``max_concurrency`` when one was given. So the replay draws the gaps the same way (seeded), and a capped client is a
closed loop of that many (paced at the rate where it is finite). A ``--ramp-up-strategy`` run (``extra["ramp_up"]``,
no fixed rate) draws the gap after request i at the ramp's rate for it, as vLLM's ``_get_current_request_rate`` sets
it: start + (end − start)·i/(n − 1) (linear) or start·(end/start)^(i/(n − 1)) (exponential). The measured records move
with their requests: each request's TTFT, TPOT and E2E are unchanged.
"""

from __future__ import annotations

import math
from dataclasses import replace

import numpy as np

from kvledger.evidence.metadata_keys import cap_source
from kvledger.records import RunRecords

__all__ = ["UNTIMED_FORMATS", "drawn_send_times"]

#: the readers whose per-request arrays may lack send times (all arrivals then 0)
UNTIMED_FORMATS = ("vllm-bench-serve", "sglang-bench-serving")


def _untimed(run: RunRecords) -> bool:
    return (run.metadata.source_format in UNTIMED_FORMATS and len(run.records) > 1
            and all(r.arrival_s == 0.0 for r in run.records))


def _gaps(n: int, rate: float | np.ndarray, burstiness: float, seed: int) -> np.ndarray:
    """``n`` send times: 0, then gamma gaps of mean 1/rate and shape ``burstiness`` (numpy's Generator, ``seed``);
    ``rate`` one req/s figure, or one per gap (a ramp)."""
    rng = np.random.default_rng(seed)
    gaps = rng.gamma(burstiness, 1.0 / (rate * burstiness), size=max(n - 1, 0))
    return np.concatenate(([0.0], np.cumsum(gaps)))


def _ramp_rates(ramp: dict, n: int) -> np.ndarray | None:
    """The rate of each of the ``n`` − 1 gaps under ``vllm bench serve --ramp-up-strategy`` (module docstring), req/s;
    None for a strategy vLLM does not have or a rate that is not finite and above 0."""
    lo, hi, how = ramp.get("start_rps"), ramp.get("end_rps"), ramp.get("strategy")
    if how not in ("linear", "exponential") or not all(isinstance(r, float) and math.isfinite(r) and r > 0
                                                       for r in (lo, hi)):
        return None
    progress = np.arange(max(n - 1, 0)) / max(n - 1, 1)
    return lo + (hi - lo) * progress if how == "linear" else lo * (hi / lo) ** progress


def drawn_send_times(run: RunRecords, seed: int = 0) -> tuple[RunRecords, int | None, bool, str | None]:
    """(the run with send times drawn as its client sent, the client's cap or None, paced, the note saying so).

    A run whose records carry send times is returned as it is, with no cap and no note (its arrivals are replayed as
    recorded). A run sent at request_rate inf without a cap was a burst at t = 0, which the records already are.
    """
    if not _untimed(run):
        return run, None, False, None
    md = run.metadata
    rate, cap = md.request_rate, md.concurrency
    finite = rate is not None and math.isfinite(rate) and rate > 0
    burst = md.extra.get("burstiness")
    shape = float(burst) if isinstance(burst, (int, float)) and not isinstance(burst, bool) and burst > 0 else 1.0
    ramp = md.extra.get("ramp_up")
    rates = _ramp_rates(ramp, len(run.records)) if isinstance(ramp, dict) else None
    finite = finite or rates is not None
    head = "send times: the file keeps none (no start_times), so "
    kind = "Poisson" if shape == 1.0 else f"gamma, burstiness {shape:g}"
    if finite:
        sends = _gaps(len(run.records), float(rate) if rates is None else rates, shape, seed)
        run = replace(run, records=[_moved(r, float(t)) for r, t in zip(run.records, sends)])
        load = (f"the file's request_rate {rate:g} req/s" if rates is None else
                f"the file's {ramp['strategy']} ramp from {ramp['start_rps']:g} to {ramp['end_rps']:g} req/s "
                "(--ramp-up-strategy)")
        note = f"{head}the replay sends its requests in file order at {load}, gaps drawn as the client drew them " \
               f"({kind}, seed {seed})"
    elif rate is not None:
        uncapped = "" if cap else " without a cap"
        note = f"{head}the replay sends every request at t = 0, as request_rate inf{uncapped} did"
    else:
        note = (f"{head}with no request_rate stated, the replay sends every request at t = 0, a burst the run may not "
                "have been")
    if cap:
        note += (f"; under {cap_source(md, int(cap))}: at most {cap:,} in flight, the next sent when one "
                 "finishes")
    return run, (int(cap) if cap else None), bool(cap) and finite, note


def _moved(r, t: float):
    """The record ``r`` (arrival 0) sent at ``t``: every time it holds moved by ``t``."""
    return replace(r, arrival_s=t, first_token_s=None if r.first_token_s is None else r.first_token_s + t,
                   finish_s=None if r.finish_s is None else r.finish_s + t,
                   chunk_times_s=None if r.chunk_times_s is None else r.chunk_times_s + t)
