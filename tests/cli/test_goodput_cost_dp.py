"""`goodput --simulate` and `cost --simulate` take `--data-parallel-size N --enable-expert-parallel` through the path
`simulate` takes (dp_flags.with_dp → sim_dp.py): the same lock-step ranks, so the same capacity as `search` finds for
the DP candidate (test_search_dp.py), priced on DP × TP GPUs."""

from __future__ import annotations

import pytest
from cli_run import cli_json, refused, run_cli, strict_json_file

DP8 = ("deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--tp", "1", "-dp", "8", "--enable-expert-parallel",
       "--slo", "ttft=2s,tpot=100ms", "--num-requests", "50")


@pytest.fixture(scope="module")
def dp8_target(tmp_path_factory):
    """``goodput --simulate DP8 --target 0.9`` run once for this module's four checks of it: (the result, its text on
    stdout; the JSON document --out wrote, the one --json prints)."""
    path = tmp_path_factory.mktemp("dp8") / "goodput.json"
    res = run_cli("goodput", "--simulate", *DP8, "--target", "0.9", "--out", str(path))
    assert res.exit_code == 0, res.output
    return res, strict_json_file(path)


def test_goodput_target_finds_the_search_candidates_capacity_per_eight_gpus(dp8_target):
    d = dp8_target[1]
    b = d["boundary"]
    # the rate search over the DP 8 ranks in lock-step: 4.8125 req/s, as search's nvidia_h200_sxm:dp8xtp1:kv-auto:ep
    # (same flags, 50 requests, seed 0); per GPU over DP × TP = 8 GPUs: 4.8125 / 8 = 0.6015625
    assert b["boundary_value"] == 4.8125 and b["boundary_per_gpu"] == pytest.approx(4.8125 / 8)
    assert any("8 GPUs = 1 replica × DP 8 × TP 1" in n for n in b["notes"] + d["notes"])


def test_goodput_text_names_the_dp_ranks(dp8_target):
    out = dp8_target[0].output
    # 8 GPUs = DP 8 ranks × TP 1 (not "TP 8": 8 GPUs ÷ 1 replica), each rank its own pool of 25,387 blocks
    assert "probes (8 GPUs = 1 replica × DP 8 × TP 1)" in out
    assert "on 8× NVIDIA H200 141GB SXM5 (DP 8 × TP 1 × 1 replica)" in out
    assert "25,387 blocks × 16 tokens per DP rank (" in out


def test_cost_sizes_replicas_of_eight_gpus():
    d = cli_json("cost", "--simulate", *DP8, "--gpu-provider", "CoreWeave", "--monthly-tokens", "10B")
    assert d["simulation"]["num_gpus"] == 8 and d["capacity"]["slo_capacity_req_per_s"] == 4.8125
    # 10B tokens a month at 705 + 116 tokens per request = 12.18M requests = 4.636 req/s over 730 h; at 80% of
    # 4.8125 req/s per replica: ⌈4.636 / 3.85⌉ = 2 replicas of 8 GPUs, 2 × 8 × 730 h = 11,680 GPU-h at $6.305
    # (CoreWeave's 8x H200 instance, $50.44/h) = $73,642.40 a month, as search bills the DP candidate
    assert d["monthly"]["replicas"] == 2
    rent = d["monthly"]["self_host"]["items"][0]
    assert rent["quantity"] == 11_680 and rent["amount_usd"] == pytest.approx(73_642.4)


def test_files_refuse_the_dp_ranks(tmp_path):
    said = refused("goodput", str(tmp_path / "none.json"), "--slo", "ttft=1s", "-dp", "8")
    assert "--data-parallel-size 8 applies to --simulate" in said


def test_text_names_the_dp_ranks_and_the_pool_per_rank(dp8_target):
    r = dp8_target[0]
    text = " ".join(r.stdout.split())
    # 8 GPUs = 1 replica of 8 DP ranks × TP 1 (8 ÷ 1 ÷ 8 = TP 1), not "1 replica × TP 8"
    assert r.exit_code == 0 and "probes (8 GPUs = 1 replica × DP 8 × TP 1)" in text and "× TP 8" not in text
    # the memory source is one rank's pool: 406,192 tokens a rank (`plan -dp 8`) = 25,387 blocks × 16 tokens;
    # the replica holds 8 × that, so "per replica" would understate it eightfold
    assert "(DP 8 × TP 1 × 1 replica)" in text and "25,387 blocks × 16 tokens per DP rank" in text
    assert "tokens per replica" not in text


def test_the_capacity_band_says_no_measured_run_had_data_parallelism(dp8_target):
    d = dp8_target[1]
    # the bands come from 24 vLLM deployments without DP ranks: the band of a DP capacity is a floor, and says so
    # (the H200 clause already calls it a floor: said once)
    src = d["error_band"]["source"]
    assert "measured on runs without data parallelism (none with it)" in src
    assert src.count("a floor for the error there") == 1
