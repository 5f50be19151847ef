"""search rejects a candidate as "ITL unreachable" where the ITL misses alone keep even the lightest load it probes
below the target under a token budget whose full-chunk step is over the limit (``itl_budget.itl_unreachable``), and
keeps one ranked, with the token-budget warning, where a lighter load does meet the target (the fresh-user trial's
azure-conv case: there the budget's misses fall with the load, so the candidate is slow, not unreachable)."""

from __future__ import annotations

import json

import pytest
from cli_run import cli_json, run_cli

from kvledger.analyses.serving.itl_budget import ItlBudget

BASE = ("search", "meta-llama/Llama-3.1-70B-Instruct", "--gpus", "H100", "--tp", "4", "--engine-version", "0.10.1",
        "--slo", "itl=100ms", "--target", "0.9", "--num-requests", "300", "--rate", "10")


def test_ties_that_every_rate_keeps_together_make_the_itl_limit_unreachable_and_the_budget_named_lifts_it():
    # Mooncake's first 300 requests carry millisecond stamps: 265 of their 299 gaps are 0, and scaling the rate scales
    # every gap, so those requests arrive together at any rate and one's decode shares a step with another's prefill
    # chunk. The attainment halves down from 1 req/s and stays at 16.3 % (49 of 300 good) from 0.125 down to the
    # search's lightest probe, 1/1024 req/s (ten halvings): 251 missed itl ≤ 100 ms there, past the 30 (10 % of 300)
    # a 90 % target allows. The step: the last 8,191-token chunk of the longest prompt (120,633 tokens) beside one
    # decode, 1.408 s in the roofline step cost, 14.1× the limit; the first halving of 8,192 under 100 ms is 256
    # (58.19 ms), within this candidate's max_num_seqs 256, so no cap is named (the default 1,024 needs one: below).
    res = run_cli(*BASE, "--trace", "mooncake", "--max-num-batched-tokens", "256,8192", "--max-num-seqs", "256",
                  "--json")
    d = json.loads(res.stdout)
    by_id = {e["id"]: e for e in d["candidates"]}
    bad = by_id["nvidia_h100_sxm:tp4:kv-auto:seqs-256:mnbt-8192"]
    assert (bad["status"], bad["reason"]) == ("rejected", "ITL unreachable") and "sizing" not in bad
    assert bad["detail"].startswith("at 0.000977 req/s, the lightest load probed, 251 of 300 requests missed itl_max "
                                    "≤ 100.00 ms, more than the 30 a 90% target allows")
    assert "(the last chunk of the longest prompt, 120,633 tokens) takes 1.408 s" in bad["detail"]
    assert "14.1× the limit" in bad["detail"]
    assert "--max-num-batched-tokens 256 caps such a step at 58.19 ms" in bad["detail"]
    assert bad["capacity"]["probes"][-1] == [0.0009765625, pytest.approx(49 / 300)]
    assert d["rejections"] == [{"reason": "ITL unreachable", "count": 1, "ids": [bad["id"]]}]
    # the budget it names, simulated: every probe up to 1 req/s has all 300 within the limit, and it is the winner
    good = by_id["nvidia_h100_sxm:tp4:kv-auto:seqs-256:mnbt-256"]
    assert good["status"] == "feasible" and good["capacity"]["probes"][0] == [1.0, 1.0]
    assert d["winner"]["id"] == good["id"] and res.exit_code == 0


def test_no_winner_names_the_budget_and_exits_1():
    res = run_cli(*BASE, "--trace", "mooncake", "--json")
    d = json.loads(res.stdout)
    assert res.exit_code == 1 and d["winner"] is None
    # the default max_num_seqs, 1,024 (vLLM 0.10.1 on a ≥ 70 GiB GPU), is above the 256-token budget vLLM would refuse
    (e,) = d["candidates"]
    assert e["reason"] == "ITL unreachable" and ("--max-num-batched-tokens 256 with --max-num-seqs 256 or fewer (vLLM "
                                                 "refuses a budget below max_num_seqs, 1,024 here") in e["detail"]
    assert d["no_winner_reason"].endswith("; for those ITL unreachable, the smaller --max-num-batched-tokens each "
                                          "one's reason names)")


def test_the_trials_azure_conv_candidate_is_reachable_at_a_lighter_load_so_it_stays_ranked_with_the_warning():
    # azure-conv's first 300 have no tied arrivals (smallest gap 21 µs at its own rate): as the rate falls the gaps
    # part the decodes from the prefills, and 0.25 req/s has 275 of 300 (91.7 %) within itl ≤ 100 ms, so the capacity
    # is 0.289 req/s (goodput --target's figure, tests/cli/test_goodput_itl_budget.py), priced with the warning
    d = cli_json(*BASE, "--trace", "azure-conv", "--max-model-len", "32768")
    (e,) = d["candidates"]
    assert e["status"] == "feasible" and e["capacity"]["slo_capacity_req_per_s"] == pytest.approx(0.2890625)
    assert [0.25, pytest.approx(275 / 300)] in e["capacity"]["probes"]
    assert any(n.startswith("ITL set by the token budget: at 0.25 req/s") for n in e["capacity"]["notes"])
    assert d["rejections"] == []


def test_blocks_compares_the_best_attainment_as_the_boundary_search_does():
    # 30 of 300 missing leaves at most 270 / 300 = 0.9 good, which meets a 0.9 target (attainment ≥ target); 31 does
    # not (269 / 300 = 0.8967)
    def found(missed: int) -> ItlBudget:
        return ItlBudget(missed, 300, "itl_max", 0.1, 8192, 4107, 0.27, 1024, 0.081, 1024)

    assert not found(30).blocks(0.9) and found(31).blocks(0.9)
