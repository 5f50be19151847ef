"""What to do with a vLLM version outside the releases kvledger read: one far past the newest is refused as a typo;
for one older than the rules read (0.5 onwards), the refusal of
``--engine-version`` names the flags that replay it as a run record naming it is replayed
(``calibration/old_release.py``): the oldest rules read, 0.5.0's, and every step eager before 0.2.4, which had no CUDA
graphs."""

from __future__ import annotations

__all__ = ["OLDEST_RULES", "GRAPHS_FROM", "NEAR_FUTURE_MINORS", "beyond_near_future", "far_future_message",
           "predates_message"]

OLDEST_RULES = "0.5.0"
"""The oldest vLLM release whose rules were read (``vllm_rules.parse_version`` refuses any before it)."""
GRAPHS_FROM = (0, 2, 4)
"""The first vLLM release with CUDA graphs (vLLM PR #1926); every step of an older one is eager."""


def predates_message(v: str, ver: tuple[int, int, int]) -> str:
    """The refusal of ``--engine-version v`` (``ver`` < 0.5.0), with the flags to pass instead."""
    eager = ver < GRAPHS_FROM
    graphs = ".".join(map(str, GRAPHS_FROM))
    do = f"pass --engine-version {OLDEST_RULES}" + (
        f" --enforce-eager ({v} had no CUDA graphs: they came in {graphs})" if eager else "")
    return (f"vLLM {v} predates the rules this tool models (0.5 onwards): {do} to apply the oldest rules read, as a "
            f"run record naming {v} is replayed; {OLDEST_RULES}'s memory plan may size the KV pool otherwise than {v} "
            "did")


NEAR_FUTURE_MINORS = 1
"""How many minor releases past the newest read a version may be and still be planned (with the newest rules and a
note): vLLM ships a minor release about every month, so the next one may be out before its code is read here; a
version further ahead (0.35 when the newest read is 0.33, any 1.x, 9.9) is beyond any release, most likely a typo."""


def beyond_near_future(ver: tuple[int, int, int], latest: tuple[int, int, int]) -> bool:
    """Whether ``ver`` is past ``latest`` by more than ``NEAR_FUTURE_MINORS`` minor releases (or a major)."""
    return ver[:2] > (latest[0], latest[1] + NEAR_FUTURE_MINORS)


def far_future_message(v: str, latest: str) -> str:
    """The refusal of ``--engine-version v`` beyond the near future of ``latest``, naming the newest known."""
    major, minor = (int(x) for x in latest.split(".")[:2])
    return (f"--engine-version {v}: no such vLLM release is known; the newest known is {latest} (the newest whose code "
            f"was read), and a version up to {major}.{minor + NEAR_FUTURE_MINORS}.x is planned with its rules and a "
            f"note. A typo? Pass the version your server runs (`vllm --version`), or {latest}")
