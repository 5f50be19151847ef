"""``analyses.serving.seed_spread``: which runs draw from the seed, the min–max of a figure over seeds, when the note
comes, and a capacity search's spread, on hand-made summaries and searches."""

from __future__ import annotations

from types import SimpleNamespace

from kvledger.analyses.serving.seed_spread import (
    capacity_spread,
    seed_list,
    seed_used,
    summary_spread,
    value_spread,
)
from kvledger.analyses.serving.sim_setup import SimRequestArgs


def _args(**kw) -> SimRequestArgs:
    return SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="H100", **kw)


def test_seed_list_counts_up_from_the_first():
    assert seed_list(7, 3) == [7, 8, 9] and seed_list(0, 1) == [0]


def test_only_a_draw_makes_the_seed_matter():
    synthetic = SimpleNamespace(prompt="fixed:512", output="fixed:128", cv=1.0)
    assert seed_used(_args(rate=5.0), synthetic)  # synthetic: Poisson gaps drawn (fixed lengths draw nothing)
    at_interval = SimpleNamespace(prompt="fixed:512", output="fixed:128", cv=0.0)
    assert not seed_used(_args(rate=5.0), at_interval)  # fixed lengths, one request every 0.2 s: nothing drawn
    assert not seed_used(_args(concurrency=8), synthetic)  # fixed lengths in a closed loop: no gap drawn either
    drawn = SimpleNamespace(prompt="uniform:1:512", output="fixed:128", cv=0.0)
    assert seed_used(_args(rate=5.0), drawn)  # a length distribution is a draw, even at a fixed interval
    assert seed_used(_args(), sessions=True)  # sessions: starts, turns and lengths drawn
    assert not seed_used(_args(trace="azure-conv"))  # the trace's own arrival times
    assert not seed_used(_args(trace="azure-conv", rate=20.0))  # ... rescaled: burstiness kept, nothing drawn
    assert seed_used(_args(trace="arxiv", rate=2.0))  # lengths only: Poisson gaps drawn
    assert not seed_used(_args(trace="arxiv", rate=float("inf")))  # every request at t = 0
    assert not seed_used(_args(trace="arxiv", concurrency=8))  # a closed loop over the trace


def test_a_figure_some_seeds_lack_spans_those_that_have_it():
    assert value_spread([3.0, 1.0, 2.0]) == {"min": 1.0, "max": 3.0, "n_seeds": 3}
    assert value_spread([None, 2.0, 4.0]) == {"min": 2.0, "max": 4.0, "n_seeds": 3}
    assert value_spread([None, None]) == {"min": None, "max": None, "n_seeds": 2}


def _summary(ttft: float, tpot: float, thr: float) -> dict:
    lat = {"mean": 0.0, "p50": 0.0, "p90": 0.0, "p99": 0.0}
    return {"ttft_s": {**lat, "mean": ttft}, "tpot_s": {**lat, "mean": tpot}, "itl_s": lat, "e2e_s": lat,
            "throughput_req_per_s": thr, "kv_usage": {"mean": 0.1, "max": 0.2}}


def test_the_note_names_the_banded_figures_past_ten_percent():
    # seed 0: TTFT 100 ms, TPOT 10 ms, 50 req/s. Seeds 1 and 2: TTFT 95 and 112 ms (spread 17 ms = 17 % of 100: noted,
    # −5 % to +12 %), TPOT 10.5 and 9.6 ms (0.9 ms = 9 %: not), throughput 44 and 51 (7 = 14 %: noted, −12 % to +2 %).
    others = {1: _summary(0.095, 0.0105, 44.0), 2: _summary(0.112, 0.0096, 51.0)}
    s = summary_spread(_summary(0.100, 0.010, 50.0), [0, 1, 2], others.__getitem__, kept_up=False)
    assert s.metrics["ttft_s.mean"] == {"min": 0.095, "max": 0.112, "n_seeds": 3}
    assert set(s.wide) == {"TTFT mean", "throughput"}
    assert s.note.startswith("TTFT mean -5% to +12%, throughput -12% to +2% of the first seed's figure over seeds 0–2")
    # kept up: the throughput is the offered load, whose spread is the arrival count's: not noted
    kept = summary_spread(_summary(0.100, 0.010, 50.0), [0, 1, 2], others.__getitem__, kept_up=True)
    assert set(kept.wide) == {"TTFT mean"} and "--num-requests" in kept.note


def test_a_seed_free_run_stands_for_every_seed_and_is_run_once():
    s = summary_spread(_summary(0.1, 0.01, 5.0), [0, 1, 2], None, kept_up=True)  # no run_seed: nothing more runs
    assert s.seed_free and s.note is None
    assert s.metrics["ttft_s.mean"] == {"min": 0.1, "max": 0.1, "n_seeds": 3}


def _search(value: float | None, per_gpu: float | None = None, goodput: float | None = None):
    return SimpleNamespace(boundary=SimpleNamespace(boundary_value=value), boundary_per_gpu=per_gpu,
                           goodput_at_boundary_req_per_s=goodput)


def test_a_capacity_spread_lists_each_seeds_capacity():
    # 20 req/s at seed 4; 18 and 21 at seeds 5 and 6: 3 req/s = 15 % of 20, noted as −10 % to +5 %
    others = {5: _search(18.0, 9.0, 16.0), 6: _search(21.0, 10.5, 19.0)}
    c = capacity_spread(_search(20.0, 10.0, 18.0), [4, 5, 6], others.__getitem__)
    assert c.boundaries() == [{"seed": 4, "boundary_value": 20.0}, {"seed": 5, "boundary_value": 18.0},
                              {"seed": 6, "boundary_value": 21.0}]
    assert c.to_dict()["boundary_value"] == {"min": 18.0, "max": 21.0, "n_seeds": 3}
    assert c.to_dict()["boundary_per_gpu"] == {"min": 9.0, "max": 10.5, "n_seeds": 3}
    assert c.note.startswith("the SLO capacity moves -10% to +5% of the first seed's over seeds 4–6")
    # a seed that finds none where the first did: said, and left out of the range
    gone = capacity_spread(_search(20.0), [0, 1], {1: _search(None)}.__getitem__)
    assert gone.to_dict()["boundary_value"] == {"min": 20.0, "max": 20.0, "n_seeds": 2}
    assert "found no SLO capacity" in gone.note
