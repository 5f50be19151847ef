"""A build-versus-buy trial at ~3B tokens/month: API rows priced whatever the mix (batch share on demand where a row
has no batch API, cache reads at input price where it lists no cached-input price: "at most"), the break-even sized
for the peak without a volume too, a sweep's bracket instead of an open-ended lower bound, the buyer's conditions in
the answer, the people line against the fleet, a given price on the provider's instances, and the small words."""

from __future__ import annotations

import glob
import json
from pathlib import Path

import pytest
from cli_run import cli_json, refused, run_cli

SWEEP = sorted(glob.glob("tests/evidence/data/inference-perf/stage_*_lifecycle_metrics.json"))
SLO = ["--slo", "ttft=500ms,tpot=50ms"]
DEEPINFRA_8B = "DeepInfra:meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo"
TOGETHER_8B = "Together:meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo"
SHARED_SWEEP = sorted(glob.glob("/work/shared/data/measured-runs/inference-perf-kubecon-na-2025/vllm/results/"
                                "stage_*_lifecycle_metrics.json"))


def _cost_json(*args: str) -> dict:
    return cli_json("cost", *SWEEP, *SLO, "--gpu-provider", "Nebius", *args)


def test_a_row_with_no_batch_api_is_named_and_priced_on_demand_and_no_cached_price_is_an_upper_bound():
    # api_prices.csv DeepInfra 8B: $0.02 in, $0.03 out per Mtok, no batch API, no cached-input price. 2,100 Mtok in and
    # 900 out with a 30% batch share and half the input cached: all on demand at list price,
    # 2,100 × 0.02 + 900 × 0.03 = 42 + 27 = $69.00, at most (the cache reads may cost less)
    d = _cost_json("--api", DEEPINFRA_8B, "--batch-share", "0.3", "--cache-hit-rate", "0.5",
                   "--monthly-input-tokens", "2.1e9", "--monthly-output-tokens", "0.9e9")
    assert d["decision"]["api_usd_per_month"] == pytest.approx(69.0)
    assert d["decision"]["api_usd_per_month_is_upper_bound"] is True
    assert d["headline"][0].startswith("answer: the API, at most $69.00/month on the API vs ")
    assert "no batch API, so the batch share is priced at the on-demand rate" in d["headline"][2]
    # without the cache-hit rate the same $69.00 is exact
    d = _cost_json("--api", DEEPINFRA_8B, "--batch-share", "0.3",
                   "--monthly-input-tokens", "2.1e9", "--monthly-output-tokens", "0.9e9")
    assert d["decision"]["api_usd_per_month"] == pytest.approx(69.0)
    assert d["decision"]["api_usd_per_month_is_upper_bound"] is False
    assert d["headline"][0].startswith("answer: the API — $69.00/month")
    # the batch share is billed on demand, as the self-hosted side serves it: no "at batch prices" caveat or note
    assert not any("at batch prices" in r for r in d["decision"]["rests_on"])
    assert not any(n.startswith("--batch-share 0.3: ") for n in d["notes"])


def test_without_a_volume_the_break_even_is_sized_for_the_peak():
    flat = _cost_json("--engineer-months-per-month", "0", "--api", TOGETHER_8B)["break_even_volume"]
    peak = _cost_json("--engineer-months-per-month", "0", "--api", TOGETHER_8B, "--peak-to-mean", "3")
    bv = peak["break_even_volume"]
    # a replica sized for a peak 3× the mean runs at most 80% ÷ 3 = 26.7% on average
    assert (flat["peak_to_mean"], flat["mean_utilization_cap"]) == (1.0, pytest.approx(0.8))
    assert (bv["peak_to_mean"], bv["mean_utilization_cap"]) == (3.0, pytest.approx(0.8 / 3))
    assert bv["requests_per_month"] > flat["requests_per_month"]  # more replicas for the same volume: later
    assert "replicas sized for a peak 3× the mean: mean utilization ≤ 26.7%" in peak["headline"][0]
    # the volume's answer agrees: just above the break-even at the peak, self-hosting is cheaper
    v = (bv["input_tokens_per_month"] + bv["output_tokens_per_month"]) * 1.05
    d = _cost_json("--engineer-months-per-month", "0", "--api", TOGETHER_8B, "--peak-to-mean", "3",
                   "--monthly-tokens", f"{v:.6g}")
    assert d["decision"]["verdict"] == "self-host"


def test_an_assumed_utilization_above_what_the_peak_allows_is_refused():
    msg = refused("cost", *SWEEP, *SLO, "--gpu-provider", "Nebius", "--utilization", "0.5", "--peak-to-mean", "3")
    assert msg.startswith("--utilization 0.5 with --peak-to-mean 3: a replica sized for a peak 3× the mean runs at "
                          "most --max-utilization 0.8 ÷ 3 = 0.2667 on average")
    d = _cost_json("--utilization", "0.2", "--peak-to-mean", "3", "--api", TOGETHER_8B)
    assert d["break_even_volume"]["peak_to_mean"] == 3.0


def test_the_buyers_conditions_are_carried_in_the_answer():
    d = _cost_json("--monthly-tokens", "3e9", "--data-sovereignty", "required", "--model-control", "custom_weights")
    assert d["decision"]["verdict"] == "API"
    assert d["verdict_conditions"] == ["a provider meets your data-sovereignty requirement",
                                       "a provider hosts your custom weights at this price"]
    assert d["headline"][0].startswith("answer: the API, if a provider meets your data-sovereignty requirement and a "
                                       "provider hosts your custom weights at this price — $")
    assert d["verdict"].startswith("the API, if a provider meets")
    assert _cost_json("--monthly-tokens", "3e9")["verdict_conditions"] == []


def test_a_fleet_large_for_the_people_line_is_warned_with_its_gpus():
    d = _cost_json("--monthly-tokens", "5e12")
    gpus = d["decision"]["replicas"]  # one GPU per replica (the sweep's manifest)
    assert gpus > 64  # 256 GPUs per engineer-month × the default 0.25
    warn = next(h for h in d["headline"] if "WARNING: the people line" in h)
    assert f"0.25 engineer-months/month for {gpus:,} GPUs" in warn
    assert f"about {gpus / 256:,.1f} engineer-months/month" in warn
    assert not any("WARNING: the people line" in h for h in _cost_json("--monthly-tokens", "3e9")["headline"])


def test_a_given_price_keeps_the_providers_instances():
    # llmperf's 70B run on 4 GPUs: Nebius rents H100s in 1-GPU VMs (no NVLink between them: no TP-4 replica) and
    # 8-GPU instances, so one replica is billed a whole 8-GPU instance at the price given: 8 × $2.00 × 730 h = $11,680
    # of rental, plus the default people line 0.25 × $20,000 = $5,000: $16,680
    res = run_cli("cost", "tests/evidence/data/llmperf/leaderboard_individual_anyscale_70b.json", *SLO, "--gpu", "H100",
                  "--gpu-provider", "Nebius", "--num-gpus", "4", "--monthly-tokens", "1e9", "--gpu-usd-per-hour", "2.0",
                  "--api", "Together:meta-llama/Meta-Llama-3.1-70B-Instruct-Turbo", "--json")
    d = json.loads(res.output)["decision"]
    assert (d["replicas"], d["instances"], d["gpus_per_instance"], d["idle_gpus"]) == (1, 1, 8, 4)
    rental = d["self_host_rent"]["items"][0]
    assert (rental["quantity"], rental["unit_price_usd"]) == (pytest.approx(5840.0), 2.0)
    assert d["self_host_usd_per_month"] == pytest.approx(16680.0)


def test_no_people_line_is_not_said_to_cost_more():
    res = run_cli("cost", *SWEEP, *SLO, "--gpu-provider", "Nebius", "--monthly-tokens", "3e9",
                  "--engineer-months-per-month", "0")
    assert res.exit_code == 0
    assert "the people already cost more" not in res.output
    assert "expect the people line to be higher" not in res.output
    assert "the people line is 0 here (--engineer-months-per-month 0)" in res.output


def test_prices_with_a_provider_and_gpu_no_row_has_says_what_each_has():
    msg = refused("prices", "--kind", "gpu", "--provider", "Lambda", "--gpu", "H200")
    assert msg.startswith("no GPU rental row matches --provider Lambda --gpu H200: Lambda's rows rent ")
    assert "H200 is rented by " in msg and "Nebius" in msg


@pytest.mark.skipif(not SHARED_SWEEP, reason="the shared inference-perf sweep is not on this machine")
def test_the_sweeps_boundary_run_is_bracketed_not_open_ended():
    # goodput --target 0.9 on the same files: between 92.19 req/s (meets) and 122.59 req/s (misses), ×1.33
    res = run_cli("cost", *SHARED_SWEEP, "--slo", "ttft=500ms,tpot=50ms", "--monthly-tokens", "3e9",
                  "--peak-to-mean", "3", "--gpu-provider", "Nebius", "--json")
    d = json.loads(res.output)
    assert "UNDER-LOADED" not in " ".join(d["headline"])
    assert d["decision"]["capacity_lower_bound"] is False
    assert d["decision"]["capacity_band_high"] == pytest.approx(122.59 / 92.19)
    assert d["capacity_basis"]["warning"] is None
    assert d["capacity_basis"]["notes"][0].startswith("the measured runs bracket the SLO capacity: between 92.19 req/s")
    assert Path(SHARED_SWEEP[0]).exists()
