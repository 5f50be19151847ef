"""A capacity probe too short to show its load: more than half its requests in the system at its last arrival."""

from __future__ import annotations

from kvledger.analyses.serving.probe_length import probe_too_short, too_short_note
from kvledger.records import RequestRecord, RunMetadata, RunRecords

OPEN = "open loop at 10.000 req/s offered"


def _run(arrivals, finishes, extra=None):
    recs = [RequestRecord(f"r{i}", a, 10, 5, first_token_s=f, finish_s=f)
            for i, (a, f) in enumerate(zip(arrivals, finishes))]
    return RunRecords(recs, RunMetadata(source="test", source_format="test", extra=extra or {}))


def test_a_run_shorter_than_two_stays_is_too_short():
    # 100 arrivals one every 0.1 s (last at 9.9 s), each in the system 6 s: request i finishes at 0.1 i + 6. At the last
    # arrival, finished are those with 0.1 i + 6 ≤ 9.9 → i ≤ 39: 40 → 60 of 100 still in the system (> 50): the
    # arrivals spanned 9.9 s, less than two 6 s stays
    arrivals = [0.1 * i for i in range(100)]
    assert probe_too_short(_run(arrivals, [a + 6.0 for a in arrivals]), OPEN) == (60, 100)


def test_a_run_spanning_more_than_two_stays_is_long_enough():
    # the same arrivals, each in the system 4 s: finished by 9.9 s those with 0.1 i + 4 ≤ 9.9 → i ≤ 59: 60 → 40 left,
    # under half of 100
    arrivals = [0.1 * i for i in range(100)]
    assert probe_too_short(_run(arrivals, [a + 4.0 for a in arrivals]), OPEN) is None


def test_an_unfinished_request_counts_as_in_the_system_and_closed_loops_are_not_read():
    # 4 s stays as above (40 left) but 11 of the finished never finish (failed: no finish time): 51 > 50
    arrivals = [0.1 * i for i in range(100)]
    finishes = [None if i < 11 else a + 4.0 for i, a in enumerate(arrivals)]
    assert probe_too_short(_run(arrivals, finishes), OPEN) == (51, 100)
    assert probe_too_short(_run(arrivals, finishes), "closed loop: 8 users") is None
    stopped = _run(arrivals, finishes, {"stopped_early": {"attainment_upper": 0.5}})
    assert probe_too_short(stopped, OPEN) is None  # the early-stop rule ended it: it misses anyway


def test_the_note_names_the_probes_and_asks_for_four_times_the_backlog():
    # two probes: 154 of 200 at 28 and 119 of 200 at 16; the hint is 4 × the larger backlog, 616, rounded up to 700
    (note,) = too_short_note({28.0: (154, 200), 16.0: (119, 200)}, "request_rate")
    assert note.startswith("too short to tell: 16, 28 (request_rate) met the attainment target")
    assert "(154 of 200 at 28;" in note and "--num-requests; at least 700 here" in note
    assert too_short_note({}, "request_rate") == []


def test_a_short_probe_no_longer_sets_the_capacity():
    # The case that found the rule: 200 azure-conv requests per probe, Qwen3-30B-A3B on one H100 (uncalibrated
    # roofline), TTFT ≤ 500 ms and TPOT ≤ 50 ms at 90 %. By attainment and the queue check alone the search found 28
    # req/s (154 of the 200 still in the system at the last arrival), where 400-request probes find 11. Counting the
    # too-short probes out, it found 9 req/s. With the layers' norm, RoPE and add kernels now priced for MoE models too
    # (validation §2.34) the steps are slower: 8.75 req/s, the probes from 8.875 req/s up are marked and the note asks
    # for 4 × the largest backlog of those that passed (120 of 200 at 16 req/s: 480 → at least 500).
    from typer.testing import CliRunner

    from kvledger.cli.main import app

    res = CliRunner().invoke(app, ["goodput", "--simulate", "Qwen/Qwen3-30B-A3B", "--gpu", "H100", "--trace",
                                   "azure-conv", "--num-requests", "200", "--slo", "ttft=500ms,tpot=50ms",
                                   "--target", "0.9"], env={"COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    text = " ".join(res.output.split())
    assert "SLO capacity on request_rate for attainment ≥ 90%: 8.75 req/s" in text
    rows = [line.split() for line in res.output.splitlines() if line.strip().endswith("too short")]
    assert [float(r[1]) for r in rows] == [16.0, 12.0, 10.0, 9.0, 8.875]
    assert "too short to tell: 8.875, 9, 10, 12, 16 (request_rate)" in text
    assert "(120 of 200 at 16;" in text and "at least 500 here" in text
    assert "too short: over half its requests still in the system at its last arrival" in text

