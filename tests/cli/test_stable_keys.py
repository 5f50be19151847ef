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
