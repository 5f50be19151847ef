"""A workload held as columns (numpy arrays), for traces of a million requests: each ``RequestSpec`` is built only when
delivered.

A ``list[RequestSpec]`` costs about 200 bytes per request; these columns cost 24 (arrival time,
prompt and output tokens) plus the id rule. ``WorkloadColumns`` is a read-only sequence of
``RequestSpec`` (indexing builds one, with the same values a list would hold), so the simulator
and any caller that iterates a workload take it unchanged. Requests carry no prefix segments and
no client ids (traces that have them stay lists).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from functools import partial

import numpy as np

from kvledger.dynamics.engine.request import ARRIVAL_RULE, MAX_ARRIVAL_S, RequestSpec, plain_spec
from kvledger.dynamics.fast import native
from kvledger.errors import InputError

# plain_spec's RequestSpec built by the compiled core (stretch_core.new_spec, a third of the time) when it is loaded
new_spec = partial(native.core.new_spec, RequestSpec) if native.core is not None else plain_spec

__all__ = ["WorkloadColumns"]

CHUNK_ROWS = 4096  # rows converted to Python values at a time when specs are built one by one


class WorkloadColumns(Sequence):
    """Requests as columns, all shape ``(n,)``.

    Args:
        arrival_s: arrival times, s, float64.
        num_prompt_tokens, num_output_tokens: tokens, int64.
        id_prefix, id_rows: request i's id is ``f"{id_prefix}{id_rows[i]}"`` (``id_rows`` None: ``i``), as
            ``load_trace`` names a file row (``"azure-conv-17"``).

    Raises:
        InputError: columns of different lengths or not one-dimensional.
    """

    __slots__ = ("arrival_s", "num_prompt_tokens", "num_output_tokens", "id_prefix", "id_rows", "_last", "_chunk")

    def __init__(self, arrival_s, num_prompt_tokens, num_output_tokens, id_prefix: str = "",
                 id_rows: np.ndarray | None = None) -> None:
        self.arrival_s = np.ascontiguousarray(arrival_s, dtype=np.float64)
        self.num_prompt_tokens = np.asarray(num_prompt_tokens)
        self.num_output_tokens = np.asarray(num_output_tokens)
        self.id_prefix = id_prefix
        self.id_rows = None if id_rows is None else np.asarray(id_rows, dtype=np.int64)
        n = self.arrival_s.shape
        if len(n) != 1 or self.num_prompt_tokens.shape != n or self.num_output_tokens.shape != n or (
                self.id_rows is not None and self.id_rows.shape != n):
            raise InputError("a columnar workload needs one-dimensional columns of one length (arrival_s "
                             f"{self.arrival_s.shape}, prompts {self.num_prompt_tokens.shape}, outputs "
                             f"{self.num_output_tokens.shape})")
        self._last: tuple[int, RequestSpec] | None = None  # the spec built last (the simulator asks for it repeatedly)
        # rows [start, start + CHUNK_ROWS) as Python lists (one tolist() per column beats a numpy scalar per field):
        self._chunk: tuple | None = None

    def __len__(self) -> int:
        return int(self.arrival_s.size)

    def request_id(self, i: int) -> str:
        return f"{self.id_prefix}{i if self.id_rows is None else int(self.id_rows[i])}"

    def __getitem__(self, i):  # type: ignore[override]
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        last = self._last
        if last is not None and last[0] == i:
            return last[1]
        n = len(self)
        if not -n <= i < n:
            raise IndexError(i)
        k = i % n
        c = self._chunk
        if c is None or not c[0] <= k < c[0] + CHUNK_ROWS:
            c = self._chunk = self._rows(k)
        j = k - c[0]
        spec = new_spec(f"{self.id_prefix}{c[4][j]}", c[1][j], c[2][j], c[3][j])
        self._last = (i, spec)
        return spec

    def spec_at(self, k: int) -> RequestSpec:
        """``self[k]`` for ``0 ≤ k < len(self)``, without the checks (the simulator's admission loop)."""
        c = self._chunk
        if c is None or not c[0] <= k < c[0] + CHUNK_ROWS:
            c = self._chunk = self._rows(k)
        j = k - c[0]
        return new_spec(f"{self.id_prefix}{c[4][j]}", c[1][j], c[2][j], c[3][j])

    def _rows(self, start: int) -> tuple:
        """(start, arrival times, prompt tokens, output tokens, row numbers) of rows ``[start, start + CHUNK_ROWS)``,
        Python lists (the values ``float``/``int`` of each numpy element give)."""
        end = start + CHUNK_ROWS
        rows = range(start, min(end, len(self))) if self.id_rows is None else self.id_rows[start: end].tolist()
        return (start, self.arrival_s[start: end].tolist(), self.num_prompt_tokens[start: end].tolist(),
                self.num_output_tokens[start: end].tolist(), rows)

    def __iter__(self) -> Iterator[RequestSpec]:
        return (self[k] for k in range(len(self)))

    def check(self) -> None:
        """Every request as the simulator's per-spec check has it (cluster.py ``_check``), vectorised.

        Raises:
            InputError: the first bad request, named by its id.
        """
        for name, col in (("num_prompt_tokens", self.num_prompt_tokens), ("num_output_tokens", self.num_output_tokens)):
            if not np.issubdtype(col.dtype, np.integer):
                raise InputError(f"a columnar workload's {name} must be integers, got dtype {col.dtype}")
            bad = col < 1
            if bad.any():
                i = int(np.argmax(bad))
                raise InputError(f"request {self.request_id(i)!r}: {name} must be an integer ≥ 1, got {int(col[i])!r}")
        bad = ~((self.arrival_s >= 0.0) & (self.arrival_s <= MAX_ARRIVAL_S))  # NaN fails both
        if bad.any():
            i = int(np.argmax(bad))
            raise InputError(f"request {self.request_id(i)!r}: {ARRIVAL_RULE}, got {float(self.arrival_s[i])!r}")

    def sorted_by_arrival(self) -> WorkloadColumns:
        """The same requests in arrival order, ties in workload order (self when already sorted)."""
        if self.arrival_s.size < 2 or not (np.diff(self.arrival_s) < 0).any():
            return self
        order = np.argsort(self.arrival_s, kind="stable")
        rows = order if self.id_rows is None else self.id_rows[order]
        return WorkloadColumns(self.arrival_s[order], self.num_prompt_tokens[order], self.num_output_tokens[order],
                               self.id_prefix, rows)

    @classmethod
    def from_specs(cls, specs: Sequence[RequestSpec]) -> WorkloadColumns:
        """Columns of plain specs (no prefix segments, no client ids) whose ids are ``f"{prefix}{row}"``.

        Raises:
            InputError: a spec with prefix segments or a client id, or ids that do not follow one prefix.
        """
        if any(s.prefix_segments or s.client_id is not None for s in specs):
            raise InputError("a columnar workload holds no prefix segments or client ids; keep this one a list")
        ids = [s.request_id for s in specs]
        prefix = ids[0].rstrip("0123456789") if ids else ""
        rows = [i[len(prefix):] for i in ids]
        if not all(i.startswith(prefix) and r.isdigit() and str(int(r)) == r for i, r in zip(ids, rows)):
            raise InputError("a columnar workload's ids are a prefix and a row number; these ids are not")
        return cls(np.fromiter((s.arrival_s for s in specs), np.float64, len(specs)),
                   np.fromiter((s.num_prompt_tokens for s in specs), np.int64, len(specs)),
                   np.fromiter((s.num_output_tokens for s in specs), np.int64, len(specs)), prefix,
                   np.asarray([int(r) for r in rows], dtype=np.int64))
