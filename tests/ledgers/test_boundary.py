"""SLO-boundary search: over the real inference-perf rate sweep, and by bisection over a toy load model built from real
records."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvledger.errors import InputError
from kvledger.evidence import read_run
from kvledger.ledgers.boundary import boundary_from_sweep, search_boundary
from kvledger.ledgers.slo import parse_slo
from kvledger.records import RequestRecord, RunMetadata, RunRecords

DATA = Path(__file__).resolve().parents[1] / "evidence" / "data"


def test_inference_perf_sweep_boundary():
    runs = [read_run(DATA / f"inference-perf/stage_{i}_lifecycle_metrics.json") for i in range(7)]
    b = boundary_from_sweep(runs, parse_slo("ttft=100ms,tpot=10ms"), target=0.9)
    # TPOT is judged as (E2E − TTFT)/(64 − 1) (config.yaml: output_len 64 under ignore_eos), not on the file's
    # time_per_output_token (estimate.derived_tpot_bounds). Stage 1 (37.97 req/s): E2E max 641.8 ms ≤ 10 ms × 63 +
    # TTFT min 21.4 ms = 651.4 ms and TTFT max 70.1 ms ≤ 100 ms → all 2278 good.
    # Stage 2 (74.94 req/s): E2E p25 711.8 ms > 10 ms × 63 + TTFT max 76.6 ms = 706.6 ms → at most ⌈0.25 × 4495⌉ =
    # 1124 (25 %) meet TPOT; at least those with E2E ≤ 630 + TTFT min 23.2 = 653.2 ms: p1 629.7 ms → ⌊0.01 × 4495⌋ + 1
    # = 45 (1.0 %). It misses 90 % (the file's own TPOT, p99 7.1 ms, would have passed it: physically impossible).
    assert [p.meets_target for p in b.points] == [True, True, False, False, False, False, False]
    assert b.points[2].attainment == pytest.approx(45 / 4496)
    assert b.boundary_value == pytest.approx(37.97) and b.first_failing_value == pytest.approx(74.94)
    # one H100 (manifests.yaml: nvidia.com/gpu limit 1, replicas 1) → DistServe's per-GPU goodput is the same 37.97
    assert b.boundary_per_gpu == pytest.approx(37.97)
    assert any("estimates from percentiles" in n for n in b.notes)


def _template() -> list[RequestRecord]:
    run = read_run(DATA / "aiperf/run1_profile_export.jsonl")
    return [r for r in run.records if r.ok]


def _toy(template: list[RequestRecord], mu: float = 20.0):
    """Real-shaped records at load λ: each real TTFT stretched by an M/M/1-like factor 1/(1 − λ/μ); decode unchanged."""

    def run_at(lam: float) -> RunRecords:
        k = 1.0 / (1.0 - lam / mu)
        recs = [RequestRecord(r.request_id, r.arrival_s, r.num_prompt_tokens, r.num_output_tokens,
                              r.arrival_s + r.ttft_s * k,
                              r.finish_s + r.ttft_s * (k - 1)) for r in template]
        return RunRecords(recs, RunMetadata("toy", "toy", request_rate=lam, num_gpus=2, duration_s=10.0))

    return run_at


def test_bisection_over_a_callable_finds_the_analytic_boundary():
    template = _template()
    # 89 completed requests; 90 % needs ⌈0.9 × 89⌉ = 81 good, i.e. the 81st-smallest real TTFT t₈₁ must satisfy
    # t₈₁ / (1 − λ/μ) ≤ 8 s  ⇔  λ ≤ μ (1 − t₈₁ / 8)
    t81 = sorted(r.ttft_s for r in template)[80]
    lam_star = 20.0 * (1.0 - t81 / 8.0)
    b = search_boundary(_toy(template), parse_slo("ttft=8s"), target=0.9, lo=0.0, hi=19.0, tol=0.01)
    assert lam_star - 0.01 <= b.boundary_value <= lam_star
    assert b.first_failing_value - b.boundary_value <= 0.01
    assert b.boundary_per_gpu == pytest.approx(b.boundary_value / 2)  # DistServe's per-GPU goodput
    assert len(b.points) <= 30


def test_bisection_when_the_whole_range_passes_or_fails():
    template = _template()
    b = search_boundary(_toy(template), parse_slo("ttft=1000s"), target=0.9, lo=0.0, hi=10.0)
    assert b.boundary_value == 10.0 and len(b.points) == 2
    assert any("may be higher" in n for n in b.notes)
    b = search_boundary(_toy(template), parse_slo("ttft=1ms"), target=0.9, lo=0.0, hi=10.0)
    assert b.boundary_value is None and len(b.points) == 1
    assert any("misses 90% already at the lowest" in n for n in b.notes)


def test_integer_axis_max_num_seqs():
    def run_at(n: int) -> RunRecords:
        # attainment 1.0 up to max_num_seqs 37, then every TTFT is 1 s over the 0.5 s SLO
        ttft = 0.1 if n <= 37 else 1.0
        recs = [RequestRecord(str(i), 0.0, 10, 2, ttft, ttft + 0.1) for i in range(10)]
        return RunRecords(recs, RunMetadata("toy", "toy", duration_s=1.0, extra={"max_num_seqs": n}))

    b = search_boundary(run_at, parse_slo("ttft=500ms"), 0.9, 1, 256, axis="max_num_seqs", integer=True)
    assert (b.boundary_value, b.first_failing_value) == (37, 38)


def test_non_monotone_sweep_stays_at_the_first_failure():
    def run(ttft: float) -> RunRecords:
        return RunRecords([RequestRecord("0", 0.0, 1, 2, ttft, ttft + 0.1)], RunMetadata("s", "s", duration_s=1.0))

    b = boundary_from_sweep([run(0.1), run(0.9), run(0.1)], parse_slo("ttft=500ms"), 0.9, values=[1.0, 2.0, 3.0])
    assert (b.boundary_value, b.largest_passing_value, b.first_failing_value) == (1.0, 3.0, 2.0)
    assert any("not monotone" in n for n in b.notes)


def test_a_passing_value_above_a_failing_lowest_is_said_not_to_be_a_capacity():
    def run(ttft: float) -> RunRecords:
        return RunRecords([RequestRecord("0", 0.0, 1, 2, ttft, ttft + 0.1)], RunMetadata("s", "s", duration_s=1.0))

    # 1 req/s misses (TTFT 0.9 s > 0.5 s), 2 and 3 meet: no boundary, and the JSON's largest passing value, 3, says why
    b = boundary_from_sweep([run(0.9), run(0.1), run(0.1)], parse_slo("ttft=500ms"), 0.9, values=[1.0, 2.0, 3.0])
    d = b.to_dict()
    assert (d["boundary_value"], d["largest_passing_value"], d["first_failing_value"]) == (None, 3.0, 1.0)
    assert d["largest_passing_note"] == ("not a capacity: 3 met the target but the lowest request_rate evaluated (1) "
                                         "missed it, so no request_rate up to it holds the target (boundary_value is "
                                         "null)")
    # with a boundary the note is null (the key is always there)
    ok = boundary_from_sweep([run(0.1), run(0.9)], parse_slo("ttft=500ms"), 0.9, values=[1.0, 2.0]).to_dict()
    assert ok["boundary_value"] == 1.0 and ok["largest_passing_note"] is None


def test_sweep_input_errors():
    runs = [read_run(DATA / "inferencex/inferencex_glm5_fp8_vllm_tp8_isl1024_osl128_conc4.json")]
    # InferenceX ran with request_rate "inf" (closed loop at fixed concurrency): alone, the run cannot be a sweep
    with pytest.raises(InputError, match="conc4.json: one run at request_rate=inf: a capacity search over measured "
                                         "files needs a sweep, several runs at different request rates"):
        boundary_from_sweep(runs, parse_slo("ttft=1s"), 0.9)
    pair = runs + [read_run(DATA / "inferencex/inferencex_glm5_fp8_vllm_tp8_isl1024_osl128_conc16.json")]
    with pytest.raises(InputError, match="request_rate=inf is a closed-loop run; use --axis concurrency"):
        boundary_from_sweep(pair, parse_slo("ttft=1s"), 0.9)
    assert boundary_from_sweep(runs, parse_slo("ttft=1s"), 0.9, axis="concurrency").boundary_value == 4
    with pytest.raises(InputError, match=r"^attainment target 90 is out of range; allowed: \(0, 1\] \(share of "
                                         r"requests within the SLO, e\.g\. 0\.9 for 90 %\)$"):
        boundary_from_sweep(runs, parse_slo("ttft=1s"), 90)
    with pytest.raises(InputError, match="two runs share the same concurrency"):
        boundary_from_sweep(runs * 2, parse_slo("ttft=1s"), 0.9, axis="concurrency")


def test_a_load_whose_queue_grows_misses_whatever_its_attainment():
    # The toy of test_bisection_over_a_callable_finds_the_analytic_boundary at ttft=1000s: every rate in [0, 10] meets
    # 90 % (its whole range passes: boundary 10). Say the queue kept growing above 6 req/s (the caller's check): the
    # bisection of [0, 10] at resolution 0.5 then probes 0, 10 (grew → miss), 5, 7.5 (grew), 6.25 (grew), 5.625 —
    # 5.625 meets, and 6.25 − 5.625 = 0.625 > 0.5 goes on: 5.9375 meets; 6.25 − 5.9375 = 0.3125 ≤ 0.5 stops.
    from kvledger.ledgers.boundary import unsustained_note

    template = _template()
    b = search_boundary(_toy(template), parse_slo("ttft=1000s"), 0.9, 0.0, 10.0, tol=0.5,
                        queue_grew=lambda v, run: v > 6.0)
    assert (b.boundary_value, b.first_failing_value) == (5.9375, 6.25)
    grew = [p for p in b.points if p.queue_grew]
    assert [p.value for p in grew] == [6.25, 7.5, 10.0]
    assert all(p.attainment == 1.0 and not p.meets_target for p in grew)  # met 90 %, counted as missing it
    assert all(p.queue_grew is False for p in b.points if p.value <= 6.0)
    (note,) = unsustained_note(b.points, "request_rate", 0.9, "the check")
    assert note.startswith("sustained load only: 6.25, 7.5, 10 (request_rate) met the attainment target with the "
                           "queue still growing at the last arrival past what the trace's own bursts explain (the "
                           "check) and count as missing it")
    # without the check every point is judged on its attainment alone and none says whether its queue grew
    b = search_boundary(_toy(template), parse_slo("ttft=1000s"), 0.9, 0.0, 10.0, tol=0.5)
    assert b.boundary_value == 10.0 and all(p.queue_grew is None for p in b.points)
    assert unsustained_note(b.points, "request_rate", 0.9, "the check") == []
    # null in the JSON when not checked: every point carries the same keys (it was left out, so a point that missed
    # and one that met had different keys)
    assert b.to_dict()["points"][0]["queue_grew"] is None
    assert len({tuple(p) for p in b.to_dict()["points"]}) == 1


def test_the_step_time_reading_is_kept_to_a_light_load_that_missed_by_its_own_attainment():
    # The toy at ttft=1ms: every real TTFT (hundreds of ms and more) misses, so the lowest rate, 0, misses by its own
    # attainment: the note names the limit missed and reads it as the step time, the engine being nearly idle there.
    template = _template()
    b = search_boundary(_toy(template), parse_slo("ttft=1ms"), 0.9, 0.0, 10.0)
    (first,) = [n for n in b.notes if n.startswith("no bisection")]
    assert "89 missed ttft ≤ 1 ms: with the engine nearly idle the step time itself is over the limit" in first
    # Every rate meets ttft ≤ 1000 s, but say the lowest one's queue grew (as max_num_seqs 1 at a rate one sequence
    # cannot serve): it missed by its queue, not its step time, so no such reading.
    b = search_boundary(_toy(template), parse_slo("ttft=1000s"), 0.9, 0.0, 10.0, queue_grew=lambda v, run: True)
    assert "no bisection: the lowest request_rate of the bracket, 0, already misses" in b.notes
    assert not any("nearly idle" in n for n in b.notes)

    # On max_num_seqs the lowest value is the tightest engine at the same load, never an idle one: every TTFT 1 s
    # misses 500 ms, and the note only says the lowest value missed.
    def run_at(n: int) -> RunRecords:
        recs = [RequestRecord(str(i), 0.0, 10, 2, 1.0, 1.1) for i in range(10)]
        return RunRecords(recs, RunMetadata("toy", "toy", duration_s=1.0, extra={"max_num_seqs": n}))

    b = search_boundary(run_at, parse_slo("ttft=500ms"), 0.9, 1, 256, axis="max_num_seqs", integer=True)
    assert "no bisection: the lowest max_num_seqs of the bracket, 1, already misses" in b.notes
    assert not any("nearly idle" in n for n in b.notes)
