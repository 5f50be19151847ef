"""Ties of the monthly bill in the search's ranking: broken by USD per Mtok of good tokens, then tokens/s per user,
then candidate order; the winner is always on the cost frontier it prints (search.order, search.frontier)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvledger.analyses.search.frontier import cost_frontier
from kvledger.analyses.search.order import TieBreak, rank_key, ranked, tie_break, usd_per_mtok_good
from kvledger.analyses.search.prune import decide


def _entry(cid: str, bill: float, usd_in: float, usd_out: float, tok_in: float, tok_out: float,
           user: float) -> dict:
    return {"id": cid, "sizing": {"rental_usd_per_month": bill},
            "cost": {"usd_per_1k_requests": 1.0, "usd_per_mtok_input": usd_in, "usd_per_mtok_output": usd_out},
            "capacity": {"goodput_input_tok_per_s": tok_in, "goodput_output_tok_per_s": tok_out,
                         "tok_per_s_per_user": user, "goodput_req_per_s": 1.0}}


# The finding: `search meta-llama/Llama-3.1-8B --slo ttft=500ms,tpot=50ms --gpu H100,L40S,A100-80GB --tp 1,2 --rate 30`,
# the two H100 entries as that search wrote them (--json). Both bills: 2 GPUs × $2.69/GPU-h × 730 h = $3,927.40.
TP1 = _entry("nvidia_h100_sxm:tp1:kv-auto", 3927.4, 0.023697666523153558, 0.11618774222819922,
             19417.975848824026, 5043.134358701888, 25.320058706487767)
TP2 = _entry("nvidia_h100_sxm:tp2:kv-auto", 3927.4, 0.023048449877681745, 0.10875558203836613,
             38533.016372113365, 9239.403142727308, 40.08653547431018)


def test_usd_per_mtok_good_is_the_bill_over_every_good_token():
    # $3,927.40 ÷ 730 h = $5.38 an hour for either. Good tokens at the 30 req/s load = utilization × good tokens/s
    # of the boundary run, per replica:
    #   TP 2, 1 replica at 30 ÷ 38 = 0.78947: 0.78947 × (38,533.0 + 9,239.4) × 3600 = 135.774 M tokens/h
    #        → $5.38 ÷ 135.774 = $0.039625 per Mtok
    #   TP 1, 2 replicas at 30 ÷ (2 × 21) = 0.71429: 2 × 0.71429 × (19,418.0 + 5,043.1) × 3600 = 125.800 M tokens/h
    #        → $5.38 ÷ 125.800 = $0.042766 per Mtok
    # The in/out prices weighted by the good tokens give the same figure, whatever split of GPU time priced each side.
    assert usd_per_mtok_good(TP2) == pytest.approx(5.38 / 135.7742449, rel=1e-6)
    assert usd_per_mtok_good(TP1) == pytest.approx(5.38 / 125.7999954, rel=1e-6)


def test_the_finding_tp2_wins_the_tie_and_is_on_the_frontier():
    order = {TP1["id"]: 0, TP2["id"]: 1}  # candidate order: TP 1 first, as the search lists them
    best = ranked([TP1, TP2], order)
    assert [e["id"] for e in best] == [TP2["id"], TP1["id"]]
    t = tie_break(best[0], best[1], order)
    assert t == TieBreak(TP1["id"], "monthly bill", 3927.4, "USD per Mtok of good tokens",
                         pytest.approx(0.0396246, rel=1e-5), pytest.approx(0.0427663, rel=1e-5))
    front, dominated = cost_frontier([TP1, TP2])
    assert [p["id"] for p in front] == [TP2["id"]]  # TP 1: the same bill, dearer per good token and slower
    assert dominated == [{"id": TP1["id"], "dominated_by": TP2["id"]}]


def test_ties_fall_to_speed_then_to_candidate_order():
    # Same bill and the same USD per Mtok good (in 0.1, out 0.5 on 100 + 20 tok/s: (10 + 10) ÷ 120 = $0.1667):
    # the faster per user first; with that equal too, the earlier candidate.
    a, b = _entry("a", 500.0, 0.1, 0.5, 100.0, 20.0, 30.0), _entry("b", 500.0, 0.1, 0.5, 100.0, 20.0, 45.0)
    order = {"a": 0, "b": 1}
    assert [e["id"] for e in ranked([a, b], order)] == ["b", "a"]
    assert tie_break(b, a, order) == TieBreak("a", "monthly bill", 500.0, "tokens/s per user", 45.0, 30.0)
    c = _entry("c", 500.0, 0.1, 0.5, 100.0, 20.0, 30.0)
    assert [e["id"] for e in ranked([c, a], {"a": 0, "c": 1})] == ["a", "c"]
    assert tie_break(a, c, {"a": 0, "c": 1}).by == "candidate order"
    # no tie: $499.99 is a cent less, whatever its price per good token
    d = _entry("d", 499.99, 9.0, 9.0, 100.0, 20.0, 1.0)
    assert ranked([a, d], {"a": 0, "d": 1})[0]["id"] == "d" and tie_break(d, a, {"a": 0, "d": 1}) is None
    # bills that differ below a cent (float products in another order) are one bill
    assert rank_key(_entry("e", 3927.3999999999996, 0.1, 0.5, 100.0, 20.0, 1.0))[0] == 3927.4


def test_an_equal_bill_bound_is_not_decided_by_bound():
    # A planned candidate whose bill lower bound equals the runner-up's ($1,000) might still win on USD per Mtok good
    # (no lower bound on that is proven): not decided, neither on rank nor on the cost frontier. One a cent dearer is.
    sim = [_entry("w", 1000.0, 0.1, 0.5, 100.0, 20.0, 50.0), _entry("r", 1000.0, 0.2, 0.6, 100.0, 20.0, 40.0)]
    for e in sim:
        e["capacity"]["operating_points"] = [{"rate_req_per_s": 1.0, "tok_per_s_per_user": 50.0,
                                              "output_tok_per_s_per_gpu": 500.0}]
    planned = {"id": "p", "bounds": {"tok_per_s_per_user": 10.0, "output_tok_per_s_per_gpu": 100.0}}
    order = {"w": 0, "r": 1, "p": 2}
    tied = decide(planned, (1000.0, 0.0), sim, order)
    assert tied["rank"] is None and tied["cost_frontier"] is None
    dearer = decide(planned, (1000.01, 0.0), sim, order)
    assert dearer["rank"]["runner_up"] == "r" and dearer["cost_frontier"]["by"] == "w"


_bills = st.sampled_from([100.0, 200.0, 300.0])
_prices = st.sampled_from([0.1, 0.2, 0.3])
_speeds = st.sampled_from([10.0, 20.0, 30.0])


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(_bills, _prices, _prices, _speeds), min_size=1, max_size=6), st.randoms())
def test_the_winner_is_on_the_cost_frontier_and_the_ranking_ignores_input_order(rows, rnd):
    # Few distinct bills, prices and speeds: ties on every figure are common.
    entries = [_entry(f"c{n}", bill, p_in, p_out, 100.0, 20.0, user) for n, (bill, p_in, p_out, user) in
               enumerate(rows)]
    order = {e["id"]: n for n, e in enumerate(entries)}
    best = ranked(entries, order)
    front, dominated = cost_frontier(entries)
    assert best[0]["id"] in {p["id"] for p in front}
    assert best[0]["id"] not in {d["id"] for d in dominated}
    shuffled = entries[:]
    rnd.shuffle(shuffled)
    assert [e["id"] for e in ranked(shuffled, order)] == [e["id"] for e in best]
    assert {p["id"] for p in cost_frontier(shuffled)[0]} == {p["id"] for p in front}


def test_the_text_says_what_broke_the_tie():
    from kvledger.report.search_answer import tie_line as _tie_line

    t = TieBreak(TP1["id"], "monthly bill", 3927.4, "USD per Mtok of good tokens", 0.0396246, 0.0427663)
    line = _tie_line(SimpleNamespace(summary=lambda: SimpleNamespace(tie_break=t)))
    assert line == ("tie: the winner and the runner-up nvidia_h100_sxm:tp1:kv-auto have the same monthly bill "
                    "($3,927.40/month); broken by USD per Mtok of good tokens (input and output; the lower first): "
                    "$0.0396 against $0.0428")
    assert _tie_line(SimpleNamespace(summary=lambda: SimpleNamespace(tie_break=None))) is None
