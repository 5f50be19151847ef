"""The overload check: the backlog at the median and at the last arrival, and its means over the second and last
quarters of the arrivals, worked by hand."""

from __future__ import annotations

import numpy as np

from kvledger.analyses.serving.queue_growth import queue_growth
from kvledger.records import RequestRecord, RunMetadata, RunRecords


def _run(arrivals, finishes):
    recs = [RequestRecord(f"r{i}", a, 10, 5, first_token_s=f, finish_s=f) for i, (a, f) in enumerate(zip(arrivals,
        finishes))]
    return RunRecords(recs, RunMetadata(source="test", source_format="test"))


def test_a_queue_that_grows_with_the_trace_is_named_with_its_rates():
    # 100 arrivals, one every 0.1 s (t = 0 … 9.9 s); the engine finishes one every 0.2 s from t = 1 s: request i at
    # 1 + 0.2 i. Median arrival t = 5.0 s (i = 50): arrived 51, finished those with 1 + 0.2 i ≤ 5 → i ≤ 20: 21 →
    # backlog 30. Last arrival t = 9.9 s: arrived 100, finished i ≤ 44 (1 + 0.2·44 = 9.8): 45 → backlog 55.
    # 55 ≥ 1.5 × 30 = 45, grew by 25 > 10, 55 > 5 % of 100: overloaded. Over [5.0, 9.9] s: arrivals i = 51 … 99,
    # 49 in 4.9 s = 10 req/s; finishes i = 21 … 44, 24 in 4.9 s = 4.90 req/s.
    q = queue_growth(_run([0.1 * i for i in range(100)], [1 + 0.2 * i for i in range(100)]))
    assert (q.backlog_mid, q.backlog_last) == (30, 55)
    assert abs(q.arrived_per_s - 10.0) < 1e-9 and abs(q.finished_per_s - 24 / 4.9) < 1e-9
    assert "grew from 30 at the median arrival (t = 5.0 s) to 55" in q.note


def test_a_steady_backlog_is_not_overload():
    # Every request takes 0.5 s (finish = arrival + 0.5): the backlog is 5 at both times (arrivals in (t − 0.5, t]).
    arrivals = [0.1 * i for i in range(100)]
    assert queue_growth(_run(arrivals, [a + 0.5 for a in arrivals])) is None


def test_a_burst_before_the_first_finish_is_not_overload_by_growth():
    # 40 requests sent within 20 ms (t = 0.0005 i), first token at 1 + 0.1 i s, finished 5 s later: at the median
    # arrival (i = 20, t = 0.0100 s) 21 arrived, none finished; at the last (t = 0.0195 s) 40 → the backlog "grew"
    # 21 → 40 (≥ 1.5 ×, by 19 > 10, 40 > 5 % of 40), but the first request finished only at 6 s: the 0.01 s up to the
    # median arrival is warm-up, shorter than the 6 s to the first finish (MIN_SPAN_FIRST_FINISH = 1): no overload
    recs = [RequestRecord(f"r{i}", 0.0005 * i, 10, 5, first_token_s=1 + 0.1 * i, finish_s=6 + 0.1 * i)
            for i in range(40)]
    assert queue_growth(RunRecords(recs, RunMetadata(source="test", source_format="test"))) is None

    # one request a second (t = 0 … 39 s, median arrival t = 20 s); request i finishes at first_finish + 10 i s
    def run(first_finish: float) -> RunRecords:
        return RunRecords([RequestRecord(f"r{i}", float(i), 10, 5, first_token_s=first_finish + 10 * i,
                                         finish_s=first_finish + 10 * i) for i in range(40)],
                          RunMetadata(source="test", source_format="test"))

    # first finish at 19 s (before the median arrival): at t = 20 s 21 arrived, 1 finished → 20; at t = 39 s 40
    # arrived, 3 finished (19, 29, 39 s) → 37: 37 ≥ 30, +17 > 10, 37 > 2 → overloaded. First finish at 21 s: the
    # median arrival (20 s) comes before any finish, so the growth (21 → 38) is warm-up, not read as overload
    assert queue_growth(run(19.0)).backlog_last == 37
    assert queue_growth(run(21.0)) is None


def test_validate_advice_names_no_rate_flag():
    # the overloaded run of the first test, as validate's measured side: its advice cannot name simulate's rate flags
    from kvledger.calibration.saturation import saturation

    run = _run([0.1 * i for i in range(100)], [1 + 0.2 * i for i in range(100)])
    (note,) = saturation(run, None)["notes"]
    assert note.startswith("measured: overloaded:") and "--rate" not in note and "--replicas" not in note
    assert "compare throughput" in note
    assert "lower the rate (--rate/--rate-scale)" in queue_growth(run).note  # simulate's advice, its flags


def _short(first_token, finish=lambda i: 20 + 0.01 * i):
    # 100 arrivals, one every 0.1 s (t = 0 … 9.9 s; median arrival i = 50, t = 5.0 s); nothing finishes before 20 s, so
    # the arrivals up to the median (5.0 s) span less than the 20 s to the first finish: the backlog cannot be read
    recs = [RequestRecord(f"r{i}", 0.1 * i, 10, 5, first_token_s=first_token(i), finish_s=finish(i))
            for i in range(100)]
    return RunRecords(recs, RunMetadata(source="test", source_format="test"))


def test_a_run_too_short_for_the_backlog_is_read_by_its_waiting_queue():
    from kvledger.analyses.serving.queue_growth import open_loop_check

    # first tokens one every 0.2 s from 0.55 s (request i at 0.55 + 0.2 i): TTFT 0.55 + 0.1 i, the first half's (i =
    # 0 … 50) median 3.05 s ≤ the 5.0 s to the median arrival, so the waiting queue can be read. At t = 5.0 s: 51
    # arrived, first tokens i ≤ 22 (0.55 + 4.4 = 4.95): 23 → waiting 28; at t = 9.9 s: 100 arrived, i ≤ 46 (9.75): 47
    # → waiting 53. 53 ≥ 1.5 × 28 = 42, +25 > 10, 53 > 5: overloaded (the prefill does not keep up). Over (5.0, 9.9]:
    # 49 arrivals in 4.9 s = 10 req/s, first tokens i = 23 … 46, 24 in 4.9 s
    q, short = open_loop_check(_short(lambda i: 0.55 + 0.2 * i))
    assert short is None and q.queue == "waiting" and (q.backlog_mid, q.backlog_last) == (28, 53)
    assert abs(q.arrived_per_s - 10.0) < 1e-9 and abs(q.finished_per_s - 24 / 4.9) < 1e-9
    assert "requests waiting for their first token grew from 28 at the median arrival (t = 5.0 s) to 53" in q.note
    assert queue_growth(_short(lambda i: 0.55 + 0.2 * i)) == q


def test_a_run_too_short_to_tell_says_so_and_how_many_requests_would_tell():
    from kvledger.analyses.serving.queue_growth import open_loop_check

    # every first token 0.05 s after its arrival: 1 waiting at the median and at the last arrival (no growth), and the
    # backlog unreadable (first finish at 20 s > 5.0 s): neither overloaded nor shown to keep up. Suggested requests:
    # SHORT_RUN_HINT 4 × the arrival rate (99 gaps in 9.9 s = 10 req/s) × the 20 s to the first finish = 800,
    # rounded up to a hundred: 800
    q, short = open_loop_check(_short(lambda i: 0.1 * i + 0.05))
    assert q is None and queue_growth(_short(lambda i: 0.1 * i + 0.05)) is None
    assert (short.t_mid_s, short.t_last_s, short.first_finish_s) == (5.0, 0.1 * 99, 20.0)
    assert (short.num_requests, short.suggested_num_requests) == (100, 800)
    assert "too short to tell" in short.note and "--num-requests; at least 800" in short.note
    # the same check decides a capacity probe's steadiness: a warning the views show (it starts "not steady: ")
    from kvledger.analyses.serving.queue_growth import boundary_steadiness

    got, (note,) = boundary_steadiness(_short(lambda i: 0.1 * i + 0.05), 10.0, 100)
    assert got == short and note.startswith("not steady: the probe at the capacity (10 req/s, 100 requests) was too "
                                            "short to tell") and "at least 800 here" in note
    got, (note,) = boundary_steadiness(_short(lambda i: 0.55 + 0.2 * i), 10.0, 100)
    assert got.queue == "waiting" and "requests waiting for their first token rose from 28" in note
    # a run that finishes within the first half is read by its backlog as before: every request done 0.5 s after it
    # arrived keeps 5 in the system at both times, kept up
    assert open_loop_check(_short(lambda i: 0.1 * i + 0.05, lambda i: 0.1 * i + 0.5)) == (None, None)


def test_a_few_percent_over_capacity_is_overload_though_the_backlog_grows_by_less_than_half():
    # 1,000 arrivals one every 0.1 s (10 req/s, t = 0 … 99.9 s); the engine finishes request i at 20 + 0.106 i s
    # (9.43 req/s: a load ~6% above what it serves, after a 20 s E2E). Median arrival t = 50.0 s (i = 500): arrived
    # 501, finished i ≤ 283 (20 + 0.106·283 = 49.998): 284 → backlog 217. Last arrival t = 99.9 s: arrived 1,000,
    # finished i ≤ 753 (20 + 0.106·753 = 99.818; 754 → 99.924): 754 → backlog 246. 246 ÷ 217 = 1.13 < GROWTH 1.5,
    # but it grew by 29 > 10 and by more than SHORTFALL 5% of the 499 arrivals in (50.0, 99.9] s (24.95), 246 > 5%
    # of 1,000: overloaded. Finished there 754 − 284 = 470 in 49.9 s = 9.419 req/s against 10 arrived.
    arrivals = [0.1 * i for i in range(1000)]
    q = queue_growth(_run(arrivals, [20 + 0.106 * i for i in range(1000)]))
    assert q is not None and (q.backlog_mid, q.backlog_last) == (217, 246)
    assert abs(q.finished_per_s - 470 / 49.9) < 1e-9
    # the same arrivals served at their own rate after the same 20 s: the backlog holds at about 200 (the requests
    # that arrived in the last 20 s) at both times: no overload
    assert queue_growth(_run(arrivals, [a + 20 for a in arrivals])) is None


def test_a_burst_at_the_last_arrival_is_not_a_shortfall():
    # 970 arrivals one every 0.1 s (t = 0 … 96.9 s), then 30 more within 30 ms (96.901 … 96.930 s); each finishes 20 s
    # after it arrived (the engine keeps up). Median arrival (i = 500) t = 50.0 s: the requests of (30, 50] s, 200 in
    # the system. Last arrival t = 96.93 s: the regular ones of (76.93, 96.9], i = 770 … 969, 200, + the 30 of the
    # burst = 230. Grew by 30: more than 10, and more than SHORTFALL 5 % of the 499 arrivals in between (24.95) — the
    # raw backlog would call it an overload. But the second half's arrivals came faster: 499 gaps in 46.93 s = 10.633
    # req/s against the first half's 500 in 50.0 s = 10 req/s, so a kept-up backlog is 200 × 1.0633 = 212.7; 230 exceeds
    # it by 17.3 < 24.95 (and < 1.5 × 212.7): no overload.
    arrivals = [0.1 * i for i in range(970)] + [96.9 + 0.001 * k for k in range(1, 31)]
    assert queue_growth(_run(arrivals, [a + 20 for a in arrivals])) is None


def test_a_traces_own_rate_change_and_swings_are_not_read_as_overload_but_a_sustained_rise_is():
    # Simulated Llama-3.1-8B on H100s, azure-conv (its burstiness kept).
    from kvledger.analyses.serving.sim_ledgers import simulate_run
    from kvledger.analyses.serving.sim_setup import SimRequestArgs

    def run(rate: float, n: int, tp: int = 1):
        return simulate_run(SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="H100", tp=tp, trace="azure-conv",
                                           rate=rate, num_requests=n, gemm_efficiency="flat")).run  # as read off

    # Its first 200 requests arrive 2.28× faster in their second half: at a mean 10 req/s the backlog goes 20 → 48,
    # the 46 expected (20 × 2.28) of an engine keeping up with the second half's 16.4 req/s: kept up. At 16 req/s the
    # second half's 26.3 req/s is past what one H100 serves: 30 → 98 against 68 expected, by 30 > 5 % of 99: overload
    assert queue_growth(run(10.0, 200)) is None
    q = queue_growth(run(16.0, 200))
    assert (q.backlog_mid, q.backlog_last) == (30, 98)
    # 68 = the 30 at the median × 2.28, what they would number had the engine kept pace (not what it "holds")
    assert "to 98 at the last one (t = 12.4 s), past the 68 they would number had the engine kept pace from the " \
           "median arrival on (the 30 there × 2.28, the arrival rate's change between the halves)" in q.note
    # TP 2, 2,000 requests: at 38 req/s 259 → 310, 41 past the 269 expected (rate change 1.04): under 5 % of the 1,000
    # arrivals (50), kept up — as 6,000 requests at that rate are. At 40 req/s 297 → 489, 181 past the expected 308, and
    # 489 ≥ GROWTH 1.5 × 308 = 462: overloaded
    assert queue_growth(run(38.0, 2000, 2)) is None and queue_growth(run(38.0, 6000, 2)) is None
    q = queue_growth(run(40.0, 2000, 2))
    assert q is not None and (q.backlog_mid, q.backlog_last) == (297, 489)


def test_the_excess_names_what_it_is_past_when_the_rate_did_not_move_the_expected_backlog():
    # the DeepSeek-V3.2 run's simulated side: 23 waiting at the median arrival, 155 at the last, the arrival rate
    # unchanged between the halves (expected 23, no "past the N they would number …" clause before it), 28 the
    # bursts can add: "— 132 past it" had nothing to point to (fresh-user trial); it names the 23 now — as where an
    # engine keeping pace would have held them, not as "what a kept-up engine holds" (a backlog is the run's own)
    from kvledger.analyses.serving.notes import expected_clause

    text = expected_clause(23, 23.2, allowance=28, backlog_last=155, z=3)
    assert text == (" — 132 past where an engine keeping pace from the median arrival on would have held them (23: "
                    "the arrival rate did not change between the halves), beyond the 28 the trace's own bursts can add")
    # where the rate changed, the clause names the expected backlog first (110 × 1.35 = 149) and "it" points to it
    text = expected_clause(110, 148.9, allowance=49, backlog_last=196, z=3)
    assert text.startswith(", past the 149 they would number had the engine kept pace from the median arrival on (the "
                           "110 there × 1.35, the arrival rate's change between the halves) — 47 past it, within the "
                           "49")


def test_a_dip_at_the_median_arrival_is_not_growth_when_the_window_means_hold():
    from kvledger.analyses.serving.backlog_windows import quarter_means

    # one arrival a second (i = 0 … 99 s), each in the system 20 s, but those arriving at 35 … 49 s only 0.5 s.
    # Median arrival t = 50: 51 arrived; finished i ≤ 30 (i + 20 ≤ 50: 31) and the 15 quick ones → 5 in the system.
    # Last arrival t = 99: 100 arrived; finished i ≤ 79 bar the 15 quick ones (65) and the 15 → 20. Halves' rates
    # equal (50 gaps in 50 s, 49 in 49 s): expected 5; 20 − 5 = 15 > 10, 20 > 5 % of 100, 20 ≥ 1.5 × 5 — the two
    # instants read an overload. Over the second quarter of the arrivals, [25, 50] s: i = 5 … 24 stay i − 5 s in it
    # (190), i = 25 … 30 20 s each (120), i = 31 … 34 50 − i (70), the 15 quick ones 0.5 s (7.5): 387.5 ÷ 25 = 15.5.
    # Over the last quarter, [75, 99] s: i = 56 … 74 stay i − 55 s (190), i = 75 … 79 20 s (100), i = 80 … 99 99 − i
    # (190): 480 ÷ 24 = 20.0. Quarters' rates equal (25 gaps in 25 s, 24 in 24 s): 20.0 − 15.5 = 4.5 ≤ 10: kept up
    arrivals = [float(i) for i in range(100)]
    finishes = [i + (0.5 if 35 <= i <= 49 else 20.0) for i in range(100)]
    run = _run(arrivals, finishes)
    assert quarter_means(np.array(arrivals), np.sort(finishes), settled=True) == (15.5, 20.0, 15.5)
    assert queue_growth(run) is None


def _h200(rate: float, n: int):
    # the user trial's workload: Llama-3.1-8B on one H200, 1,024-token prompts, 256-token outputs, Poisson arrivals
    from kvledger.analyses.serving.sim_ledgers import SyntheticSpec, simulate_run
    from kvledger.analyses.serving.sim_setup import SimRequestArgs

    args = SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="H200", rate=rate, num_requests=n)
    return simulate_run(args, SyntheticSpec("fixed:1024", "fixed:256"), record_token_times=False).run


def test_the_trials_h200_run_at_14_req_s_kept_up_and_40_req_s_did_not():
    from kvledger.analyses.serving.backlog_windows import quarter_means
    from kvledger.ledgers.columns import columns_from

    def means(run):
        c = columns_from(run)
        return quarter_means(np.sort(c.arrival_s), np.sort(c.finish_s), settled=True)

    # 500 requests at 14 req/s (TTFT p90 59 ms, E2E mean 1.98 s: L ≈ 14 × 1.98 ≈ 28 by Little's law). The seeded
    # arrivals put a dip at the median arrival (14 in the system) and 29 at the last: the instants alone read an
    # overload (29 − 15.1 expected > 10, 29 ≥ 1.5 × 15.1) and goodput's doubling counted 14 and 16 req/s out. The
    # window means are 25.8 and 26.8 against 27.8 expected (25.8 × 1.075, the quarters' rate change): kept up
    run = _h200(14.0, 500)
    second, last, expected = means(run)
    assert (round(second, 1), round(last, 1), round(expected, 1)) == (25.8, 26.8, 27.8)
    assert queue_growth(run) is None
    # 1,000 requests at 40 req/s, past the ~26 req/s it sustains: 491 → 920 at the instants, 369 → 835 over the
    # windows against 412 expected (835 − 412 = 423 > 10 and 835 ≥ 1.5 × 412): overloaded, and past the bursts
    run = _h200(40.0, 1000)
    second, last, expected = means(run)
    assert (round(second), round(last), round(expected)) == (369, 835, 412)
    q = queue_growth(run)
    assert (q.backlog_mid, q.backlog_last) == (491, 920) and not q.within_bursts
