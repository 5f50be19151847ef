"""A log that prints no vLLM version but prints its weights: which release's loading rules reproduce them.

The weights a vLLM start-up loads depend on the release where the loader's layout changed: MXFP4 MoE experts repacked
for Marlin on Hopper up to 0.10.1.x (torch 2.7.1 pinned: ``mxfp4.py::_should_use_marlin``, read in 0.10.1) and in the
Triton layout from 0.10.2 (``kvledger.catalog.mxfp4_layout``), padded MoE tensors, tied embeddings. When the ledger's
weights at the rules it applied miss the log's printed figure, the same model is planned under each release the
ledger has rules for (``RELEASES``) and those within ``MATCH`` of the log are named: evidence of the release the log
came from, said as a note, never applied (``--engine-version`` chooses). A gpt-oss-120b start-up on one H100 with no
version printed (vLLM issue 23278): the log's 65.97 GiB; 0.11.0's rules 60.82 GiB (Triton layout, no padding),
0.10.1's 65.95 GiB (Marlin: hidden 2,880 → 3,072, intermediate 2,880 → 2,944).
"""

from __future__ import annotations

from typing import Any

from kvledger.accounting.vllm_rules import LATEST
from kvledger.units import GiB

__all__ = ["RELEASES", "MATCH", "weights_release_note"]

#: the releases planned (each a release whose loading or memory rules kvledger read: docs/engine-model.md)
RELEASES = ("0.6.6", "0.8.5", "0.10.1", "0.11.0", "0.19.0", "0.28.0", LATEST)
#: within this share of the log's weights a release's rules reproduce them (the loader's own rounding and the
#: log's two decimals of GiB are well under it; the layouts that differ here differ by ≥ 5%)
MATCH = 0.005
#: the ledger's weights must miss the log's by more than this before other releases are tried
MISS = 0.01


def _weights(plan: Any) -> float | None:
    return next((d.bytes for d in plan.memory.deductions if d.name == "weights"), None)


def weights_release_note(log: Any, used: Any, plan_at: Any) -> str | None:
    """A note naming the releases whose rules give the log's printed weights, when the log prints no version and the
    plan ``used`` misses them by more than ``MISS``; ``plan_at(version)`` plans the same model and settings under
    that release (a Plan, or an error message). None otherwise."""
    logged = log.startup.weights_bytes
    if log.version is not None or logged is None or used is None or isinstance(used, str):
        return None
    mine = _weights(used)
    if mine is None or abs(mine - logged) <= MISS * logged:
        return None
    hits: dict[str, float] = {}
    for v in RELEASES:
        p = plan_at(v)
        w = None if isinstance(p, str) else _weights(p)
        if w is not None and abs(w - logged) <= MATCH * logged:
            hits[v] = w
    line = log.startup.lines.get("weights_bytes")
    said = (f"the log prints no vLLM version; its weights, {logged / GiB:.2f} GiB (line {line}), are not what "
            f"{used.memory.engine_version}'s rules give ({mine / GiB:.2f} GiB)")
    if not hits:
        return said + f": no release kvledger has rules for ({', '.join(RELEASES)}) gives them within {MATCH:.1%}"
    figures = " / ".join(dict.fromkeys(f"{w / GiB:.2f}" for w in hits.values()))
    return (said + f" but what the rules of {_releases(list(hits))} give ({figures} GiB): the log likely comes from "
            "such a release (no earlier than the first that serves this model); pass --engine-version to plan under "
            "its rules")


def _releases(hits: list[str]) -> str:
    """The releases that matched, in words: a run of ``RELEASES`` from its first is "0.10.1 or earlier", one to its
    last "0.28.0 or later", any other set listed."""
    i, j = RELEASES.index(hits[0]), RELEASES.index(hits[-1])
    if hits == list(RELEASES[i:j + 1]) and len(hits) > 1:
        if i == 0:
            return f"{hits[-1]} or earlier releases"
        if j == len(RELEASES) - 1:
            return f"{hits[0]} or later releases"
    return ", ".join(hits)
