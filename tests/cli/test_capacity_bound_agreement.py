"""``goodput --simulate --target``, ``cost --simulate`` and ``search`` on the same inputs name the same sizing figure:
where the deployment's capacity bound (``kvledger.analyses.serving.work_bounds``) caps the SLO capacity found, each
says the bound in cost's words (``work_bounds.bound_clause``), and search's winner line labels the good req/s at the
capacity found apart from the bound it is sized on.
"""

from __future__ import annotations

import pytest
from cli_run import MODEL, cli_json, run_cli

# 300-request probes of 1,600–2,100-token prompts and 100–300-token outputs on one H100: the search finds 18 req/s
# (291 of its 300 requests within the SLO, 97.0%), and the probe is too short to show that a replica cannot keep pace
# there: the capacity bound, k ÷ Σ of the k smallest per-request works (k = ⌈0.9 × 300⌉ = 270), is 17.076 req/s
W = ["--prompt-lengths", "uniform:1600:2100", "--output-lengths", "uniform:100:300", "--num-requests", "300",
     "--slo", "ttft=500ms,tpot=50ms"]
FOUND, SHARE = 18.0, 291 / 300


@pytest.fixture(scope="module")
def bound() -> float:
    """The bound as work_bounds computes it for the workload (what all three commands must size on)."""
    from kvledger.analyses.serving.sim_ledgers import SyntheticSpec
    from kvledger.analyses.serving.sim_setup import SimRequestArgs
    from kvledger.analyses.serving.work_bounds import capacity_bound_req_per_s

    args = SimRequestArgs(model=MODEL, gpu="H100", num_requests=300)
    b = capacity_bound_req_per_s(args, SyntheticSpec("uniform:1600:2100", "uniform:100:300"), 0.9)
    assert b == pytest.approx(17.0764, rel=1e-4) and b < FOUND  # the bound binds
    return b


def test_the_three_commands_size_on_the_same_bound(bound):
    whole = cli_json("goodput", "--simulate", MODEL, "--gpu", "H100", *W, "--target", "0.9")
    gp = whole["boundary"]
    cost = cli_json("cost", "--simulate", MODEL, "--gpu", "H100", *W, "--monthly-tokens", "3e9",
                 "--api", "OpenAI:gpt-4.1-mini")
    found = cli_json("search", MODEL, "--gpus", "H100", "--tp", "1", *W, "--rate", "2")
    cand = next(c for c in found["candidates"] if c["id"] == found["winner"]["id"])["capacity"]
    assert gp["boundary_value"] == cost["simulation"]["capacity_search"]["slo_capacity_req_per_s"] == \
        cand["slo_capacity_req_per_s"] == FOUND
    assert gp["sized_on_req_per_s"] == gp["capacity_bound_req_per_s"] == bound
    assert cost["simulation"]["capacity_search"]["sized_on_req_per_s"] == bound
    assert cost["capacity"]["sized_on_req_per_s"] == cost["capacity"]["sizing_req_per_s"] == bound
    assert cost["capacity"]["slo_capacity_req_per_s"] == FOUND  # one name, one value: the rate the search found
    assert cand["sized_on_req_per_s"] == bound
    # one band of the rate sized on in the three: goodput's sized_error_band, cost's and search's error_band
    ends = [(b["value"], b["low"], b["high"]) for b in (whole["sized_error_band"], cand["error_band"],
                                                       cost["simulation"]["capacity_search"]["error_band"])]
    assert ends[0] == ends[1] == ends[2] and ends[0][0] == bound
    # the good req/s at the capacity found: 18 req/s × 291/300 within the SLO = 17.46, in goodput's and search's JSON
    assert gp["sustained_good_req_per_s_at_boundary"] == cand["sustained_good_req_per_s_at_boundary"] == \
        pytest.approx(FOUND * SHARE, rel=1e-12)


def test_the_three_commands_say_the_bound_in_the_same_words(bound):
    said = f"sized on {bound:,.4g} req/s, the capacity bound"  # work_bounds.bound_clause: "sized on 17.08 req/s, …"
    assert said == "sized on 17.08 req/s, the capacity bound"
    gp, cost, search = (" ".join(run_cli(*args).output.split()) for args in (  # the console's wrapping undone
        ("goodput", "--simulate", MODEL, "--gpu", "H100", *W, "--target", "0.9"),
        ("cost", "--simulate", MODEL, "--gpu", "H100", *W, "--monthly-tokens", "3e9", "--api", "OpenAI:gpt-4.1-mini"),
        ("search", MODEL, "--gpus", "H100", "--tp", "1", *W, "--rate", "2")))
    assert "17.460 sustained at that rate (18 × 97.0% within the SLO); cost and search: " + said in gp
    assert "what cost prices" not in gp  # cost prices the run at the bound, not 17.46
    note = cost[cost.index("warning: " + said):].split(" warning: ")[0]
    assert note.endswith("(more --num-requests gives a longer probe)") and note in gp  # the same warning, verbatim
    assert "(17.08 req/s capacity bound (below the 18 req/s SLO capacity found) × 80%)" in cost
    # then the band of the rate sized on, as cost bands it: the saturation throughput's around 17.0764 req/s,
    # ÷ (1 + q90) and ÷ (1 + q10) = 17.0764 ÷ 1.22576 = 13.93 and 17.0764 ÷ 0.89347 = 19.11 (the uncalibrated regime's
    # errors, tests/report/test_capacity_band.py)
    assert ("SLO capacity 18 req/s per replica (17.46 good req/s there), " + said
            + ", 80% band 13.93–19.11 req/s [rests on") in search
    # goodput bands the 18 req/s it found (18 ÷ 1.22576 – 18 ÷ 0.89347 = 14.68–20.15) and, beside it, the rate cost
    # and search size on, with their band
    assert "SLO capacity 18 req/s (80% band 14.68–20.15 req/s" in gp
    assert ("error band of the 17.08 req/s cost and search size on (the capacity bound): 80% band 13.93–19.11 req/s"
            in gp)


def test_goodput_says_nothing_of_a_bound_that_does_not_bind():
    # 2,000-request probes (the default) are long enough: the capacity found is below the bound, so goodput prices
    # as cost does, at the rate found: sized_on_req_per_s null (always there, a stable schema), no warning; the bound
    # itself is said (capacity_bound_req_per_s, work_bounds' for these 2,000 requests), above the boundary
    gp = cli_json("goodput", "--simulate", MODEL, "--gpu", "H100", "--prompt-lengths", "uniform:1600:2100",
               "--output-lengths", "uniform:100:300", "--slo", "ttft=500ms,tpot=50ms", "--target", "0.9")
    b = gp["boundary"]
    assert b["sized_on_req_per_s"] is None
    assert b["capacity_bound_req_per_s"] == pytest.approx(17.1608, rel=1e-4)
    assert b["capacity_bound_req_per_s"] > b["boundary_value"]
    assert not any(n.startswith("sized on ") for n in gp["notes"])
