"""What to do with a vLLM release older than the rules kvledger read (0.5 onwards): the refusal of
``--engine-version`` names the flags that replay it as a run record naming it is replayed
(``calibration/old_release.py``): the oldest rules read, 0.5.0's, and every step eager before 0.2.4, which had no CUDA
graphs."""

from __future__ import annotations

__all__ = ["OLDEST_RULES", "GRAPHS_FROM", "predates_message"]

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
