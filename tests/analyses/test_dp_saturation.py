"""Saturation of vLLM's DP ranks judged rank by rank (analyses/serving/dp_saturation.py): one rank's queue grows while
the others keep up, which the group's backlog, scaled by all ranks' requests, does not show."""

from __future__ import annotations

from kvledger.analyses.serving.dp_saturation import (
    rank_growths,
    rank_overload,
    rank_probe_grew,
    rank_saturated,
    rank_z,
    saturation_figures,
)
from kvledger.analyses.serving.queue_growth import open_loop_check, probe_queue_grew
from kvledger.records import RequestRecord, RunMetadata, RunRecords
from kvledger.report.simulate_view import dp_line


def _run() -> tuple[RunRecords, list[int]]:
    # 16 DP ranks, each sent one request every 0.1 s (t = 0 … 9.9 s, 100 a rank). Rank 0 finishes one every 0.2 s from
    # t = 1 s (request i at 1 + 0.2 i); ranks 1–15 finish each request 0.55 s after it arrived.
    recs, ranks = [], []
    for i in range(100):
        a = 0.1 * i
        recs.append(RequestRecord(f"r0_{i}", a, 10, 5, first_token_s=1 + 0.2 * i, finish_s=1 + 0.2 * i))
        ranks.append(0)
        for k in range(1, 16):
            recs.append(RequestRecord(f"r{k}_{i}", a, 10, 5, first_token_s=a + 0.55, finish_s=a + 0.55))
            ranks.append(k)
    return RunRecords(recs, RunMetadata(source="test", source_format="test")), ranks


def test_one_ranks_growing_queue_is_saturation_the_groups_backlog_hides():
    run, ranks = _run()
    # The group: median arrival t = 5.0 s (the 801st of 1,600), 16 × 51 = 816 arrived; finished rank 0's i ≤ 20 (21)
    # and the others' a ≤ 4.45 s, i ≤ 44 (15 × 45 = 675): backlog 816 − 696 = 120. Last arrival t = 9.9 s: 1,600
    # arrived; finished rank 0's i ≤ 44 (45) and the others' a ≤ 9.35 s, i ≤ 93 (15 × 94 = 1,410): backlog 145. The
    # expected backlog 120 × 1.019 (the halves' rate change) = 122.3: 145 is under 1.5 × that and only 22.7 past it,
    # under 5 % of the 784 requests that arrived in between (39.2): the group kept up by queue_growth's rule
    assert open_loop_check(run) == (None, None)
    # Rank 0 alone: median arrival t = 5.0 s, 51 arrived, 21 finished → 30; last, 100 arrived, 45 finished → 55;
    # 55 ≥ 1.5 × 30, grew by 25 > 10, 55 > 5 % of 100: its queue grew. Ranks 1–15: 5 or 6 in the system throughout.
    # 25 is past its 16 ranks' burst allowance, 3.7617 × √(1 × 30) = 20.60 (test_rank_z): saturated
    growths = rank_growths(run, ranks, 16)
    assert (growths[0].backlog_mid, growths[0].backlog_last) == (30, 55)
    assert growths[1:] == [None] * 15
    q = rank_overload(growths, 16)
    # 'showed no queue growth', not 'kept up': a rank too short to tell or under 20 requests is not counted out either
    assert q.note.startswith("DP rank 0 of 16 (its own requests; 15 of the 16 ranks showed no queue growth past their "
                             "bursts; a rank counts as saturated only beyond 3.76 × √(D × its expected backlog), the "
                             "single run's 3 tightened for 16 ranks tested, Bonferroni: Φ⁻¹(1 − 0.00135 ÷ 16)): "
                             "overloaded: requests in the system (arrived, not finished) grew from 30 at the median "
                             "arrival")
    short = rank_overload([*growths[:1], *[None] * 15], 16)  # the same count whatever made the others None
    assert "15 of the 16 ranks showed no queue growth" in short.note
    figures = saturation_figures(growths)
    assert figures["saturated_ranks"] == [0] and figures["saturation_judged"] == "per rank"


def test_the_data_parallel_line_says_saturation_was_judged_per_rank():
    run, ranks = _run()
    dp = {"data_parallel_size": 16, "kv_usage_mean_per_rank": [0.5] * 16, "gpus": 16, "rule_source": "vLLM 0.19.0",
          "kv_tokens_per_rank": 1000, "kv_tokens_total": 16000, "requests_routed_per_rank": [100] * 16,
          **saturation_figures(rank_growths(run, ranks, 16))}
    assert dp_line(dp).endswith("; saturation judged per rank, each rank's own requests (a rank's queue cannot move "
                                "to another): rank 0 of 16 saturated (its own queue grew)")
    kept = {**dp, "saturated_ranks": []}
    assert dp_line(kept).endswith(": no rank's queue grew")
    # a closed loop (no per-rank figures): the line says nothing of saturation
    closed = {k: v for k, v in dp.items() if not k.startswith("saturat")}
    assert "saturation" not in dp_line(closed)


def test_a_capacity_probe_counts_out_where_one_ranks_queue_grew_past_its_bursts():
    run, ranks = _run()
    # the group kept up (above), so the group's probe rule does not count the probe out
    assert probe_queue_grew(run, "open loop") is False
    # rank 0: 55 against 30 expected (its arrival rate the same in both halves), 25 past it; its arrivals evenly spaced
    # (dispersion below 1, taken as 1), so with 16 ranks tested its bursts can add 3.7617 × √(1 × 30) = 20.60: 25 is
    # past them → counted out
    q = rank_growths(run, ranks, 16)[0]
    assert q.backlog_expected == 30.0 and abs(q.burst_allowance - 3.7617 * 30 ** 0.5) < 1e-3 and not q.within_bursts
    assert rank_probe_grew(run, ranks, 16)


def test_rank_z_shares_the_single_runs_tail_among_the_ranks_tested():
    # one run: z = 3, a one-sided normal tail of 1 − Φ(3) = 0.0013499. N ranks: Bonferroni, each rank's tail
    # 0.0013499 ÷ N: N = 2 → 6.750e-4, z = 3.2052; N = 8 → 1.687e-4, z = 3.5847; N = 16 → 8.437e-5, z = 3.7617
    # (normal table: Φ(3.2052) = 0.999325, Φ(3.5847) = 0.999831, Φ(3.7617) = 0.999916)
    assert rank_z(1) == 3.0
    assert [round(rank_z(n), 4) for n in (2, 8, 16)] == [3.2052, 3.5847, 3.7617]


def _ranks_with_growth(dp: int) -> tuple[RunRecords, list[int]]:
    # ``dp`` ranks, each sent one request every 0.1 s (t = 0 … 9.9 s, 100 a rank). Rank 0 finishes request i at
    # 1.7 + 0.16 i (it falls behind); the others 0.55 s after arrival (5 or 6 in the system: no growth).
    recs, ranks = [], []
    for i in range(100):
        a = 0.1 * i
        recs.append(RequestRecord(f"r0_{i}", a, 10, 5, first_token_s=1.7 + 0.16 * i, finish_s=1.7 + 0.16 * i))
        ranks.append(0)
        for k in range(1, dp):
            recs.append(RequestRecord(f"r{k}_{i}", a, 10, 5, first_token_s=a + 0.55, finish_s=a + 0.55))
            ranks.append(k)
    return RunRecords(recs, RunMetadata(source="test", source_format="test")), ranks


def test_a_growth_within_the_burst_allowance_of_n_ranks_tested_is_no_saturation():
    # Rank 0 alone: median arrival t = 5.0 s, 51 arrived; finished i ≤ (5 − 1.7) / 0.16 = 20.6 → 21: backlog 30. Last
    # arrival t = 9.9 s, 100 arrived, finished i ≤ 8.2 / 0.16 = 51.25 → 52: backlog 48. Its rate the same in both
    # halves: 30 expected, 18 past it (> 10), 48 ≥ 1.5 × 30 and > 5 % of 100: past queue_growth's thresholds (the
    # window means, ~24.7 → ~43.2 by the backlog's 3.75 t + 10.6 line, pass too). Its gaps are even (D = 1).
    # DP 8: its bursts can add 3.5847 × √30 = 19.63 ≥ 18 → within them, no rank saturated (before: rank 0 saturated,
    # and a single run's 3 × √30 = 16.43 would also count it). DP 2: 3.2052 × √30 = 17.56 < 18 → saturated.
    run8, ranks8 = _ranks_with_growth(8)
    growths = rank_growths(run8, ranks8, 8)
    q = growths[0]
    assert (q.backlog_mid, q.backlog_last, q.backlog_expected) == (30, 48, 30.0) and growths[1:] == [None] * 7
    assert abs(q.burst_allowance - 19.634) < 1e-3 and q.within_bursts and not rank_saturated(q)
    assert rank_overload(growths, 8) is None and saturation_figures(growths)["saturated_ranks"] == []
    assert not rank_probe_grew(run8, ranks8, 8)
    run2, ranks2 = _ranks_with_growth(2)
    growths2 = rank_growths(run2, ranks2, 2)
    assert abs(growths2[0].burst_allowance - 17.556) < 1e-3 and rank_saturated(growths2[0])
    assert rank_overload(growths2, 2).note.startswith("DP rank 0 of 2 (its own requests; 1 of the 2 ranks showed no "
                                                      "queue growth past their bursts; a rank counts as saturated "
                                                      "only beyond 3.21 × √(D × its expected backlog)")
    assert rank_probe_grew(run2, ranks2, 2)
