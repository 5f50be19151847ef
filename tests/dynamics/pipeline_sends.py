"""A test double of ``PipelineSends`` shared by the pipeline-loop tests: the same send time at every stage boundary."""

from __future__ import annotations


class Sends:
    """A send of ``d`` s at every boundary (``PipelineSends``' two calls)."""

    def __init__(self, d: float) -> None:
        self.d = d

    def boundary_s(self, tokens: int, b: int) -> float:
        return self.d

    def seconds(self, tokens: int) -> float:
        return self.d
