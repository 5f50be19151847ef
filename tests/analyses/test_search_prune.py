"""A search that decides candidates by analytic bound gives the exhaustive search's answer; the bounds are bounds.

Each search here runs twice, pruned and ``exhaustive=True`` (every planned candidate simulated), on a few GPUs with
60–80 requests per probe: the winner, the runner-up and the margin between them, the ranking of the simulated
candidates, both frontiers and the rejections must be the same, and every figure the exhaustive search simulated must
lie within the bounds its entry carries.
"""

from __future__ import annotations

import functools
from types import SimpleNamespace

import numpy as np
import pytest

from kvledger.analyses.search import Axes, SearchSpec, run_search
from kvledger.analyses.search.prune import key_lower
from kvledger.analyses.serving.work_bounds import SHADE, latency_bounds_s, request_work_s

SEARCHES = {
    # 8B on six GPUs of very different speed and price, a monthly volume of 1 replica each
    "8b-monthly": (SearchSpec(model="meta-llama/Llama-3.1-8B", slo="ttft=500ms,tpot=50ms", num_requests=80,
                              monthly_tokens=300e6),
                   Axes(gpus=("B200", "H100", "L40S", "L4", "A10G", "A100-80GB"), tps=(1, 2, 4))),
    # the same model sized for a rate, ranked by the monthly bill with several replicas; TP 8 on the slow GPUs (L4 and
    # L40S rented as 8-GPU pods, and L40S TP 4, all-reduces over PCIe) is dearer and slower than a simulated H100:
    # decided by bound (priced flat, 0.7 of peak FLOP/s for every matmul: the figures of
    # test_some_searches_decide_candidates_without_simulating_them)
    "8b-rate": (SearchSpec(model="meta-llama/Llama-3.1-8B", slo="ttft=1s,tpot=80ms", num_requests=60,
                           rate_req_per_s=120.0, gemm_efficiency="flat"),
                Axes(gpus=("H100", "L40S", "L4", "A10G"), tps=(1, 2, 4, 8))),
    # ranked by USD per 1k requests at a fixed utilization, a tight TTFT that the slow GPUs miss by bound
    "3b-util": (SearchSpec(model="meta-llama/Llama-3.2-3B", slo="ttft=150ms,tpot=30ms", num_requests=60,
                           utilization=0.5, max_model_len=8192),
                Axes(gpus=("H100", "L4", "T4", "A10G"), tps=(1, 2))),
}


@functools.cache
def _pair(name: str):
    spec, axes = SEARCHES[name]
    return run_search(spec, axes), run_search(spec, axes, exhaustive=True)


@pytest.fixture(scope="module", params=sorted(SEARCHES))
def pair(request):
    """(pruned, exhaustive) results of one search: about 2–4 s each on a 2-core machine, the point of the module."""
    return _pair(request.param)


def test_pruned_search_equals_the_exhaustive_one(pair):
    pruned, full = pair
    simulated = set(pruned.ranking)
    assert pruned.ranking[:2] == full.ranking[:2]
    assert pruned.ranking == [cid for cid in full.ranking if cid in simulated]
    assert pruned.frontier == full.frontier and pruned.cost_frontier == full.cost_frontier
    assert pruned.margin() == full.margin()
    by_id = {e["id"]: e for e in full.entries}
    for e in pruned.entries:  # every decision by bound is one the exhaustive search bears out
        ex = by_id[e["id"]]
        if e["status"] == "bounded":
            assert ex["status"] in ("feasible", "rejected") and e["id"] not in full.ranking[:2]
        elif e.get("decided_by_bound"):  # rejected by its attainment bound
            assert (ex["status"], ex["reason"]) == ("rejected", "SLO not met at any rate")
        else:
            assert e["status"] == ex["status"] and e.get("reason") == ex.get("reason")


def test_every_simulated_figure_lies_within_its_bounds(pair):
    _, full = pair
    checked = 0
    for e in full.entries:
        b = e.get("bounds")
        if e["status"] != "feasible" or b is None:
            continue
        cap = e["capacity"]
        assert cap["goodput_req_per_s"] <= b["capacity_bound_req_per_s"]
        if e.get("sizing"):  # the offered req/s the sizing divides by: the SLO capacity, capped at the bound (prune)
            assert e["sizing"]["sizing_req_per_s"] == min(cap["slo_capacity_req_per_s"], b["capacity_bound_req_per_s"])
        assert cap["tok_per_s_per_user"] <= b["tok_per_s_per_user"]
        for p in cap["operating_points"]:
            assert p["tok_per_s_per_user"] <= b["tok_per_s_per_user"]
            assert p["output_tok_per_s_per_gpu"] <= b["output_tok_per_s_per_gpu"]
        assert b["attainment"] >= cap["attainment"]
        checked += 1
    # at least the two H100 candidates of each search (3b-util's L4 TP 2 misses TTFT 150 ms once its all-reduces run
    # over PCIe at 0.35 of the link: tp_comm.PCIE_ALLREDUCE_SHARE)
    assert checked >= 2


def test_some_searches_decide_candidates_without_simulating_them():
    # 8b-rate (120 req/s, replicas sized at ≤ 80 % of capacity, 730 h a month): the winner is H100 TP 1 at 19.75 req/s
    # (60-request probes above it are too short to show their load: probe_length; 2,000-request probes find 21.25),
    # ⌈120 ÷ (19.75 × 0.8)⌉ = 8 replicas × 1 GPU × $2.69/GPU-h × 730 h = $15,709.6 a month, the runner-up L40S TP 1 at
    # 5.9375 req/s, ⌈120 ÷ 4.75⌉ = 26 × $0.86 × 730 = $16,322.8. The PCIe GPUs' all-reduces run at 0.35 of the host
    # link (tp_comm.PCIE_ALLREDUCE_SHARE), so three of their TP > 1 candidates are decided by bound against that batch
    # (120 req/s ÷ (capacity bound × 0.8) sizes the fewest replicas):
    # * L40S TP 4: capacity ≤ 20.96 req/s, ≥ ⌈120 ÷ 16.77⌉ = 8 replicas × 4 GPUs × $0.86 (RunPod pod) × 730 h =
    #   $20,089.6 > $16,322.8; H100 TP 1 bills less at a better operating point (frontier and cost frontier);
    # * L40S TP 8: ≤ 20.56 req/s, ≥ ⌈120 ÷ 16.45⌉ = 8 × 8 × $0.86 × 730 = $40,179.2, beaten by H100 TP 1 on the
    #   frontier and H100 TP 2 on the cost frontier;
    # * L4 TP 8: ≤ 16.96 req/s, ≥ ⌈120 ÷ 13.57⌉ = 9 × 8 × $0.44 × 730 = $23,126.4, beaten by H100 TP 1 on both.
    # Simulated (the exhaustive search) each bills at least its bound, and L4 TP 8 and L40S TP 8 rank last.
    # A10G at TP ≥ 2 has no row that holds it (AWS g5.xlarge is a one-GPU VM, ledgers/instances.holds_replica):
    # rejected "no instance holds the TP group" at screening, unsimulated (AWS has rows for the A10G: none wide enough).
    res, full = _pair("8b-rate")
    bounded = {e["id"]: e for e in res.entries if e["status"] == "bounded"}
    assert sorted(bounded) == ["nvidia_l40s:tp4:kv-auto", "nvidia_l40s:tp8:kv-auto", "nvidia_l4:tp8:kv-auto"], \
        res.counts()
    assert res.ranking[:2] == ["nvidia_h100_sxm:tp1:kv-auto", "nvidia_l40s:tp1:kv-auto"]
    h1, h2 = "nvidia_h100_sxm:tp1:kv-auto", "nvidia_h100_sxm:tp2:kv-auto"
    for cid, key_lb, by, by_cost in (("nvidia_l40s:tp4:kv-auto", 20089.6, h1, h1),
                                     ("nvidia_l40s:tp8:kv-auto", 40179.2, h1, h2),
                                     ("nvidia_l4:tp8:kv-auto", 23126.4, h1, h1)):
        e, ev = bounded[cid], bounded[cid]["decided_by_bound"]
        assert ev["rank"]["key_lower_bound"] == pytest.approx(key_lb)
        assert ev["rank"]["runner_up"] == "nvidia_l40s:tp1:kv-auto"
        assert ev["rank"]["runner_up_key"] == pytest.approx(16322.8)
        assert ev["rank"]["margin"] == pytest.approx(key_lb / 16322.8 - 1)
        assert (ev["frontier"]["by"], ev["cost_frontier"]["by"]) == (by, by_cost)
        assert ev["cost_frontier"]["margin"] > 0 and ev["frontier"]["margin"] > 0
        assert "capacity" not in e
        assert next(x for x in full.entries if x["id"] == cid)["sizing"]["rental_usd_per_month"] >= key_lb
    assert full.ranking[-2:] == ["nvidia_l4:tp8:kv-auto", "nvidia_l40s:tp8:kv-auto"]
    assert res.to_dict()["screening"]["decided_by_bound"] == 3
    unpriced = [e["id"] for e in res.entries if e.get("reason") == "no instance holds the TP group"]
    assert unpriced == ["nvidia_a10g:tp2:kv-auto", "nvidia_a10g:tp4:kv-auto", "nvidia_a10g:tp8:kv-auto"]
    # 8b-monthly: A100-80GB TP 4 was decided by bound until its decode all-reduces took vLLM's custom kernel's price
    # (tp_comm.py); the monthly search still decides lighter loads by bound.
    assert _pair("8b-monthly")[0].to_dict()["screening"]["lighter_loads_decided_by_bound"] >= 1
    # 3b-util: at TTFT 150 ms, A10G TP 1 has more than 10 % of prompts whose TTFT bound exceeds the SLO: rejected
    # unsimulated (the exhaustive search finds "SLO not met at any rate" too).
    slo = [e for e in _pair("3b-util")[0].entries if e["status"] == "rejected" and e.get("decided_by_bound")]
    assert slo and all(e["decided_by_bound"]["attainment_upper"] < 0.9 for e in slo)


def test_request_work_bound_by_hand():
    # A made-up roofline: 1e9 matmul params per token, 1e8 head FLOPs per sequence, 1e15 FLOP/s at 50 %, 1e5 KV bytes
    # per context token, 1e12 B/s at 50 %, TP 1 (no all-reduce). One request of P = 100 prompt and n = 11 output tokens:
    #   matmul: (2 × 1e9 × (100 + 10) + 1e8 × 11) / 5e14 = 2.211e11 / 5e14 = 4.422e-4 s
    #   KV: its 10 decodes attend to ≥ 100, 101, …, 109 keys and its prefill writes 100:
    #       1e5 × (10 × 100 + 45 + 100) / 5e11 = 1.145e8 / 5e11 = 2.29e-4 s
    #   work ≥ 6.712e-4 s (shaded by 1e-9)
    cost = SimpleNamespace(matmul_params=1e9, head_flops_per_seq=1e8, peak_flops=1e15, flops_fraction=0.5,
                           growing_read_bytes=1e5, bw=1e12, bandwidth_fraction=0.5, num_allreduce_layers=0,
                           allreduce_latency_s=0.0, allreduce_s=lambda t: 0.0, cpu_overhead_s=0.002,
                           overlap_cpu=False, weight_read_bytes=lambda t: 1e9, peak_matmul_efficiency=lambda: 1.0)
    w = request_work_s(cost, np.array([100]), np.array([11]))
    assert w[0] == pytest.approx(6.712e-4 * (1 - SHADE), rel=1e-12)
    # a measured GEMM curve whose best is 0.8 of the fraction's rate: matmul 2.211e11 / (5e14 × 0.8) = 5.5275e-4 s,
    # work ≥ 5.5275e-4 + 2.29e-4 = 7.8175e-4 s (no step of it can run its matmuls faster)
    curved = SimpleNamespace(**{**vars(cost), "peak_matmul_efficiency": lambda: 0.8})
    assert request_work_s(curved, np.array([100]), np.array([11]))[0] == pytest.approx(7.8175e-4 * (1 - SHADE),
                                                                                       rel=1e-12)
    # TTFT: max(2e9 × 100 / 5e14 = 4e-4, weights 1e9 / 5e11 = 2e-3) + 1e5 × 100 / 5e11 = 2e-5 + CPU 2e-3 = 4.02e-3 s
    # TPOT: max(2e9 / 5e14, 2e-3) + 2e-5 + 2e-3 = 4.02e-3 s (one decode step holds the weights read too)
    ttft, tpot = latency_bounds_s(cost, [100], [100])
    assert ttft[0] == pytest.approx(4.02e-3, rel=1e-9) and tpot[0] == pytest.approx(4.02e-3, rel=1e-9)


def test_key_lower_bound_by_hand():
    # capacity ≤ 2.5 req/s, 0.8 max utilization, 3 req/s to serve: replicas ≥ ⌈3 / (2.5 × 0.8)⌉ = ⌈1.5⌉ = 2;
    # 2 replicas × 2 GPUs × $3/GPU-h × 730 h = $8,760 a month; at capacity 2 × 3 × 1000 / (3600 × 2.5) = $0.6667 / 1k
    spec = SearchSpec(model="meta-llama/Llama-3.1-8B", slo="ttft=1s", rate_req_per_s=3.0)
    entry = {"bounds": {"capacity_bound_req_per_s": 2.5}, "num_gpus_per_unit": 2, "price": {"usd_per_gpu_hour": 3.0}}
    monthly, at_cap = key_lower(spec, entry, 3.0)
    assert monthly == pytest.approx(8760.0) and at_cap == pytest.approx(2 * 3 * 1000 / (3600 * 2.5))


def test_latency_bounds_hold_for_every_simulated_request():
    """Each request of a real simulation (a burst of 40 at 50 req/s, so steps mix prefills and decodes) takes at least
    its TTFT and TPOT bounds, priced by the run's own step cost."""
    from dataclasses import replace

    from kvledger.analyses.search.screen import sim_args
    from kvledger.analyses.search.spec import Candidate
    from kvledger.analyses.serving.sim_ledgers import simulate_run
    from kvledger.analyses.serving.sim_setup import prepare

    spec = SearchSpec(model="meta-llama/Llama-3.2-3B", slo="ttft=1s", num_requests=40, utilization=0.5,
                      max_model_len=8192)
    args = replace(sim_args(spec, Candidate("nvidia_a10g", 2)), rate=50.0)
    setup = prepare(args)
    w = setup.workload
    prompt, output = np.asarray(w.num_prompt_tokens), np.asarray(w.num_output_tokens)
    ttft_lb, tpot_lb = latency_bounds_s(setup.cost, prompt, prompt)
    recs = sorted(simulate_run(args).run.records, key=lambda r: r.arrival_s)
    assert len(recs) == len(prompt) == 40
    for r, p, t_lb, d_lb in zip(recs, prompt, ttft_lb, tpot_lb):
        assert r.num_prompt_tokens == p
        assert r.ttft_s >= t_lb and (r.num_output_tokens <= 1 or r.tpot_s >= d_lb)
    work = request_work_s(setup.cost, prompt, output)
    assert recs[-1].finish_s - recs[0].arrival_s >= work.sum()  # one engine: its steps run one after another


def test_decisions_do_not_depend_on_the_number_of_workers(tmp_path):
    """A 2-process pool finishes candidates in another order than one worker; the decisions by bound read the
    simulated candidates in candidate order, so the ledgers are byte-identical (about 5 s: the pool's start-up)."""
    spec, axes = SEARCHES["3b-util"]  # A10G TP 1 is rejected by its TTFT bound there, unsimulated
    one, two = tmp_path / "one.jsonl", tmp_path / "two.jsonl"
    res = run_search(spec, axes, ledger=one, backend="serial")
    run_search(spec, axes, ledger=two, workers=2, backend="pool")
    assert any(e.get("decided_by_bound") for e in res.entries)
    assert two.read_bytes() == one.read_bytes()
