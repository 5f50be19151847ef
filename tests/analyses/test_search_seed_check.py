"""``search --seeds N``: the winner and the runner-up re-evaluated per seed, worked by hand on stand-in entries."""

from __future__ import annotations

from kvledger.analyses.search import seed_check as sc
from kvledger.analyses.search.spec import SearchSpec
from kvledger.analyses.serving.sim_ledgers import SyntheticSpec

SPEC = SearchSpec(model="meta-llama/Llama-3.2-3B", slo="ttft=2s", rate_req_per_s=20.0,
                  synthetic=SyntheticSpec("fixed:512", "fixed:128"))


def _entry(cid: str, goodput: float, bill: float, usd_out: float = 0.1) -> dict:
    return {"id": cid, "status": "feasible",
            "capacity": {"slo_capacity_req_per_s": 2 * goodput, "goodput_req_per_s": goodput},
            "cost": {"usd_per_mtok_output": usd_out, "usd_per_1k_requests": 1.0,
                     "usd_per_1k_requests_at_capacity": 1.0},
            "sizing": {"rental_usd_per_month": bill}}


def test_a_winner_that_loses_its_place_at_a_seed_is_named(monkeypatch):
    # seed 0 (the search's): A $2,000/month, B $2,100. Seed 1: A's capacity falls and it needs a second replica,
    # $4,000 against B's $2,100: B ranks first there. Seed 2: A $2,000, B rejected (no rate met the SLO): A first.
    later = {(1, "A"): _entry("A", 9.0, 4000.0, 0.2), (1, "B"): _entry("B", 11.0, 2100.0),
             (2, "A"): _entry("A", 10.5, 2000.0), (2, "B"): {"id": "B", "status": "rejected"}}
    monkeypatch.setattr("kvledger.analyses.search.evaluate.evaluate_candidate",
                        lambda spec, e: later[(spec.seed, e["id"])])
    got = sc.seed_check(SPEC, [_entry("A", 10.0, 2000.0), _entry("B", 12.0, 2100.0)], [0, 1, 2])
    assert [r["winner_first"] for r in got.per_seed] == [True, False, True] and not got.holds
    assert got.note.startswith("the winner is NOT first at seed 1 of seeds 0–2: the runner-up B ranks before it")
    # the winner's range over the seeds: goodput 9–10.5 good req/s, $0.1–$0.2 per 1M output, bill $2,000–$4,000;
    # the runner-up's over the seeds it was feasible at: 11–12 good req/s
    assert got.winner["goodput_req_per_s"] == {"min": 9.0, "max": 10.5, "n_seeds": 3}
    assert got.winner["rank_value"] == {"min": 2000.0, "max": 4000.0, "n_seeds": 3}
    assert got.runner_up["goodput_req_per_s"] == {"min": 11.0, "max": 12.0, "n_seeds": 3}
    assert got.text().startswith("seed check over seeds 0–2 (re-searched per seed): winner A 9.00–10.50 good req/s, "
                                 "$0.100–$0.200 per 1M output tokens; runner-up B 11.00–12.00 good req/s")


def test_a_trace_at_its_own_arrival_times_is_not_re_run(monkeypatch):
    # azure-conv replays its own arrival times (rescaled to each probe's rate): the seed draws nothing, so the first
    # seed's entries stand for every seed and nothing is evaluated again
    def never(spec, e):
        raise AssertionError("re-evaluated a seed-free workload")

    monkeypatch.setattr("kvledger.analyses.search.evaluate.evaluate_candidate", never)
    spec = SearchSpec(model="meta-llama/Llama-3.2-3B", slo="ttft=2s", rate_req_per_s=20.0, trace="azure-conv")
    got = sc.seed_check(spec, [_entry("A", 10.0, 2000.0)], [0, 1])
    assert got.seed_free and got.holds and got.runner_up is None
    assert got.text() == "seed check over seeds 0–1: the same — the workload draws nothing from the seed"
    assert sc.seed_check(spec, [], [0, 1]) is None
