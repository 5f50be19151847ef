"""``search --client-latency``: the client's and front end's latency, read once for the whole search and added to every
candidate's TTFT and E2E (``kvledger.analyses.serving.client_latency``), so the TTFT and E2E SLOs are judged on the
client's figures; TPOT and ITL are untouched.

The latency belongs to the client and its front end, not to the GPU, so every candidate gets the same one: a duration
(``30ms``), or ``profile:NAME``, set-up NAME's fitted latency in the one GPU profile the search names with
``--gpu-profile FILE`` (or ``bundled:NAME``), read on that profile's own GPU. Each candidate's simulation then takes
it as that number of seconds (``latency_arg``): exactly the same float, whatever GPU the candidate is on.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from kvledger.analyses.serving.client_latency import FLAG, ClientLatency, client_latency_of
from kvledger.errors import InputError

__all__ = ["search_latency", "latency_arg", "latency_s"]


@lru_cache(maxsize=8)
def _resolve(text: str | None, gpu_profile: str | None) -> ClientLatency | None:
    if not text:
        return None
    if not str(text).startswith("profile:") or str(text).lower().endswith(".json"):
        return client_latency_of(text)  # a duration, or profile:FILE.json (that file's own fit.frontend_s)
    if gpu_profile in (None, "auto", "none"):
        raise InputError(f"search {FLAG} {text} reads a set-up's fitted latency from one GPU profile, and the "
                         "candidates' GPUs each have their own: name it with --gpu-profile FILE (from `kvledger "
                         "calibrate --scope gpu --fit-frontend`) or bundled:NAME, or give a duration such as 21ms")
    from kvledger.accounting.gpu_profile import load_gpu_profile

    return client_latency_of(text, gpu_profile, load_gpu_profile(gpu_profile).gpu)


def search_latency(spec: Any) -> ClientLatency | None:
    """The search's ``--client-latency`` (``SearchSpec.client_latency`` read with ``spec.gpu_profile``), None when
    absent or zero.

    Raises:
        InputError: what ``client_latency_of`` refuses; ``profile:NAME`` without a GPU profile named for the search.
    """
    return _resolve(spec.client_latency, spec.gpu_profile)


def latency_s(spec: Any) -> float:
    """The search's client latency, s (0 without one)."""
    got = search_latency(spec)
    return 0.0 if got is None else got.seconds


def latency_arg(spec: Any) -> str | None:
    """What each candidate's ``SimRequestArgs.client_latency`` takes: the seconds as ``repr`` + ``s`` (read back to
    the same float by ``kvledger.units.parse_duration_s``), or None."""
    got = search_latency(spec)
    return None if got is None else f"{got.seconds!r}s"
