"""A head of platform's build-or-buy trial of ``cost``: --peak-to-mean P without a volume prices the tokens at the
mean utilization a replica sized for that peak can run at (--max-utilization ÷ P), the bound a given --utilization is
held to, not at --max-utilization itself (which priced them P× too cheap); and two refusals in true words."""

from __future__ import annotations

import pytest
from cli_run import cli_json, run_cli

# a measured llmperf run (Llama-2-70B on 4 GPUs); $2/GPU-h given, no people line, so a good request costs exactly
# 4 GPUs × $2/h ÷ (goodput req/s × 3600 × utilization)
RUN = ["cost", "tests/evidence/data/llmperf/leaderboard_individual_anyscale_70b.json", "--slo", "ttft=500ms,tpot=50ms",
       "--gpu", "H100", "--num-gpus", "4", "--gpu-usd-per-hour", "2", "--engineer-months-per-month", "0"]
API = ["--api", "Together:meta-llama/Llama-3.3-70B-Instruct-Turbo"]


@pytest.mark.parametrize("api", [API, []], ids=["with an API row", "self-hosted alone"])
def test_a_peak_without_a_volume_prices_the_mean_utilization_it_allows(api):
    flat = cli_json(*RUN, *api)
    peak = cli_json(*RUN, *api, "--peak-to-mean", "3")
    goodput = peak["capacity"]["goodput_req_per_s"]  # the file's measured goodput: 1.4028 good req/s
    assert goodput == pytest.approx(1.4028, abs=1e-4)
    # flat traffic: --max-utilization 0.8, as before
    assert flat["inputs"]["utilization"] == pytest.approx(0.8)
    assert flat["inputs"]["utilization_how"] == "assumed: --max-utilization, no volume given"
    # a peak 3× the mean: a replica sized for it runs at most 0.8 ÷ 3 = 0.2667 on the mean (it priced 0.8)
    assert peak["inputs"]["utilization"] == pytest.approx(0.8 / 3)
    assert peak["inputs"]["utilization_how"] == ("assumed: --max-utilization 0.8 ÷ --peak-to-mean 3, no volume "
                                                 "given")
    # $8/h ÷ (1.4028 × 3600 × 0.2667) = $0.0059405 per good request (at 0.8: $0.0019802, three times less)
    per_request = peak["inputs"]["self_host_usd_per_request"]
    assert per_request == pytest.approx(8.0 / (goodput * 3600 * 0.8 / 3), rel=1e-9)
    assert per_request == pytest.approx(0.0059405, abs=1e-7)
    assert per_request == pytest.approx(3 * flat["inputs"]["self_host_usd_per_request"], rel=1e-9)
    # the per-token ledgers scale as 1 ÷ utilization: three times the flat ones
    for side in ("self_host_usd_per_mtok_input", "self_host_usd_per_mtok_output"):
        assert peak["totals"][side] == pytest.approx(3 * flat["totals"][side], rel=1e-9)


def test_the_text_states_the_utilization_the_peak_allows():
    out = " ".join(run_cli(*RUN, *API, "--peak-to-mean", "3").output.split())
    assert ("at 26.7% utilization (assumed: --max-utilization 0.8 ÷ --peak-to-mean 3, no volume given) a good request "
            "costs $0.005940 self-hosted") in out
    assert "at 80.0% utilization" not in out


def test_a_tp_group_on_one_gpu_rows_is_refused_without_naming_a_link_the_gpu_lacks():
    from cli_run import refused

    # L40S has no NVLink (PCIe only): the refusal said "tensor parallel over NVLink"; Nebius lists it in 1-GPU machines
    msg = refused("cost", "--simulate", "meta-llama/Llama-3.1-8B", "--gpu", "L40S", "--tp", "2", "--gpu-provider",
                  "Nebius", "--slo", "ttft=1s")
    assert msg.startswith("a replica of 2 GPUs (one tensor-parallel group, linked inside one machine) must sit on one "
                          "instance, and no price row considered has that many GPUs per instance: Nebius:gpu-l40s-a "
                          "1gpu-8vcpu (1 GPU per instance, a one-GPU machine)")
    assert "NVLink" not in msg


def test_cache_shares_above_one_are_refused_by_their_flags():
    from cli_run import refused

    # 0.7 of the input tokens read from the cache + 0.5 written to it = 1.2 of them: the error named Python fields
    msg = refused(*RUN, *API, "--cache-hit-rate", "0.7", "--cache-write-rate", "0.5")
    assert msg == ("--cache-hit-rate 0.7 + --cache-write-rate 0.5 = 1.2 exceeds 1: both are shares of the same input "
                   "tokens (read from the prompt cache, written to it); lower one so they sum to 1 or less")


def test_a_marketplace_rows_tp_replica_is_said_to_be_one_pod():
    # no provider: RunPod's one-GPU "Secure Cloud pod" row is the cheapest H100 ($2.69/GPU-h); a marketplace rents a
    # pod of 4 GPUs for a TP-4 replica (a one-GPU VM row is refused for it), which the answer did not say — it read as
    # four one-GPU machines. 4 × 730 h × $2.69 = $7,854.80 + $5,000 of people = $12,854.80
    out = " ".join(run_cli(*RUN[:8]).output.split())
    assert ("self-hosted, one replica × 4 GPUs as one 4-GPU pod each (billed per GPU) (RunPod H100 80GB SXM (Secure "
            "Cloud pod, on_demand), $2.69/GPU-h): $12,854.80/month, people included") in out
