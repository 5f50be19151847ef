"""A mixture of length distributions: ``mix:0.9*fixed:2K,0.1*fixed:100K`` — mostly short chat prompts with some long
RAG prompts (``synthetic.parse_lengths`` reads it). Each request draws its component with the weights' shares, then
its length from that component; draws in a fixed order, so the same seed gives the same lengths."""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = ["Mixture", "parse_mixture"]


@dataclass(frozen=True, slots=True)
class Mixture:
    """Component ``j`` with probability ``weights[j]`` (summing to 1), its length from ``parts[j]``."""

    weights: tuple[float, ...]
    parts: tuple[Any, ...]

    def sample(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Components first (one uniform draw a request), then each component's lengths in component order."""
        pick = np.searchsorted(np.cumsum(self.weights)[:-1], rng.random(n), side="right")
        out = np.empty(n, dtype=np.int64)
        for j, part in enumerate(self.parts):
            idx = np.flatnonzero(pick == j)
            if idx.size:
                out[idx] = part.sample(int(idx.size), rng)
        return out


def parse_mixture(text: str, parse_one: Callable[[str], Any]) -> Mixture:
    """``W*DIST,W*DIST,...`` (after ``mix:``): weights > 0, divided by their sum; each DIST any other form.

    Raises:
        ValueError: in words, a part that is not ``W*DIST`` or a weight that is not a positive number.
    """
    weights, parts = [], []
    for piece in text.split(","):
        w, star, dist = piece.partition("*")
        try:
            weight = float(w)
        except ValueError:
            weight = math.nan
        if not star or not dist or not (weight > 0 and math.isfinite(weight)):
            raise ValueError(f"mixture part {piece!r} is not WEIGHT*DIST with a weight > 0 (e.g. "
                             "mix:0.9*fixed:2K,0.1*fixed:100K)")
        if dist.startswith("mix:"):
            raise ValueError("a mixture's parts cannot be mixtures")
        weights.append(weight)
        parts.append(parse_one(dist))
    total = sum(weights)
    return Mixture(tuple(w / total for w in weights), tuple(parts))
