"""Two candidates with one monthly bill over the same good tokens have one price per good token: float noise in the
products that made it (0.78548 against 0.7854800000000002, a fresh user's Qwen3-30B-A3B search: TP 2 with and without
expert parallelism) must not rank the slower one first nor keep it on the cost frontier; tokens/s per user decides."""

from __future__ import annotations

from kvledger.analyses.search.frontier import cost_frontier
from kvledger.analyses.search.order import price_key, ranked


def _entry(cid: str, usd_out: float, tok_per_s_per_user: float) -> dict:
    # input and output priced alike, so USD per Mtok of good tokens = usd_out whatever the token split
    return {"id": cid, "cost": {"usd_per_mtok_input": usd_out, "usd_per_mtok_output": usd_out,
                                "usd_per_1k_requests": 1.0},
            "capacity": {"goodput_input_tok_per_s": 1000.0, "goodput_output_tok_per_s": 250.0,
                         "tok_per_s_per_user": tok_per_s_per_user, "goodput_req_per_s": 1.0,
                         "slo_capacity_req_per_s": 1.0},
            "sizing": {"rental_usd_per_month": 3927.0, "num_gpus": 2}}


def test_float_noise_in_an_equal_price_is_no_difference():
    assert price_key(0.7854800000000002) == price_key(0.78548) == 0.78548
    assert price_key(0.78549) > price_key(0.78548)  # a real difference in the 5th digit still counts


def test_the_faster_of_two_equal_prices_ranks_first_and_alone_on_the_frontier():
    ep = _entry("h100:tp2:ep", 0.78548, 53.1)
    plain = _entry("h100:tp2", 0.7854800000000002, 54.7)
    order = {"h100:tp2:ep": 0, "h100:tp2": 1}
    assert [e["id"] for e in ranked([ep, plain], order)] == ["h100:tp2", "h100:tp2:ep"]
    front, dominated = cost_frontier([ep, plain])
    assert [p["id"] for p in front] == ["h100:tp2"]
    assert dominated == [{"id": "h100:tp2:ep", "dominated_by": "h100:tp2"}]
