"""A replica's token times kept compactly: one end time per engine step in a sliding buffer, per request the runs of
steps it emitted in, turned into records as requests finish.

Mixed into ``Replica`` (replica.py), whose ``__init__`` sets the buffer (``_t``, ``_base``,
``num_steps``), the gap counts (``gaps``, ``_cnt``, ``_gap_runs``, ``_prev_t``) and ``sink``. Without
token times (``record_token_times=False``) a finished request keeps its first-token and finish
times, and its inter-token gaps are counted per step in ``_cnt`` and folded into the exact ITL
histogram (itl_gaps.py) as the buffer slides, so memory follows the active requests.
"""

from __future__ import annotations

import numpy as np

from kvledger.dynamics.engine.request_state import FINISHED, SimRequest
from kvledger.records import RequestRecord

__all__ = ["TokenTimes"]

_NAN = float("nan")


class TokenTimes:
    """Step end times and finished requests' records of one replica (see the module doc)."""

    def push_times(self, t) -> None:
        """Append step end times (a float or an array), s."""
        if t.__class__ is float:
            i = self.num_steps - self._base
            if i >= len(self._t):
                self._compact(1)
                i = self.num_steps - self._base
            self._t[i] = t
            self.num_steps += 1
            return
        m = len(t)
        i = self.num_steps - self._base
        if i + m > len(self._t):
            self._compact(m)
            i = self.num_steps - self._base
        self._t[i: i + m] = t
        self.num_steps += m

    def _compact(self, m: int) -> None:
        """Drop step times no active request still needs; grow the buffer if that is not enough."""
        active = list(self.sched.running) + list(self.sched.waiting)
        starts = [r.runs[0][0] if r.runs else r.run_start for r in active if r.runs or r.run_start >= 0]
        keep_from = min(starts, default=self.num_steps)
        drop = keep_from - self._base
        live = self.num_steps - keep_from
        size = len(self._t)
        if live + m > size // 2:
            size = max(2 * size, 2 * (live + m))
        if self._cnt is not None:
            self._count_pending_gaps()
            self.fold_gaps(drop)
        buf = np.empty(size, dtype=np.float64)
        buf[:live] = self._t[drop: drop + live]
        if self._cnt is not None:
            cnt = np.zeros(size, dtype=np.int32)
            cnt[:live] = self._cnt[drop: drop + live]
            self._cnt = cnt
        self._t, self._base = buf, keep_from

    def fold_gaps(self, upto: int | None = None) -> None:
        """Move the gaps of buffered steps ``[0, upto)`` (default: all) into ``gaps``; only finished requests count
        there."""
        self._count_pending_gaps()
        upto = self.num_steps - self._base if upto is None else upto
        if upto <= 0:
            return
        t = self._t[:upto]
        gaps = np.empty(upto, dtype=np.float64)
        gaps[0] = t[0] - self._prev_t
        np.subtract(t[1:], t[:-1], out=gaps[1:])
        self.gaps.add_steps(gaps, self._cnt[:upto])
        self._cnt[:upto] = 0
        self._prev_t = float(t[-1])

    def _count_pending_gaps(self) -> None:
        """Add the queued gap runs ``[first, end)`` (global steps, all within the buffer) to ``_cnt``."""
        runs = self._gap_runs
        if not runs:
            return
        r = np.array(runs, dtype=np.int64).reshape(-1, 2) - self._base
        size = len(self._cnt)
        change = np.bincount(r[:, 0], minlength=size + 1) - np.bincount(r[:, 1], minlength=size + 1)
        self._cnt += change[:size].cumsum().astype(np.int32)
        self._gap_runs = []

    def _close_run(self, req: SimRequest, step: int) -> None:
        if req.run_start >= 0:
            req.runs.append((req.run_start, step))
            req.run_start = -1

    def finish(self, finished: list[tuple[SimRequest, int]], freed: bool = False) -> list[tuple[SimRequest,
        RequestRecord]]:
        """Records for requests that emitted their last token in the given step (and free their blocks unless
        ``freed``); marks them FINISHED (callers drop them from the running list). With a ``sink`` the records go
        there and each pair's record is None."""
        # fewer: numpy's calls cost more
        if freed and self.sink is not None and self._cnt is not None and len(finished) >= 16:
            return self._finish_to_sink(finished)
        return self._finish_each(finished, freed)

    def _finish_each(self, finished: list[tuple[SimRequest, int]], freed: bool) -> list[tuple[SimRequest,
        RequestRecord]]:
        """``finish``, one request at a time."""
        base, out = self._base, []
        for req, step in finished:
            self._close_run(req, step + 1)
            req.status = FINISHED
            if not freed:
                self.kv.free(req, preempted=False)
            spec = req.spec
            if self._cnt is None:
                if len(req.runs) == 1:
                    a, b = req.runs[0]
                    times = self._t[a - base: b - base].copy()
                else:
                    times = np.concatenate([self._t[a - base: b - base] for a, b in req.runs])
                times.setflags(write=False)
                first, last = float(times[0]), float(times[-1])
            else:
                times, first, last = None, self._count_gaps(req.runs), float(self._t[req.runs[-1][1] - 1 - base])
                if self.sink is not None:
                    self.sink.put(req.uid, first, last, req.num_output_tokens, req.num_cached_tokens,
                                  req.num_preemptions)
                    out.append((req, None))
                    continue
            rec = RequestRecord(spec.request_id, spec.arrival_s, spec.num_prompt_tokens, req.num_output_tokens,
                                first_token_s=first, finish_s=last, chunk_times_s=times,
                                num_cached_tokens=req.num_cached_tokens, num_preemptions=req.num_preemptions)
            out.append((req, rec))
        return out

    def _finish_to_sink(self, finished: list[tuple[SimRequest, int]]) -> list[tuple[SimRequest, None]]:
        """``finish(finished, freed=True)`` with a ``sink`` and no token times: the requests whose tokens came in one
        run of steps (never preempted) are counted and written to the sink together (same gaps, same fields)."""
        one, rest = [], []
        for item in finished:
            r = item[0]
            if r.runs or r.run_start < 0:
                rest.append(item)
            else:
                one.append((r.run_start, item[1] + 1, r.uid, r.num_output_tokens,
                            r.num_cached_tokens if r.num_cached_tokens is not None else _NAN, r.num_preemptions))
                r.run_start = -1
                r.status = FINISHED
        if one:
            a, b, uid, n_out, cached, pre = zip(*one)
            a = np.array(a, dtype=np.int64)
            b = np.array(b, dtype=np.int64)
            t, base = self._t, self._base
            multi = b - a > 1  # a run [a, b) has a gap ending at each of steps a+1 … b−1 (see _count_gaps)
            if multi.any():
                self._gap_runs += np.stack((a[multi] + 1, b[multi]), axis=1).ravel().tolist()
            self.sink.put_many(np.array(uid, dtype=np.int64), t[a - base], t[b - 1 - base], n_out, cached, pre)
        if rest:
            self._finish_each(rest, True)
        return [(r, None) for r, _ in finished]

    def _count_gaps(self, runs: list[tuple[int, int]]) -> float:
        """Count a finished request's gaps (without keeping its token times); returns its first token time, s.

        A run of steps [a, b) has a gap ending at each of steps a+1 … b−1: the run is queued and
        counted in ``_cnt`` with the others by ``_count_pending_gaps`` (one vectorised pass)."""
        base, t = self._base, self._t
        prev = -1
        for a, b in runs:
            if b - a > 1:
                self._gap_runs += (a + 1, b)
            if prev >= 0:
                self.gaps.single.append(float(t[a - base] - t[prev - base]))
            prev = b - 1
        return float(t[runs[0][0] - base])

    @property
    def counts_gaps(self) -> bool:
        """Records go to a sink and token times are not kept: ``finish_counted`` applies."""
        return self.sink is not None and self._cnt is not None

    def finish_counted(self, reqs: list[SimRequest], steps: list[int], gap_runs: list[int],
                       single_pairs: list[int]) -> None:
        """``finish(…, freed=True)`` for requests whose runs the caller walked (``counts_gaps`` only): per request the
        steps of its first and last tokens (``steps``: [first, last, …]); ``gap_runs``: [a + 1, b, …] for each run
        [a, b) of two steps or more, as ``_count_gaps`` queues them; ``single_pairs``: [a, end of the run before − 1,
        …] for each run after the first (its gap across the break). Same gaps, same fields."""
        t, base = self._t, self._base
        self._gap_runs += gap_runs
        if single_pairs:
            sp = np.array(single_pairs, dtype=np.int64) - base
            self.gaps.single += (t[sp[0::2]] - t[sp[1::2]]).tolist()
        for r in reqs:
            r.status = FINISHED
            r.run_start = -1
        st = np.array(steps, dtype=np.int64) - base
        self.sink.put_many(np.array([r.uid for r in reqs], dtype=np.int64), t[st[0::2]], t[st[1::2]],
                           [r.num_output_tokens for r in reqs],
                           [r.num_cached_tokens if r.num_cached_tokens is not None else _NAN for r in reqs],
                           [r.num_preemptions for r in reqs])
