"""stretch_times.decode_times: step end times of a stretch priced in chunks equal a step-by-step sum, whatever the
bound."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from kvledger.dynamics.fast.stretch_times import decode_times


def _rep(now_s: float = 0.0):
    # A step lasts 10 ms per running request (a stand-in price: only its dependence on the batch matters here).
    return SimpleNamespace(now_s=now_s, decode_step_hint_s=0.0,
                           prices=SimpleNamespace(decode_list=lambda n, kv_tokens, k: [0.01 * n] * k))


def _reference(rems: list[int], bound_s: float, now_s: float = 0.0) -> tuple[int, list[float]]:
    """Steps whose start is before the bound, one at a time: step j has every request with rems > j."""
    ends, j = [now_s], 0
    while j < max(rems) and ends[-1] < bound_s:
        ends.append(ends[-1] + 0.01 * sum(1 for m in rems if m > j))
        j += 1
    return j, ends


@pytest.mark.parametrize("bound_s", [0.05, 0.2, 0.25, 0.4, 1.5, float("inf")])
def test_pieces_priced_in_chunks_end_where_the_bound_falls(bound_s):
    # Three requests finishing after 2, 5 and 100 steps: 30 ms steps, then 20 ms, then 10 ms. With a bound of 0.2 s
    # the first two pieces end at 0.06 s and 0.12 s and the third runs 8 more 10 ms steps, starting the 13th step at
    # 0.19 s < 0.2 s: k = 13. A chunk priced from the last (20 ms) step's length must not run past its piece's end
    # with that piece's batch (it once did when the estimate fell under the 8-step minimum chunk).
    rems, comp = [2, 5, 100], [10, 20, 30]
    k, ends, durs, pieces = decode_times(_rep(), rems, comp, True, bound_s)
    k_ref, ends_ref = _reference(rems, bound_s)
    assert k == k_ref and ends[: k + 1] == ends_ref[: k + 1]
    if bound_s == 0.2:
        assert k == 13 and [p[:3] for p in pieces] == [(0, 2, 3), (2, 5, 2), (5, 13, 1)]


def test_a_chunk_stops_at_its_pieces_end_even_when_the_estimate_is_short():
    # Ten requests: eight finish after 2 steps (100 ms steps), one after 9 (20 ms steps with two running), one after
    # 100 (10 ms). From step 2 (0.2 s) the bound 0.5 s is 3 of the last 100 ms steps away: the chunk estimate is
    # 3 + 3 = 6 steps, under the 8-step minimum, while the piece has 7 steps left. The chunk must stop at the
    # piece's end (step 9): the 8th step belongs to the next piece, with one request running (10 ms).
    rems = [2] * 8 + [9, 100]
    k, ends, durs, pieces = decode_times(_rep(), rems, [10] * 10, True, 0.5)
    k_ref, ends_ref = _reference(rems, 0.5)
    assert k == k_ref and ends[: k + 1] == ends_ref[: k + 1] and durs[:k] == [0.1] * 2 + [0.02] * 7 + [0.01] * (k - 9)
