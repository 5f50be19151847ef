"""A burst's read at its running batch's peak (``ledgers.burst_read``) and the load check that uses it
(``capacity_basis``), on hand-built runs of three or four requests all at t = 0."""

from __future__ import annotations

import math

import pytest

from kvledger.ledgers.burst_read import all_at_once, read_burst
from kvledger.ledgers.capacity_basis import SENT_AT_ONCE, check_load, measured_basis
from kvledger.ledgers.goodput import goodput
from kvledger.ledgers.slo import parse_slo
from kvledger.records import RequestRecord, RunMetadata, RunRecords

SLO = parse_slo("ttft=2s")


def _burst(first_token_s: list[float], finish_s: list[float], rate: float = math.inf) -> RunRecords:
    recs = [RequestRecord(str(i), 0.0, 500, 100, t, f) for i, (t, f) in enumerate(zip(first_token_s, finish_s))]
    return RunRecords(recs, RunMetadata("hand", "test", request_rate=rate))


def test_a_request_after_the_running_peak_is_saturated():
    # first tokens 0.1, 0.2, 0.5 s, finishes 0.4, 0.6, 0.9 s: the running batch (first token out, not finished) is 1 at
    # 0.1 s, 2 at 0.2 s, and at 0.5 s 3 − 1 finished (0.4 s) = 2: its largest, 2, first at 0.2 s; request 2's first
    # token (0.5 s) came after it, once a finish had made room: 1 of 3
    b = read_burst(_burst([0.1, 0.2, 0.5], [0.4, 0.6, 0.9]))
    assert (b.case, b.num_requests, b.waiting_after_peak, b.peak_running) == ("saturated", 3, 1, 2)
    assert b.peak_s == pytest.approx(0.2)
    assert b.facts() == ("1 of 3 requests got their first token only after the running batch (first token out, not "
                         "finished) had reached its largest, 2 requests (0.20 s after the burst)")


def test_every_first_token_growing_the_batch_is_one_batch():
    # first tokens 0.1, 0.2, 0.3 s, all before the first finish at 0.4 s: the batch grows 1, 2, 3, its peak at the last
    run = _burst([0.1, 0.2, 0.3], [0.4, 0.6, 0.9])
    b = read_burst(run)
    assert (b.case, b.waiting_after_peak, b.peak_running) == ("one_batch", 0, 3)
    assert b.to_dict()["case"] == "one_batch" and all_at_once(run)
    assert "a batch of 3 requests' drain" in b.no_band_reason()


def test_a_short_output_finishing_while_the_batch_still_admits_is_still_one_batch():
    # mixed output lengths: request 0 (a short output) finishes at 0.25 s, while requests 2 and 3 are still waiting
    # for their first token (0.3, 0.4 s) — the read at the first finish called this saturated (2 of 4 waiting). The
    # batch still grew: 1 (0.1 s), 2 (0.2 s), 3 − 1 = 2 (0.3 s), 4 − 1 = 3 (0.4 s): its largest, 3, at the last
    # first token, so no request waited for a finish: one batch, request 0 finished in passing
    b = read_burst(_burst([0.1, 0.2, 0.3, 0.4], [0.25, 0.9, 1.0, 1.1]))
    assert (b.case, b.num_requests, b.waiting_after_peak, b.peak_running) == ("one_batch", 4, 0, 3)
    assert b.peak_s == pytest.approx(0.4)
    assert b.facts() == ("the running batch (first token out, not finished) was largest at the last first token, 3 "
                         "requests of the 4, 1 having finished in passing (0.40 s after the burst)")


def test_mixed_outputs_held_at_a_seat_limit_stay_saturated():
    # two seats (max_num_seqs 2): requests 0 and 1 start at 0.1 s; request 2 gets in after request 0's finish
    # (0.25 s), its first token at 0.3 s, request 3 after request 1's (0.45 s), at 0.5 s. The batch: 2 (0.1 s),
    # 3 − 1 = 2 (0.3 s), 4 − 2 = 2 (0.5 s): its largest, 2, first at 0.1 s; requests 2 and 3 came after it
    b = read_burst(_burst([0.1, 0.1, 0.3, 0.5], [0.25, 0.45, 0.9, 1.0]))
    assert (b.case, b.waiting_after_peak, b.peak_running) == ("saturated", 2, 2)
    assert b.peak_s == pytest.approx(0.1)


def test_a_spread_of_arrivals_is_not_at_once_and_nothing_finished_reads_nothing():
    spread = RunRecords([RequestRecord("0", 0.0, 500, 100, 0.1, 0.4), RequestRecord("1", 1.0, 500, 100, 1.1, 1.4)],
                        RunMetadata("hand", "test"))
    assert not all_at_once(spread)
    failed = RunRecords([RequestRecord("0", 0.0, 500, 0, None, None, error="rejected")], RunMetadata("hand", "test"))
    assert read_burst(failed) is None


def test_the_load_check_tells_a_saturating_burst_from_one_batch():
    # goodput 3 ÷ 0.9 s = 3.33 req/s, every TTFT ≤ 0.5 s within 2 s: the rules would say nothing; the burst read does
    sat = _burst([0.1, 0.2, 0.5], [0.4, 0.6, 0.9])
    load = check_load(sat, goodput(sat, SLO), SLO)
    assert load.status == "not_flagged"
    assert load.reason == (f"{SENT_AT_ONCE} and 1 of 3 requests got their first token only after the running batch "
                           "(first token out, not finished) had reached its largest, 2 requests (0.20 s after the "
                           "burst): a saturating load")
    batch = _burst([0.1, 0.2, 0.3], [0.4, 0.6, 0.9])
    load = check_load(batch, goodput(batch, SLO), SLO)
    assert load.status == "cannot_tell" and "one batch of 3 requests draining" in load.reason
    basis = measured_basis(goodput(batch, SLO), load, simulated=True, run=batch)
    assert basis.text.startswith("capacity basis: the simulated burst (every request at t = 0)")
    assert basis.warning.startswith("the run is ONE BATCH")
