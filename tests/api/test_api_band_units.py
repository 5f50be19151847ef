"""Each of ``simulate --json``'s ``error_bands`` says its unit: ``predicted``, ``low`` and ``high`` are seconds for the
mean TTFT and TPOT bands but req/s for the throughput band, under the same key names, so a script reading the dict
could not tell them apart without knowing each metric."""

from __future__ import annotations

import kvledger

L8 = "meta-llama/Llama-3.1-8B"


def test_latency_bands_are_in_seconds():
    # 200 requests of 512 in / 64 out at 2 req/s on one H100: far below saturation, so both mean-latency bands
    s = kvledger.simulate(L8, "H100", prompt_lengths="fixed:512", output_lengths="fixed:64", rate=2.0,
                          num_requests=200).to_dict()
    bands = s["error_bands"]
    assert sorted(bands) == ["tpot_mean", "ttft_mean"]
    assert bands["ttft_mean"]["unit"] == bands["tpot_mean"]["unit"] == "s"
    assert bands["ttft_mean"]["predicted"] == s["summary"]["ttft_s"]["mean"]
    assert bands["tpot_mean"]["predicted"] == s["summary"]["tpot_s"]["mean"]


def test_the_throughput_band_is_in_requests_per_second():
    # 500 requests at 200 req/s: the prefill cannot keep up (the queue grows), so only the throughput band, whose
    # predicted figure is the run's throughput_req_per_s
    s = kvledger.simulate(L8, "H100", prompt_lengths="fixed:512", output_lengths="fixed:64", rate=200.0,
                          num_requests=500).to_dict()
    band = s["error_bands"]["throughput"]
    assert list(s["error_bands"]) == ["throughput"] and band["unit"] == "req/s"
    assert band["predicted"] == s["summary"]["throughput_req_per_s"] and band["low"] < band["predicted"] < band["high"]
