"""Keys that apply only to some runs are in every run's `--json`, null where they do not apply, so a script reads them
without `.get()` (an API trial: simulate's `at_knee` and `batch`, plan's `pool_requests` and `goodput FILES --target`'s
boundary keys came and went by case)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_run import MODEL, cli_json, run_cli

STAGES = [str(Path(__file__).resolve().parents[1] / "evidence" / "data" / f"inference-perf/stage_{i}_lifecycle_metrics"
              f".json") for i in range(7)]


def test_simulate_with_every_request_rejected_keeps_batch_and_at_knee_as_null():
    # 5,000-token prompts against max_model_len 4,096: vLLM V1 rejects all 5 requests (exit 1, the JSON still whole)
    res = run_cli("simulate", MODEL, "--gpu", "H100", "--prompt-lengths", "fixed:5000", "--output-lengths", "fixed:10",
                  "--num-requests", "5", "--rate", "1", "--max-model-len", "4096", "--json")
    assert res.exit_code == 1
    d = json.loads(res.stdout)
    assert d["summary"]["num_rejected"] == 5
    assert d["batch"] is None and d["at_knee"] is None  # were left out


def test_plan_rows_within_max_model_len_keep_pool_requests_as_null():
    d = cli_json("plan", MODEL, "--gpu", "H100", "--context", "8K")
    (row,) = d["concurrency"]
    assert row["context_tokens"] == 8192 and row["pool_requests"] is None and row["max_requests"] > 0


def test_goodput_files_target_boundary_has_the_simulated_searchs_keys():
    files = cli_json("goodput", *STAGES, "--slo", "ttft=100ms,tpot=10ms", "--target", "0.9")
    sim = cli_json("goodput", "--simulate", MODEL, "--gpu", "H100", "--prompt-lengths", "fixed:100", "--output-lengths",
                   "fixed:50", "--num-requests", "100", "--slo", "ttft=200ms,tpot=50ms", "--target", "0.9")
    b = files["boundary"]
    assert list(b) == list(sim["boundary"])  # the same keys in the same order
    # the boundary is stage 1, 37.97 req/s (test_goodput_cli.py): its run's goodput, and 37.97 × its attainment (1.0,
    # the lower bound) sustained; one measured server, so no replicas, probes or capacity bound
    good = files["runs"][1]["goodput_req_per_s"]
    assert b["goodput_at_boundary_req_per_s"] == good == pytest.approx(37.676, abs=1e-3)
    assert b["sustained_good_req_per_s_at_boundary"] == pytest.approx(37.97 * files["runs"][1]["attainment"])
    assert b["goodput_at_boundary_req_per_s_per_gpu"] == b["goodput_at_boundary_req_per_s"]  # one GPU per stage
    assert (b["boundary_per_replica"], b["sized_on_req_per_s"], b["capacity_bound_req_per_s"],
            b["num_requests_per_probe"], b["largest_passing_note"]) == (None, None, None, None, None)


def test_simulate_keeps_its_sometimes_keys_as_null_and_fills_them_when_they_apply():
    # one seed, no --client-latency, 20 requests of 100 + 50 tokens at 5 req/s on one H100: no preemption (20 × 150
    # tokens is a sliver of the pool), DP 1, and a run long enough to judge: each of these keys was left out
    args = ["simulate", MODEL, "--gpu", "H100", "--prompt-lengths", "fixed:100", "--output-lengths", "fixed:50",
            "--num-requests", "20", "--rate", "5"]
    d = cli_json(*args)
    keys = ("seed_spread", "client_latency", "too_short", "preemptions", "data_parallel")
    assert [d[k] for k in keys] == [None] * 5 and d["summary"]["num_preemptions"] == 0
    # --client-latency 25ms fills its key in place (the same keys, the same order): 25 ms on every TTFT
    lat = cli_json(*args, "--client-latency", "25ms")
    assert list(lat) == list(d) and lat["client_latency"]["seconds"] == pytest.approx(0.025)


def test_goodput_keeps_all_at_once_as_null_for_a_finite_rate():
    # stage 1 offered 37.97 req/s (finite): all_at_once, true only for an infinite rate, was left out
    run = cli_json("goodput", STAGES[1], "--slo", "ttft=100ms,tpot=10ms")
    assert run["request_rate_req_per_s"] == pytest.approx(37.97) and run["all_at_once"] is None


def test_cost_keeps_the_unbound_sized_rate_as_null_and_monthly_max_utilization_beside_the_api():
    # the SLO capacity is 152 req/s and the capacity bound does not cap it: the three
    # sized-rate keys were left out; now null, as goodput --target's boundary writes them; the bound itself is said
    d = cli_json("cost", "--simulate", MODEL, "--gpu", "H100", "--prompt-lengths", "fixed:100", "--output-lengths",
                 "fixed:50", "--num-requests", "100", "--slo", "ttft=200ms,tpot=50ms", "--api", "OpenAI:gpt-4.1",
                 "--utilization", "0.5")
    cs = d["simulation"]["capacity_search"]
    assert (cs["sized_on_req_per_s"], cs["attainment_at_sized_rate"], cs["goodput_at_sized_rate_req_per_s"]) == (
        None, None, None)
    assert cs["capacity_bound_req_per_s"] == pytest.approx(299.657, rel=1e-5)
    assert cs["capacity_bound_req_per_s"] > cs["slo_capacity_req_per_s"] == 152  # found, below the bound
    # with a volume and an API, `monthly` left out the cap the replicas were sized under (the self-host-only report
    # had it): --max-utilization's default 0.8, the decision's own
    m = cli_json("cost", STAGES[1], "--slo", "ttft=100ms,tpot=10ms", "--gpu", "H100", "--monthly-tokens", "1B",
                 "--api", "OpenAI:gpt-4.1")
    assert m["monthly"]["max_utilization"] == m["decision"]["max_utilization"] == 0.8
