"""Configuration search: rejections with their numbers, sizing, the winner's launch command against `kvledger plan`,
the frontier.

Searches here are tiny (a handful of candidates, 60–100 requests per probe, a loose SLO) so each
runs in about a second; the figures checked are worked out by hand in the comments.
"""

from __future__ import annotations

import json
import shlex

import pytest
from typer.testing import CliRunner

from kvledger.analyses.search import Axes, SearchSpec, run_search
from kvledger.analyses.search.evaluate import size_for_load
from kvledger.analyses.search.rank import pareto
from kvledger.cli.main import app

SLO = "ttft=2s,tpot=100ms"
GiB = 2**30


@pytest.fixture(scope="module")
def llama70b():
    """Llama-3.1-70B on two 80 GB parts at TP 1 and 2, max_model_len 8K (a short context lets TP 2 hold requests)."""
    spec = SearchSpec(model="meta-llama/Llama-3.1-70B", slo=SLO, num_requests=60, max_model_len=8192, utilization=0.5)
    return run_search(spec, Axes(gpus=("H100", "A100-80GB"), tps=(1, 2)))


def test_model_that_needs_two_80gb_gpus_is_never_offered_at_tp1(llama70b):
    # 70,553,706,496 parameters × 2 B (bf16) = 131.4 GiB of weights: more than an 80 GB part holds at any
    # utilization, so TP 1 is rejected as "does not fit" with a negative KV budget; TP 2 holds 65.7 GiB per GPU.
    by_id = {e["id"]: e for e in llama70b.entries}
    for gpu in ("nvidia_h100_sxm", "nvidia_a100_80gb_sxm"):
        tp1 = by_id[f"{gpu}:tp1:kv-auto"]
        assert tp1["status"] == "rejected" and tp1["reason"] == "does not fit"
        assert tp1["plan"]["available_kv_bytes"] < 0 and tp1["plan"]["weight_bytes_model"] > 80e9
        assert "weights 131.45 GiB" in tp1["detail"]
        tp2 = by_id[f"{gpu}:tp2:kv-auto"]
        assert tp2["status"] == "feasible"
        # per GPU at TP 2: half the model's 141,107,412,992 B plus what TP does not split (norms, the RoPE cos/sin
        # buffer: well under 0.1 GiB); the KV figure beside it is per GPU too: 80 layers × 8 KV heads ÷ 2 × 128 × 2
        # (K, V) × 2 B = 163,840 B per token
        half = tp2["plan"]["weight_bytes_model"] / 2
        assert half < tp2["plan"]["weight_bytes_per_gpu"] < half + 0.1 * 2**30
        assert tp2["plan"]["kv_bytes_per_token_per_gpu"] == 163840
    assert llama70b.ranking and all(":tp1:" not in cid for cid in llama70b.ranking)
    assert llama70b.counts() == {"does not fit": 2, "feasible": 2}


def test_winner_launch_command_reproduces_its_plan(llama70b):
    """`kvledger plan` with the winner's vLLM flags gives the same KV blocks the search simulated."""
    w = llama70b.winner
    vllm = shlex.split(w["launch"]["vllm"])
    assert vllm[:3] == ["vllm", "serve", "meta-llama/Llama-3.1-70B"]  # the Hub id the spec gave, not the catalog file's
    flags = vllm[3:]
    assert flags[flags.index("--tensor-parallel-size") + 1] == "2"
    assert flags[flags.index("--max-model-len") + 1] == "8192"
    check = shlex.split(w["launch"]["check"])
    assert check[:2] == ["kvledger", "plan"] and check[check.index("--gpu") + 2:] == flags  # the same flags, verbatim
    res = CliRunner().invoke(app, [*check[1:], "--json"])
    assert res.exit_code == 0, res.output
    plan = json.loads(res.output)
    assert plan["memory"]["num_gpu_blocks"] == w["plan"]["num_gpu_blocks"]
    assert plan["memory"]["max_num_seqs"] == w["plan"]["max_num_seqs"]


def test_max_model_len_and_price_rejections_carry_their_numbers():
    # Llama-3.2-3B on an L4 at its configured 131,072 tokens: one request needs 131,072 / 16 = 8,192 blocks and the
    # pool holds fewer — `kvledger plan` gives the usable blocks (7,459 under vLLM 0.33's rules) — so vLLM would not
    # start: "max_model_len".
    # Nebius lists no A100 row: "no price row" (the plan itself fits: 80 GB holds the 3B's 128K context).
    spec = SearchSpec(model="meta-llama/Llama-3.2-3B", slo=SLO, num_requests=60, utilization=0.5, gpu_provider="Nebius")
    res = run_search(spec, Axes(gpus=("L4", "A100-80GB"), tps=(1,)))
    l4, a100 = res.entries
    assert (l4["reason"], a100["reason"]) == ("max_model_len", "no price row")
    plan = json.loads(CliRunner().invoke(app, ["plan", "meta-llama/Llama-3.2-3B", "--gpu", "L4", "--json"]).output)
    usable = plan["memory"]["usable_blocks"]
    assert usable < 8192 and "needs 8,192 blocks" in l4["detail"] and f"{usable:,} usable blocks" in l4["detail"]
    assert (
        "no rental row for nvidia_a100_80gb_sxm at Nebius" in a100["detail"] and a100["plan"]["num_gpu_blocks"] > 8192
    )
    assert res.ranking == [] and res.winner is None


def test_slo_not_met_at_any_rate_is_a_rejection():
    # A 1 ms TTFT cannot be met: prefilling ~800 prompt tokens of a 3B model alone takes longer on an L4.
    spec = SearchSpec(model="meta-llama/Llama-3.2-3B", slo="ttft=1ms", num_requests=60, max_model_len=8192,
                      utilization=0.5)
    (e,) = run_search(spec, Axes(gpus=("L4",), tps=(1,)), exhaustive=True).entries
    assert e["status"] == "rejected" and e["reason"] == "SLO not met at any rate"
    assert "0.0%" in e["detail"] and len(e["capacity"]["probes"]) > 5
    # without --exhaustive its TTFT lower bound (kvledger.analyses.search.bounds) already exceeds 1 ms for every
    # request — one step reads the L4's 6.4 GB of weights at 80 % of 300 GB/s, about 27 ms — so nothing is simulated
    (e,) = run_search(spec, Axes(gpus=("L4",), tps=(1,))).entries
    assert (e["status"], e["reason"]) == ("rejected", "SLO not met at any rate") and "capacity" not in e
    assert e["decided_by_bound"]["attainment_upper"] == 0.0 and "at most 0.0% of requests" in e["detail"]


def test_doubling_the_rate_doubles_the_replicas():
    """Same candidate, same seeded workload → same per-replica SLO capacity c (offered req/s); with max_utilization
    0.8 a load of 2.9 × 0.8 × c needs ⌈2.9⌉ = 3 replicas and twice that load ⌈5.8⌉ = 6."""
    base = dict(model="meta-llama/Llama-3.2-3B", slo=SLO, num_requests=60, max_model_len=8192)
    axes = Axes(gpus=("L4",), tps=(1,))
    cap = run_search(SearchSpec(**base, utilization=0.5), axes).entries[0]["capacity"]["slo_capacity_req_per_s"]
    one = run_search(SearchSpec(**base, rate_req_per_s=2.9 * 0.8 * cap), axes).entries[0]
    two = run_search(SearchSpec(**base, rate_req_per_s=5.8 * 0.8 * cap), axes).entries[0]
    assert one["capacity"]["slo_capacity_req_per_s"] == two["capacity"]["slo_capacity_req_per_s"] == cap
    assert (one["sizing"]["replicas"], two["sizing"]["replicas"]) == (3, 6)
    assert two["sizing"]["rental_usd_per_month"] == pytest.approx(2 * one["sizing"]["rental_usd_per_month"])
    # bill = 6 GPUs × the L4's cheapest row ($0.44/GPU-h, RunPod) × 730 h = $1,927.20
    assert two["sizing"]["rental_usd_per_month"] == pytest.approx(6 * 0.44 * 730)
    assert one["cost"]["utilization"] == pytest.approx(2.9 * 0.8 / 3)


def test_size_for_load_arithmetic():
    assert size_for_load(10.0, 5.0, 0.8) == (3, pytest.approx(10 / 15))  # 10 ÷ (5 × 0.8) = 2.5 → 3
    assert size_for_load(8.0, 5.0, 0.8)[0] == 2  # exactly 2.0: no round-up from float noise
    assert size_for_load(0.001, 5.0, 0.8)[0] == 1


def test_offered_load_is_sized_on_the_slo_capacity_not_on_the_goodput():
    # The fresh-user trial's case: Llama-3.1-8B on an H100, azure-conv, ttft ≤ 500 ms, tpot ≤ 50 ms, 90%: SLO capacity
    # 21 req/s offered (goodput --target), 18.158 good req/s there. 30 req/s offered at ≤ 80%:
    # ⌈30 ÷ (21 × 0.8)⌉ = ⌈30 ÷ 16.8⌉ = ⌈1.786⌉ = 2 replicas, realized 30 ÷ (2 × 21) = 71.4%.
    # The old rule divided offered load by good-only throughput, applying the target twice:
    # ⌈30 ÷ (18.158 × 0.8)⌉ = ⌈30 ÷ 14.53⌉ = ⌈2.065⌉ = 3 replicas (50% more GPUs).
    assert size_for_load(30.0, 21.0, 0.8) == (2, pytest.approx(0.7142857, abs=1e-7))
    assert size_for_load(30.0, 18.158, 0.8)[0] == 3  # the contrast: what sizing on good req/s bought


def test_pareto_over_operating_points_names_a_dominating_candidate():
    def e(cid, *pts):
        return {"id": cid, "capacity": {"operating_points": [
            {"rate_req_per_s": r, "tok_per_s_per_user": x, "output_tok_per_s_per_gpu": y} for r, x, y in pts]}}

    # a: two loads, both on the frontier; b: its heavy load is beaten by a's, its light load is the fastest per user;
    # c: every point beaten (its capacity point (10, 90) by a's (10, 100)); d: equal to nothing, lowest throughput.
    entries = [e("a", (2, 10, 100), (1, 20, 60)), e("b", (2, 9, 80), (1, 30, 20)), e("c", (2, 10, 90), (1, 15, 50))]
    front, dom = pareto(entries)
    assert [(p["id"], p["tok_per_s_per_user"]) for p in front] == [("a", 10), ("a", 20), ("b", 30)]
    assert dom == [{"id": "c", "dominated_by": "a"}]


def test_disaggregated_units_are_planned_simulated_and_commanded():
    """--disagg adds units of P prefill + D decode engines: GPUs per unit = P × prefill TP + D × decode TP (1 × 1 + 2 ×
    2
    = 5), each pool planned on its own (at TP 2 each GPU holds half the weights, so more KV blocks than at TP 1), KV
    over PCIe (the L4 has no NVLink in the catalog), one launch line per pool with vLLM's NIXL connector config."""
    spec = SearchSpec(model="meta-llama/Llama-3.2-3B", slo=SLO, num_requests=60, max_model_len=8192, utilization=0.5)
    res = run_search(spec, Axes(gpus=("L4",), tps=(1, 2), disagg_splits=((1, 2),)))
    ids = [e["id"] for e in res.entries]
    assert ids == ["nvidia_l4:tp1:kv-auto", "nvidia_l4:tp2:kv-auto", "nvidia_l4:p1xtp1+d2xtp1:kv-auto",
                   "nvidia_l4:p1xtp1+d2xtp2:kv-auto", "nvidia_l4:p1xtp2+d2xtp1:kv-auto",
                       "nvidia_l4:p1xtp2+d2xtp2:kv-auto"]
    e = res.entry("nvidia_l4:p1xtp1+d2xtp2:kv-auto")
    assert e["status"] == "feasible" and e["layout"] == "(p)1×tp1 + (d)2×tp2" and e["num_gpus_per_unit"] == 5
    assert e["plan"]["num_gpu_blocks"] < e["decode_plan"]["num_gpu_blocks"]  # TP 2 halves the weights per GPU
    vllm = e["launch"]["vllm"].splitlines()
    assert vllm[0].startswith("prefill ×1: vllm serve") and vllm[1].startswith("decode ×2: vllm serve")
    assert "--tensor-parallel-size 2" in vllm[1] and "NixlConnector" in vllm[1]
    assert e["capacity"]["goodput_output_tok_per_s_per_gpu"] == pytest.approx(
        e["capacity"]["goodput_output_tok_per_s"] / 5
    )
    assert e["capacity"]["kv_link"].startswith("pcie: ")


def test_monthly_tokens_and_api_bill_with_discounts():
    """--monthly-tokens V → V ÷ ((mean in + mean out) × 730 h × 3600 s) req/s; the API bill of that traffic after a
    50 % batch share at gpt-4.1's 50 % batch discount is 75 % of list: (in × $2 + out × $8) per Mtok × 0.75."""
    from kvledger.analyses.search.api_side import api_side as _api
    from kvledger.analyses.search.evaluate import load_rate_req_per_s

    spec = SearchSpec(model="m", slo=SLO, monthly_tokens=2.628e9, api="OpenAI:gpt-4.1", batch_share=0.5)
    rate = load_rate_req_per_s(spec, 800.0, 200.0)
    assert rate == pytest.approx(2.628e9 / (1000 * 2_628_000))  # = 1 req/s
    a = _api(spec, [{"workload": {"prompt_tokens_mean": 800.0, "output_tokens_mean": 200.0}}])
    assert a["monthly_input_tokens"] == pytest.approx(800 * 2_628_000) and a["usd_per_mtok_output"] == pytest.approx(
        6.0
    )
    assert a["usd_per_month"] == pytest.approx((2102.4 * 2.0 + 525.6 * 8.0) * 0.75)


def test_cost_frontier_keeps_the_cheapest_feasible_candidate():
    """Issue 21: the frontier weighs cost against tokens/s per user, so the cheapest candidate is always on it (the old
    throughput-only frontier called the cost winner of another search "dominated")."""
    from kvledger.analyses.search.frontier import caveats, cost_frontier, rejections_by_reason

    def e(cid, usd_month, tok_user, gpu="nvidia_h100_sxm", conf="high"):
        return {"id": cid, "gpu_id": gpu, "cost": {"usd_per_1k_requests": 1.0, "usd_per_1k_requests_at_capacity": 1.0,
                                                   "usd_per_mtok_input": 0.1, "usd_per_mtok_output": 0.5},
                "sizing": {"rental_usd_per_month": usd_month, "num_gpus": 1},
                "price": {"confidence": conf, "provider": "P",
                "instance_type": "i"}, "capacity": {"goodput_req_per_s": 1.0, "tok_per_s_per_user": tok_user,
                                                    "goodput_input_tok_per_s": 100.0, "goodput_output_tok_per_s": 20.0}}

    # cheap ($100, 10 tok/s/user): cheapest, slowest, on the frontier; fast ($200, 40): dearer but faster, on it;
    # worse ($300, 15): fast costs less and is faster, so it dominates worse (cheap does not: 10 < 15)
    entries = [e("fast", 200.0, 40.0), e("cheap", 100.0, 10.0, "amd_mi300x", "low"), e("worse", 300.0, 15.0)]
    front, dom = cost_frontier(entries)
    assert [p["id"] for p in front] == ["cheap", "fast"] and dom == [{"id": "worse", "dominated_by": "fast"}]
    assert caveats(entries[1]) == ["low-confidence price row (P i)",
                                   "memory rules not validated on amd_mi300x (measured on H100, vLLM 0.19)"]
    assert caveats(entries[0]) == []
    rej = [{"id": "a", "status": "rejected", "reason": "does not fit"},
           {"id": "b", "status": "rejected", "reason": "slo"},
           {"id": "c", "status": "rejected", "reason": "does not fit"}, entries[0] | {"status": "feasible"}]
    assert rejections_by_reason(rej) == [{"reason": "does not fit", "count": 2, "ids": ["a", "c"]},
                                         {"reason": "slo", "count": 1, "ids": ["b"]}]


def test_ranking_margin_says_when_the_runner_up_is_inside_the_capacity_band():
    from kvledger.analyses.search.frontier import ranking_margin

    def e(cid, usd):
        return {"id": cid, "cost": {"usd_per_1k_requests": 1.0, "usd_per_1k_requests_at_capacity": 1.0},
                "sizing": {"rental_usd_per_month": usd}}

    # $1,100 vs $1,000: the runner-up is 10% dearer, inside the uncalibrated roofline capacity band's wider side
    # (error_bands.json throughput −10.65 … +22.58%, a t prediction interval over the nine deployments driven past
    # saturation: capacity ×1/1.22576 = ×0.81582, 1 − 0.81582 = 18.4%)
    m = ranking_margin([e("a", 1000.0), e("b", 1100.0)], "roofline")
    assert m.runner_up == "b" and m.gap == pytest.approx(0.1) and m.could_flip
    assert m.band == pytest.approx(1 - 1 / 1.2257610123633852)
    assert not ranking_margin([e("a", 1000.0), e("b", 1250.0)], "roofline").could_flip  # 25% > 18.4%
    assert ranking_margin([e("a", 1000.0)], "roofline") is None


def test_candidate_json_is_id_layout_gpus_then_every_field():
    # A disaggregated unit (p2×tp2 + d1×tp4): GPUs = 2·2 + 1·4 = 8; the id names the shape and the set axes only.
    from dataclasses import fields

    from kvledger.analyses.search.spec import Candidate

    c = Candidate("nvidia_h100_sxm", 2, max_num_seqs=64, prefill_replicas=2, decode_replicas=1, decode_tp=4)
    d = c.to_dict()
    # enable_expert_parallel is written only where on (a MoE candidate at TP > 1: test_search_expert_parallel.py),
    # data_parallel_size only above 1 (vLLM's DP ranks of a MoE model: test_search_dp.py)
    assert list(d) == ["id", "layout", "num_gpus_per_unit"] + [f.name for f in fields(Candidate)
                                                               if f.name not in ("enable_expert_parallel",
                                                                                 "data_parallel_size")]
    assert d["id"] == "nvidia_h100_sxm:p2xtp2+d1xtp4:kv-auto:seqs-64"
    assert d["layout"] == "(p)2×tp2 + (d)1×tp4" and d["num_gpus_per_unit"] == 8
    assert Candidate.from_entry(d) == c


def test_search_sizing_at_both_ends_of_the_capacity_band_and_the_api_verdict():
    # fresh-user trial (issue 23): a winner of 3 replicas, $5,891/month, with no band. Band ends size the offered
    # 30 req/s on the SLO capacity × k (SLO capacity 18.2 req/s here, a hand-picked figure):
    # at ×0.58: 18.2 × 0.58 = 10.556 req/s, ⌈30 ÷ 8.4448⌉ = ⌈3.55⌉ = 4 replicas, 4 × $1,963.70 = $7,854.80,
    # 30 ÷ 42.224 = 71.0%; at ×1.07: 19.474, ⌈30 ÷ 15.579⌉ = ⌈1.93⌉ = 2 replicas, $3,927.40.
    # Against an API at $5,000: self-host at ×1.07 and at the point (the point's $5,891.10 > $5,000 → API) — flips.
    from kvledger.analyses.search.bands import api_within_band, band_sizing

    e = {"capacity": {"slo_capacity_req_per_s": 18.2, "goodput_req_per_s": 16.0},
         "sizing": {"rate_req_per_s": 30.0, "replicas": 3, "num_gpus": 3, "rental_usd_per_month": 3 * 1963.7}}
    low, high = band_sizing(e, 0.58, 0.8), band_sizing(e, 1.07, 0.8)
    assert (low["replicas"], low["num_gpus"], low["rental_usd_per_month"]) == (4, 4, pytest.approx(4 * 1963.7))
    assert low["realized_utilization"] == pytest.approx(30 / (4 * 18.2 * 0.58))
    assert (low["sizing_req_per_s"], low["goodput_req_per_s"]) == pytest.approx((18.2 * 0.58, 16.0 * 0.58))
    assert (high["replicas"], high["rental_usd_per_month"]) == (2, pytest.approx(2 * 1963.7))
    e["sizing"].update(at_band_low=low, at_band_high=high)
    wb = api_within_band(e, 5000.0)
    assert (wb["point"], wb["band_low"], wb["band_high"], wb["flips_inside_band"]) == ("API", "API", "self-host", True)
    assert wb["winner_rental_usd_per_month_range"] == pytest.approx([2 * 1963.7, 4 * 1963.7])
    # with a people line of $5,000 a month the winner's bill is cost's self_host_usd_per_month: rental + people
    assert api_within_band(e, 5000.0, 5000.0)["winner_self_host_usd_per_month_range"] == pytest.approx(
        [2 * 1963.7 + 5000, 4 * 1963.7 + 5000])
    assert not api_within_band(e, 2369.0)["flips_inside_band"]  # the API below even the 2-replica bill


def test_ranking_margin_reads_the_winners_asymmetric_band():
    # band ×0.58–×1.07: two capacities inside it can differ by 1.07 ÷ 0.58 = 1.845×, so a runner-up 50% dearer may
    # swap with the winner (the band note's flips_inside test); the old "gap < wider side" (50% > 42%) said it could
    # not. The margin carries the band as it is, not as ±42%.
    from kvledger.analyses.search.frontier import ranking_margin

    def entry(cid: str, usd: float) -> dict:
        return {"id": cid, "sizing": {"rental_usd_per_month": usd},
                "cost": {"usd_per_1k_requests": 1.0, "usd_per_1k_requests_at_capacity": 1.0},
                "capacity": {"goodput_req_per_s": 10.0},
                "capacity_band": {"low_multiplier": 0.58, "high_multiplier": 1.07, "regime": "uncalibrated/dense/vllm",
                                  "source": "test"}}

    m = ranking_margin([entry("a", 1000.0), entry("b", 1500.0)], "roofline")
    assert m.could_flip and (m.band_low, m.band_high) == (0.58, 1.07) and m.band == pytest.approx(0.42)
    assert not ranking_margin([entry("a", 1000.0), entry("b", 1900.0)], "roofline").could_flip


def test_ranking_margin_without_a_stored_band_takes_the_priced_regimes_not_the_uncalibrated_one():
    # A winner on an RTX 4090, priced by its bundled GPU profile (accounting/data/gpu_profiles/rtx-4090.json), whose
    # entry carries no capacity_band: the margin is read against the band of the regime that priced it
    # (search.bands.search_band → ledgers.profile_band), not the uncalibrated roofline's. That band: the GPU-profile
    # regime's throughput errors −3.21 … +3.27% (error_bands.json, 2 points: the RTX 4090 pair, each priced by a
    # profile fitted on the other run of its model) are fewer than 10, so it widens, each side, to the cross-model
    # band q10 −11.59%, q90 +13.10% (error_bands.json cross_model, 15 points; the profile's in-sample throughput
    # errors +0.6% and −0.5% lie inside): capacity multipliers low = 1/1.1310 = 0.8841 to high = 1/0.8841 = 1.1310.
    # A runner-up 1.25× dearer can swap inside it (1.1310 / 0.8841 = 1.279× > 1.25×); the step cost's scope alone
    # (the uncalibrated band's wider side, 1 − 1/1.2232 = 18.2% < 25%) says it cannot.
    from types import SimpleNamespace

    from kvledger.analyses.search.bands import search_band
    from kvledger.analyses.search.frontier import ranking_margin

    spec = SimpleNamespace(model="meta-llama/Llama-3.1-8B", step_cost="roofline", gpu_profile=None)

    def entry(cid: str, usd: float) -> dict:
        return {"id": cid, "gpu_id": "nvidia_rtx_4090", "tp": 1, "sizing": {"rental_usd_per_month": usd},
                "cost": {"usd_per_1k_requests": 1.0, "usd_per_1k_requests_at_capacity": 1.0},
                "capacity": {"goodput_req_per_s": 10.0}}

    pair = [entry("a", 1000.0), entry("b", 1250.0)]
    m = ranking_margin(pair, "roofline", band_of=lambda w: search_band(spec, w))
    assert m.band_low == pytest.approx(1 / (1 + 0.13103987248627713))
    assert m.band_high == pytest.approx(1 / (1 - 0.11585787174613248))
    assert m.could_flip
    assert not ranking_margin(pair, "roofline").could_flip  # the step cost's scope alone: the uncalibrated band
    # no band for the priced regime: the assumption CAPACITY_BAND (±30%), not another regime's band
    none = ranking_margin([entry("a", 1000.0), entry("b", 1500.0)], "roofline", band_of=lambda w: None)
    assert none.band == 0.3 and not none.could_flip  # 50% dearer: outside ±30%


def test_a_gemm_mode_the_gpu_profile_was_not_fitted_with_is_refused_before_any_candidate():
    # search reported it as "4 rejected for simulation error" with a --resume hint that could not fix it (fresh-user
    # trial): the bundled H100 profile was fitted with the measured curve, so flat pricing on it is refused at the
    # boundary
    from kvledger.analyses.search import SearchSpec
    from kvledger.errors import InputError

    base = dict(model="meta-llama/Llama-3.1-8B", slo="ttft=1s", utilization=0.5)
    with pytest.raises(InputError, match="was fitted with measured matmul efficiency"):
        SearchSpec(**base, gpu_profile="bundled:h100-sxm", gemm_efficiency="flat").check()
    with pytest.raises(InputError, match="--gemm-efficiency 'fast': choose flat or measured"):
        SearchSpec(**base, gemm_efficiency="fast").check()
    SearchSpec(**base, gpu_profile="bundled:h100-sxm", gemm_efficiency="measured").check()  # the profile's own mode


def test_a_ranking_across_gpus_priced_on_different_bases_says_so():
    # an H100 SXM's matmuls are priced by its measured curve, an L40S's flat (no curve): the search's note names both
    # (fresh-user trial: an H100 SXM on the curve ranked against an H100 PCIe at a flat 70% without a word)
    from types import SimpleNamespace

    from kvledger.analyses.search.gemm_note import gemm_note

    spec = SimpleNamespace(model="meta-llama/Llama-3.1-8B", step_cost="roofline", gpu_profile=None,
                           gemm_efficiency=None)
    entries = [{"gpu_id": "nvidia_h100_sxm", "status": "feasible"}, {"gpu_id": "nvidia_l40s", "status": "feasible"},
               {"gpu_id": "nvidia_l4", "status": "rejected"}]
    assert gemm_note(spec, entries) == (
        "weight matmuls priced by the GPU's measured efficiency against tokens per step on NVIDIA H100 80GB SXM5; at "
        "one flat FLOP fraction on NVIDIA L40S (kvledger.accounting.gemm_efficiency; a ranking across the two "
        "compares figures priced on different bases)")
    flat = SimpleNamespace(**{**vars(spec), "gemm_efficiency": "flat"})
    assert gemm_note(flat, entries[:1]).startswith("weight matmuls priced at one flat FLOP fraction on NVIDIA H100")
    assert gemm_note(SimpleNamespace(**{**vars(spec), "step_cost": "calibrated"}), entries) is None


def test_tier_twins_at_capacities_the_search_resolution_tells_apart():
    # one setup with and without a host tier: 15.37 and 15.41 good req/s (the tier's own probe ladder), 1 replica at
    # the capacity and at both band ends (×0.84 and ×1.06 of 5 req/s offered): a capacity error moves both alike, so
    # only the tier's price orders them; 2 replicas at the band's low end for one of them: no longer twins
    from kvledger.analyses.search.frontier import tier_twins

    def entry(cid: str, good: float, low: int, base: str | None = None) -> dict:
        return {"id": cid, "offload": {"base": base} if base else None, "capacity": {"goodput_req_per_s": good},
                "sizing": {"replicas": 1, "at_band_low": {"replicas": low}, "at_band_high": {"replicas": 1}}}

    plain = entry("h100:tp1", 15.37, 1)
    assert tier_twins(plain, entry("h100:tp1:offload-cpu", 15.41, 1, base="h100:tp1"))
    assert not tier_twins(plain, entry("h100:tp1:offload-cpu", 15.41, 2, base="h100:tp1"))
    assert not tier_twins(plain, entry("h100:tp2", 15.41, 1))  # another setup
    assert tier_twins(plain, {**entry("h100:tp1:offload-cpu", 15.37, 1, base="h100:tp1"), "sizing": {}})  # equal


def test_the_api_line_says_one_bill_once_when_the_band_ends_size_alike():
    # the winner sizes 1 replica at both ends of the capacity band: $1,963.70 either way, said once, not "$1,964–$1,964"
    from types import SimpleNamespace

    from rich.console import Console

    from kvledger.analyses.search.api_side import with_people
    from kvledger.analyses.search.bands import api_within_band
    from kvledger.report.search_view import _api

    one = {"rental_usd_per_month": 1963.7}
    winner = {"sizing": {"rental_usd_per_month": 1963.7, "at_band_low": one, "at_band_high": one}}
    api = {"key": "OpenAI:gpt-4.1", "as_of": "2025-07-04", "usd_per_mtok_input": 2.0, "usd_per_mtok_output": 8.0,
           "mix": {"batch_share": 0.0, "cache_hit_rate": 0.0}, "usd_per_month": 3000.0, "monthly_input_tokens": 1e9,
           "monthly_output_tokens": 1e8, "notes": [], "within_band": api_within_band(winner, 3000.0)}
    with_people(api, winner)
    con = Console(record=True, width=400)
    _api(con, SimpleNamespace(api=api, winner=winner))
    out = " ".join(con.export_text().split())
    assert "across the whole capacity band (winner $1,964/month at both ends)" in out and "$1,964–$1,964" not in out
    # GPU rental alone: $1,963.70 < the API's $3,000, the winner is cheaper; with cost's default people line (team
    # capability some: 0.25 engineer-months × $20,000 = $5,000/month) self-hosting is 1,963.70 + 5,000 = $6,963.70 >
    # $3,000: the API is cheaper, at both band ends alike
    assert (api["cheaper_gpu_rental_alone"], api["cheaper_with_people"]) == ("self-host", "API")
    assert api["people"]["usd_per_month"] == 5000.0 and api["winner_self_host_usd_per_month"] == pytest.approx(6963.7)
    assert api["within_band"]["with_people"]["winner_self_host_usd_per_month_range"] == pytest.approx([6963.7, 6963.7])
    # the comparison cost makes by default leads (a fresh-user trial read rental alone's "winner is cheaper" first)
    assert ("— as kvledger cost compares them by default, GPU rental plus its people line ($5,000/month: 0.25 "
            "engineer-months at $20,000, its --team-capability some), self-hosting costs $6,964/month and the API is "
            "cheaper, across the whole capacity band (winner $6,964/month at both ends). On GPU rental alone (power "
            "and hosting included in the rental) the winner's $1,964/month is cheaper, across the whole capacity "
            "band (winner $1,964/month at both ends); kvledger cost prices the whole bill") in out
    assert "before people and hosting" not in out


def test_bills_at_both_band_ends_decide_whether_two_candidates_can_swap():
    # bills move in whole replicas and each candidate has its own band: the winner stays ahead only when its bill at
    # its band's low end (most replicas) is below the runner-up's at its band's high end (fewest); equal bills can swap
    from kvledger.analyses.search.bands import bills_across_bands

    def e(cid, low_usd, low_gpus, high_usd, high_gpus):
        return {"id": cid, "sizing": {"at_band_low": {"rental_usd_per_month": low_usd, "num_gpus": low_gpus},
                                      "at_band_high": {"rental_usd_per_month": high_usd, "num_gpus": high_gpus}}}

    ahead = bills_across_bands(e("a", 5891.0, 3, 3927.0, 2), e("b", 11782.0, 6, 7855.0, 4))
    assert ahead.startswith("the winner a stays ahead of the runner-up b") and "3 GPUs ($5,891/month)" in ahead
    tie = bills_across_bands(e("a", 8760.0, 8, 6570.0, 6), e("b", 13140.0, 12, 8760.0, 8))
    assert tie.startswith("the winner a and the runner-up b may swap") and "8 ($8,760/month)" in tie
    assert bills_across_bands({"id": "a"}, {"id": "b"}) is None  # no band sizings: a ranking by USD per 1k requests


def test_the_ranking_margin_follows_the_bills_at_the_band_ends_when_both_were_sized():
    # the fresh-user case: winner $3,139 (5 replicas), runner-up 25% dearer ($3,927), capacity band ×0.82–×1.06. By
    # the ratio alone they could swap (1.06 / 0.82 = 1.29 > 1.25), but bills move in whole replicas: the winner at its
    # band's low end needs 6 replicas, $3,767, still under the runner-up's $3,927 at its high end, so the header
    # agrees with search.bands' note ("stays ahead"), and flips to "may swap" once the winner's low end costs more
    from kvledger.analyses.search.frontier import bills_swap, ranking_margin

    def e(cid, usd, low, high):
        return {"id": cid, "cost": {"usd_per_1k_requests": 1.0, "usd_per_1k_requests_at_capacity": 1.0},
                "capacity_band": {"low_multiplier": 0.82, "high_multiplier": 1.06, "regime": "r", "source": "s"},
                "sizing": {"rental_usd_per_month": usd, "at_band_low": {"rental_usd_per_month": low},
                           "at_band_high": {"rental_usd_per_month": high}}}

    a, b = e("a", 3139.0, 3767.0, 3139.0), e("b", 3927.0, 3927.0, 3927.0)
    assert bills_swap(a, b) is False and not ranking_margin([a, b], "roofline").could_flip
    a2 = e("a", 3139.0, 4395.0, 3139.0)  # 7 replicas at the low end: $4,395 ≥ $3,927
    assert bills_swap(a2, b) is True and ranking_margin([a2, b], "roofline").could_flip
    assert bills_swap({"id": "x"}, b) is None


def test_a_named_api_row_with_a_cheaper_row_of_the_same_model_says_so():
    # Llama-3.1-70B at 800 tokens in, 200 out: Together's Turbo row lists $0.88 / $0.88 per Mtok (880 µ$ a request);
    # DeepInfra's lists $0.10 / $0.28 (136 µ$): 136 / 880 = 15.5% → "15%" (a fresh-user trial's search compared with
    # the dear row alone and said nothing of the cheap one)
    from kvledger.analyses.search.api_side import api_side

    spec = SearchSpec(model="meta-llama/Llama-3.1-70B", slo=SLO, monthly_tokens=2.628e9,
                      api="Together:meta-llama/Meta-Llama-3.1-70B-Instruct-Turbo")
    a = api_side(spec, [{"workload": {"prompt_tokens_mean": 800.0, "output_tokens_mean": 200.0}}])
    assert a["key"] == "Together:meta-llama/Meta-Llama-3.1-70B-Instruct-Turbo"
    note = next(n for n in a["notes"] if n.startswith("the comparison is with --api"))
    assert ("a cheaper catalog row serves meta-llama/Llama-3.1-70B: DeepInfra:meta-llama/Meta-Llama-3.1-70B-Instruct-"
            "Turbo (medium confidence), 15% of the named row's price") in note
    # the cheapest row named: no note
    spec = SearchSpec(model="meta-llama/Llama-3.1-70B", slo=SLO, monthly_tokens=2.628e9,
                      api="DeepInfra:meta-llama/Meta-Llama-3.1-70B-Instruct-Turbo")
    a = api_side(spec, [{"workload": {"prompt_tokens_mean": 800.0, "output_tokens_mean": 200.0}}])
    assert not any(n.startswith("the comparison is with --api") for n in a["notes"])


def test_a_winner_that_may_not_start_says_so():
    from kvledger.accounting.plan import build_plan
    from kvledger.accounting.settings import make_settings
    from kvledger.analyses.search.frontier import caveats
    from kvledger.analyses.search.screen import plan_figures
    from kvledger.catalog.gpus import get_gpu
    from kvledger.catalog.models import load_model

    # Llama-3.2-3B on an RTX 4090 at its full 131,072 tokens (a fresh user's search winner): the plan holds 1.01x,
    # its range's low end 0.91x, so one full-length request may not fit and vLLM then refuses to start
    fig = plan_figures(build_plan(load_model("meta-llama/Llama-3.2-3B"), get_gpu("rtx-4090"), make_settings()))
    assert fig["max_concurrency_low"] == pytest.approx(0.9087, abs=5e-4)
    # the caveat, on an entry of the H100 (whose memory rules are validated: no other caveat beside it)
    entry = {"gpu_id": "nvidia_h100_sxm", "plan": {"max_model_len": 131072, "max_concurrency_low": 0.91}}
    assert caveats(entry) == ["one 131,072-token request fits at the plan's figure but not at its range's low end "
                              "(0.91x): vLLM may refuse to start (a lower --max-model-len)"]
    assert caveats({"gpu_id": "nvidia_h100_sxm", "plan": {"max_model_len": 8192}}) == []
