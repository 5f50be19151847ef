"""Counts over the public SGLang and TensorRT-LLM start-up replays (``sglang_startups.py``, ``trtllm_startups.py``):
per bucket of version, GPU or TP degree, how many planned KV memories lie within 2 % of the printed figure, how many
printed figures lie inside the plan's printed range, and how many checks made from the printed memory are exact."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from kvledger.analyses.doctor.public_startups import PublicReplay

__all__ = ["BUCKETS", "BucketCount", "bucket_counts"]

WITHIN = 0.02
"""The accuracy target on the KV memory (issue 20): |planned − printed| ≤ 2 % of the printed figure."""


@dataclass(frozen=True)
class BucketCount:
    """One bucket's counts. startups: replays in it. within / available: KV memories within 2 % / planned from the
    config at all. inside / ranged: printed figures inside the plan's range / terms with a range. exact /
    from_printed: checks from the printed memory that hold / made. mean_abs_error: the mean |relative error| of the
    KV memories planned from the config (None without one)."""

    key: str
    startups: int
    within: int
    available: int
    inside: int
    ranged: int
    exact: int
    from_printed: int
    mean_abs_error: float | None = None


BUCKETS: dict[str, Callable[[PublicReplay], str]] = {
    "engine": lambda x: x.version.split()[0],
    "version": lambda x: x.version,
    "GPU": lambda x: x.gpu,
    "TP": lambda x: x.topology.split()[0],
}
"""The bucket keys: engine, version as the replay labels it, GPU name, TP degree (``TP4`` from ``TP4 PP1 ...``)."""


def bucket_counts(replays: Sequence[PublicReplay], by: str) -> list[BucketCount]:
    """The counts of every bucket of ``by`` (a key of ``BUCKETS``), in sorted key order."""
    key = BUCKETS[by]
    out = []
    for k in sorted({key(x) for x in replays}):
        xs = [x for x in replays if key(x) == k]
        av = [t for x in xs for t in x.terms if t.term == "available KV"]
        ranged = [t for x in xs for t in x.terms if t.low is not None and t.high is not None and t.low != t.high]
        fp = [t for x in xs for t in x.from_printed]
        out.append(BucketCount(k, len(xs), sum(abs(t.rel_error) <= WITHIN for t in av), len(av),
                               sum(bool(t.inside) for t in ranged), len(ranged), sum(bool(t.inside) for t in fp),
                               len(fp), sum(abs(t.rel_error) for t in av) / len(av) if av else None))
    return out
