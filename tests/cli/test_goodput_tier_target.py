"""``goodput --simulate … --target`` with KV tier flags searches the SLO capacity with the tiers (every probe
``goodput --simulate``'s run with the tier flags) and sets the capacity without them beside it, with both 80% bands
and whether the difference is inside the band, as ``kvledger report``'s KV tiers section does on the same workload
(tests/cli/test_report_tier_capacity.py). Before, ``--target`` refused the tier flags."""

from __future__ import annotations

import pytest
from cli_run import MODEL, cli_json, run_cli

# report's case (test_report_tier_capacity.W, less its --api price): 400 requests, each prompt one of 40 documents
# of 1,024 tokens + a 16-token question, 16 output tokens; HBM holds 9,408 tokens (9.2 documents)
W = ["goodput", "--simulate", MODEL, "--gpu", "H100", "--prompt-lengths", "16", "--output-lengths", "16",
     "--num-requests", "400", "--slo", "ttft=300ms", "--document-pool", "40:1024:uniform",
     "--gpu-memory-utilization", "0.24", "--max-model-len", "4096", "--target", "0.9"]


@pytest.fixture(scope="module")
def host8() -> dict:
    return cli_json(*W, "--kv-offloading-size", "8")


def test_the_capacity_with_the_tier_is_the_report_s(host8):
    # the report's search with the 8 GiB host tier (test_report_tier_capacity.test_both_capacities_from_the_search):
    # doubling met the target up to 32 and missed at 64 (83.25%), then 48 ✓, 56 ✓ (93.25%), 60 ✗ (87.25%),
    # 58 ✗ (89.25%), 57 ✓ (90.5%), 57.5 ✓ (90.25%): 57.5 req/s, 58 the first to fail
    b = host8["boundary"]
    assert (b["boundary_value"], b["first_failing_value"]) == (57.5, 58.0)
    assert [p["value"] for p in host8["probes"]] == [1, 2, 4, 8, 16, 32, 64, 48, 56, 60, 58, 57, 57.5]
    assert [p["attainment"] for p in host8["probes"]][6:] == [0.8325, 1.0, 0.9325, 0.8725, 0.8925, 0.905, 0.9025]
    c = host8["kv_tier_capacity"]
    w, wo = c["with_tier"], c["without_tier"]
    assert (w["slo_capacity_req_per_s"], w["sized_on_req_per_s"], w["attainment_at_boundary"]) == (57.5, 57.5, 0.9025)
    assert c["probes_with_tier"] == [[p["value"], p["attainment"], p["meets_target"]] for p in host8["probes"]]
    # beside it the capacity without the tier: the report's headline 35.5 req/s, its band 28.96–39.73 req/s; 57.5 is
    # past 39.73, so outside it
    assert (wo["slo_capacity_req_per_s"], wo["sized_on_req_per_s"]) == (35.5, 35.5)
    assert (round(wo["error_band"]["low"], 2), round(wo["error_band"]["high"], 2)) == (28.96, 39.73)
    assert (round(w["error_band"]["low"], 2), round(w["error_band"]["high"], 2)) == (46.91, 64.36)
    assert c["inside_band"] is False and c["target"] == 0.9
    # the host tier served 66.0% of the 416,000 prompt tokens at 57.5 req/s (the report's hit share there)
    assert w["hit_share"]["host_dram"] == pytest.approx(0.66008, abs=1e-5)
    # and the answer says whose capacity it is
    assert host8["notes"][0].startswith("every probe runs with the KV tiers the flags give")


def test_a_probe_is_goodput_simulate_with_the_tier(host8):
    # the probe at 57.5 req/s is the one run goodput --simulate --rate 57.5 --kv-offloading-size 8 measures (with its
    # twin without the tier): 0.9025, 361 of 400 within 300 ms; the search's probe skips the twin, not the attainment
    one = cli_json(*W[:-2], "--rate", "57.5", "--kv-offloading-size", "8")
    at = next(p for p in host8["runs"] if p["probe"]["value"] == 57.5)
    assert (one["attainment"], one["num_good"]) == (at["attainment"], at["num_good"]) == (0.9025, 361)
    host = next(r for r in one["kv_tiers"]["per_tier"] if r["tier"] == "host_dram")
    assert host["hit_rate"] == host8["kv_tier_capacity"]["with_tier"]["hit_share"]["host_dram"]


def test_a_small_tier_is_inside_the_band():
    # 2 GiB of host offloading holds 16 of the 40 documents; the report's search with it (test_report_tier_capacity
    # .test_a_small_tier_moves_the_capacity_inside_the_band): 39 ✓ (93.5%), 39.5 ✓ (91.25%), 40 ✗ (88.75%): 39.5
    # req/s, inside the 28.96–39.73 band of the 35.5 without it; the words are the report's caption's
    res = run_cli(*W, "--kv-offloading-size", "2", columns=400)
    assert res.exit_code == 0, res.output
    assert "answer: SLO capacity on request_rate for attainment ≥ 90%: 39.5 req/s" in res.output
    assert ("KV tiers: SLO capacity (≥ 90% of requests within the SLO), the same search with the tiers in every probe "
            "(goodput --simulate's run with the tier flags at each rate): 35.5 req/s without the tiers (80% band "
            "28.96–39.73 req/s, uncalibrated roofline) → 39.5 req/s with them") in res.output
    assert ("host_dram 13.9%; the difference is inside the band of the capacity without them: the tiers do not change "
            "the decision.") in res.output
    # then the TTFT there with and without the tier (test_goodput_and_report_give_the_same_block derives it)
    assert ("At 39.5 req/s (the capacity with them) TTFT mean 128.3 ms, p90 289.2 ms with the tiers against 209.8 ms "
            "and 444.4 ms without (the same requests simulated twice).") in res.output


def test_without_tier_flags_no_block():
    # the same search without a tier: 35.5 req/s, and no kv_tier_capacity key
    d = cli_json(*W)
    assert d["boundary"]["boundary_value"] == 35.5 and "kv_tier_capacity" not in d


def test_goodput_and_report_give_the_same_block():
    # one code path (report_tier_capacity.capacity_with_tier): the report's KV tiers capacity block and goodput's
    # kv_tier_capacity are the same object for the same model, GPU, workload, SLO, target and 2 GiB host tier
    g = cli_json(*W, "--kv-offloading-size", "2")["kv_tier_capacity"]
    r = cli_json("report", *W[2:-2], "--api", "OpenAI:gpt-4.1-mini", "--kv-offloading-size", "2")
    assert r["kv_tiers"]["capacity"] == g
    # the TTFT at the capacity chosen (39.5 req/s, with the tier) is goodput --simulate --rate 39.5 with the 2 GiB
    # tier's: mean 128.3 ms, p90 289.2 ms with it against 209.8 ms and 444.4 ms for the same 400 requests without
    # (the host tier serves 13.9% of prompt tokens there, a prefill they skip)
    t = g["ttft_at_capacity"]
    one = cli_json(*W[:-2], "--rate", "39.5", "--kv-offloading-size", "2")["kv_tiers"]
    assert (t["rate_req_per_s"], t["capacity"]) == (39.5, "with_tier")
    assert t["with_tier"] == {"mean_s": one["ttft_s_with_tier"]["mean"], "p90_s": one["ttft_s_with_tier"]["p90"]}
    assert t["without_tier"] == {"mean_s": one["ttft_s_without_tier"]["mean"],
                                 "p90_s": one["ttft_s_without_tier"]["p90"]}
    assert (round(t["with_tier"]["mean_s"] * 1e3, 1), round(t["with_tier"]["p90_s"] * 1e3, 1)) == (128.3, 289.2)
    assert (round(t["without_tier"]["mean_s"] * 1e3, 1), round(t["without_tier"]["p90_s"] * 1e3, 1)) == (209.8, 444.4)

