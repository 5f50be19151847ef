"""Ties within the probe's sampling error (search.tie_noise, search.order): at one bill, two prices per good token whose
attainments at the load differ by no more than 2 binomial standard errors are one price, and SLO capacity (the
headroom over the load) decides before the price or tokens/s per user."""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvledger.analyses.search.frontier import cost_frontier
from kvledger.analyses.search.order import ranked, tie_break, usd_per_mtok_good
from kvledger.analyses.search.tie_noise import AttainmentTie, noise_tie


def _entry(cid: str, bill: float, usd_in: float, usd_out: float, tok_in: float, tok_out: float, user: float,
           good: int | None, n: int, per_replica: float, replicas: int = 2, load: float = 20.0) -> dict:
    at = None if good is None else {"num_good": good, "num_requests": n, "good_input_tok_per_s": tok_in,
                                    "good_output_tok_per_s": tok_out}
    return {"id": cid, "num_gpus_per_unit": 8,
            "sizing": {"rental_usd_per_month": bill, "rate_req_per_s": load, "replicas": replicas,
                       "sizing_req_per_s": per_replica},
            "cost": {"usd_per_1k_requests": 1.0, "usd_per_mtok_input": usd_in, "usd_per_mtok_output": usd_out},
            "capacity": {"goodput_input_tok_per_s": tok_in, "goodput_output_tok_per_s": tok_out,
                         "tok_per_s_per_user": user, "goodput_req_per_s": 1.0, "at_volume_load": at}}


# The finding: `search deepseek-ai/DeepSeek-V3 --gpu H200 --tp 1,8 -dp 1,8 --slo ttft=2s,tpot=50ms --target 0.99
# --rate 20 --num-requests 500 --workers 1`, its two TP 8 entries as that search wrote them (--json). Both bills:
# 2 replicas × 8 GPUs × $3.5/GPU-h × 730 h = $40,880. In the run at the load each replica carries (20 ÷ 2 = 10 req/s)
# 499 of 500 requests met the SLO for TP 8, 500 for TP 8 + EP.
TP8 = _entry("nvidia_h200_sxm:tp8:kv-auto", 40880.0, 0.291298406256865, 1.90673569214485, 9351.28, 2650.48,
             24.23314153963815, 499, 500, 13.375)
EP = _entry("nvidia_h200_sxm:tp8:kv-auto:ep", 40880.0, 0.285446541377044, 1.92694896957436, 9353.68, 2650.72,
            24.127569206827083, 500, 500, 12.875)
ORDER = {TP8["id"]: 2, EP["id"]: 3}  # candidate order: tp1, dp8xtp1:ep, tp8, tp8:ep


def test_one_request_in_500_is_within_two_standard_errors():
    # pooled p̄ = 999/1000; SE of the difference = √(0.999 × 0.001 × (1/500 + 1/500)) = √(3.996e-6) = 0.0019990;
    # |1.000 − 0.998| = 0.0020 ≤ 2 SE = 0.0039980: tied
    t = noise_tie(EP, TP8)
    assert t == AttainmentTie((EP["id"], TP8["id"]), (500, 499), (500, 500), pytest.approx(0.002),
                              pytest.approx(2 * math.sqrt(0.999 * 0.001 * 0.004)))
    assert t.limit == pytest.approx(0.0039980, abs=1e-7)


def _counts(good_a: int, good_b: int, n: int = 500) -> tuple[dict, dict]:
    return (_entry("a", 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, good_a, n, 1.0),
            _entry("b", 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, good_b, n, 1.0))


def test_the_limit_at_500_requests():
    # 500 against 497: p̄ = 997/1000, 2 SE = 2√(0.997 × 0.003 × 0.004) = 0.0069181 ≥ 0.006: tied
    assert noise_tie(*_counts(500, 497)) is not None
    # 500 against 496: p̄ = 0.996, 2 SE = 2√(0.996 × 0.004 × 0.004) = 0.0079840 < 0.008: told apart
    assert noise_tie(*_counts(500, 496)) is None
    # all good in both: p̄ = 1, SE = 0, a difference of 0: tied
    assert noise_tie(*_counts(500, 500)).limit == 0.0
    # 1,000 requests, 990 against 985: p̄ = 0.9875, 2 SE = 2√(0.9875 × 0.0125 × 0.002) = 0.0099373 ≥ 0.005: tied
    assert noise_tie(*_counts(990, 985, 1000)) is not None
    # no run at the load (a session workload, or no load): no noise tie
    a, b = _counts(500, 499)
    b["capacity"]["at_volume_load"] = None
    assert noise_tie(a, b) is None


def test_the_finding_slo_capacity_decides_not_one_request():
    # the prices: (0.2913 × 9,351.28 + 1.9067 × 2,650.48) ÷ 12,001.76 = $0.648053 (TP 8), $0.647911 (TP 8 + EP):
    # TP 8 + EP was first by $0.0001 from its one extra good request. Within noise, SLO capacity decides:
    # 2 replicas × 13.375 = 26.75 req/s (TP 8) against 2 × 12.875 = 25.75 req/s (TP 8 + EP) for the 20 req/s load.
    assert usd_per_mtok_good(TP8) == pytest.approx(0.6480531, rel=1e-6)
    assert usd_per_mtok_good(EP) == pytest.approx(0.6479106, rel=1e-6)
    best = ranked([EP, TP8], ORDER)
    assert [e["id"] for e in best] == [TP8["id"], EP["id"]]
    assert [e["id"] for e in ranked([TP8, EP], ORDER)] == [TP8["id"], EP["id"]]  # input order does not matter
    t = tie_break(best[0], best[1], ORDER)
    assert (t.by, t.winner_value, t.runner_up_value, t.load_req_per_s) == ("SLO capacity", 26.75, 25.75, 20.0)
    assert t.price_within_noise.good == (499, 500)
    front, dominated = cost_frontier([EP, TP8], ORDER)
    assert [p["id"] for p in front] == [TP8["id"]]  # as much capacity and faster per user (24.23 against 24.13)
    assert dominated == [{"id": EP["id"], "dominated_by": TP8["id"]}]


def test_a_difference_beyond_noise_still_decides_by_price():
    # 500/500 against 490/500: p̄ = 0.99, 2 SE = 2√(0.99 × 0.01 × 0.004) = 0.012585 < 0.02: the price decides, though
    # the dearer one has more capacity (30 against 25.75 req/s)
    low = _entry("low", 40880.0, 0.7, 0.7, 100.0, 20.0, 30.0, 490, 500, 15.0)
    order = {"low": 0, EP["id"]: 1}
    assert [e["id"] for e in ranked([low, EP], order)] == [EP["id"], "low"]
    t = tie_break(EP, low, order)
    assert (t.by, t.price_within_noise) == ("USD per Mtok of good tokens", None)


def test_equal_price_goes_to_capacity_before_speed():
    # the second trial: one bill, one price per good token (both 500/500): the faster per user (30 tok/s) with less
    # headroom (2 × 10 = 20 req/s) ranked first; now the one with 2 × 12 = 24 req/s over the 20 req/s load is
    a = _entry("fast", 1000.0, 0.5, 0.5, 100.0, 20.0, 30.0, 500, 500, 10.0)
    b = _entry("room", 1000.0, 0.5, 0.5, 100.0, 20.0, 25.0, 500, 500, 12.0)
    order = {"fast": 0, "room": 1}
    assert [e["id"] for e in ranked([a, b], order)] == ["room", "fast"]
    t = tie_break(b, a, order)
    assert (t.by, t.winner_value, t.runner_up_value, t.price_within_noise) == ("SLO capacity", 24.0, 20.0, None)
    # both on the cost frontier: one has the headroom, the other the speed
    assert {p["id"] for p in cost_frontier([a, b], order)[0]} == {"fast", "room"}


def test_the_tie_line_says_why_the_price_did_not_decide():
    from kvledger.report.search_answer import tie_line

    t = tie_break(TP8, EP, ORDER)
    line = tie_line(SimpleNamespace(summary=lambda: SimpleNamespace(tie_break=t)))
    assert line == ("tie: the winner and the runner-up nvidia_h200_sxm:tp8:kv-auto:ep have the same monthly bill "
                    "($40,880.00/month) and USD per Mtok of good tokens within sampling error (requests within the "
                    "SLO at the load, 499/500 against 500/500: 0.20% apart, within 2 binomial standard errors, "
                    "0.40%); broken by SLO capacity (the more headroom first): 26.75 against 25.75 req/s for the 20 "
                    "req/s load (replicas × the req/s each is sized on)")


_goods = st.sampled_from([500, 499, 497, 490, 480])
_caps = st.sampled_from([10.0, 12.0, 14.0])
_speeds = st.sampled_from([10.0, 20.0, 30.0])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([100.0, 200.0]), _goods, _caps, _speeds), min_size=1, max_size=6),
       st.randoms())
def test_noise_ties_keep_the_winner_on_the_frontier_and_the_order_fixed(rows, rnd):
    # one volume: the price is the bill over 500 requests' good share (all requests alike: 100 + 20 tokens each)
    entries = [_entry(f"c{n}", bill, bill / good, bill / good, 100.0, 20.0, user, good, 500, cap)
               for n, (bill, good, cap, user) in enumerate(rows)]
    order = {e["id"]: n for n, e in enumerate(entries)}
    best = ranked(entries, order)
    front, dominated = cost_frontier(entries, order)
    assert best[0]["id"] in {p["id"] for p in front}
    shuffled = entries[:]
    rnd.shuffle(shuffled)
    assert [e["id"] for e in ranked(shuffled, order)] == [e["id"] for e in best]
    assert {p["id"] for p in cost_frontier(shuffled, order)[0]} == {p["id"] for p in front}
    if len(best) > 1 and (t := tie_break(best[0], best[1], order)) is not None and t.price_within_noise is not None:
        assert t.price_within_noise.difference <= t.price_within_noise.limit + 1e-12
