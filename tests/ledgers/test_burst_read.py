"""A burst's read at its first finish (``ledgers.burst_read``) and the load check that uses it (``capacity_basis``),
on hand-built runs of three requests all at t = 0."""

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


def test_one_waiting_at_the_first_finish_is_saturated():
    # first finish 0.4 s (request 0); request 2's first token at 0.5 s > 0.4 s: 1 of 3 still waited
    b = read_burst(_burst([0.1, 0.2, 0.5], [0.4, 0.6, 0.9]))
    assert (b.case, b.num_requests, b.waiting_at_first_finish) == ("saturated", 3, 1)
    assert b.first_finish_s == pytest.approx(0.4)
    assert b.facts() == ("1 of 3 requests still waited for a first token when the first finished (0.40 s after the "
                         "burst)")


def test_every_first_token_before_the_first_finish_is_one_batch():
    # first tokens 0.1, 0.2, 0.3 s, all before the first finish at 0.4 s: none waited
    run = _burst([0.1, 0.2, 0.3], [0.4, 0.6, 0.9])
    b = read_burst(run)
    assert (b.case, b.waiting_at_first_finish) == ("one_batch", 0)
    assert b.to_dict()["case"] == "one_batch" and all_at_once(run)
    assert "a batch of 3 requests' drain" in b.no_band_reason()


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
    assert load.reason == (f"{SENT_AT_ONCE} and 1 of 3 requests still waited for a first token when the first "
                           "finished (0.40 s after the burst): a saturating load")
    batch = _burst([0.1, 0.2, 0.3], [0.4, 0.6, 0.9])
    load = check_load(batch, goodput(batch, SLO), SLO)
    assert load.status == "cannot_tell" and "one batch of 3 requests draining" in load.reason
    basis = measured_basis(goodput(batch, SLO), load, simulated=True, run=batch)
    assert basis.text.startswith("capacity basis: the simulated burst (every request at t = 0)")
    assert basis.warning.startswith("the run is ONE BATCH")
