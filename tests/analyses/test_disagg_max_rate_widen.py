"""`disagg --search-max-rate` widens its bracket upward before bisecting: a user trial (OPT-13B, 3 × A100, 512 in / 64
out at --rate 4) printed 1.72 req/s/GPU for every deployment — 1.5 × 3.45 ÷ 3, the bracket's ceiling — and called them
the same, while --rate 30 showed colocated 9.06 against 2P:1D 11.70."""

from __future__ import annotations

import pytest

from kvledger.analyses.judgments.pd_disagg import Deployment, DeploymentResult, DisaggStudy, search_max_rate
from kvledger.analyses.judgments.pd_disagg_summary import DisaggReport
from kvledger.ledgers.boundary_widen import MAX_DOUBLINGS, widen_upward
from kvledger.ledgers.slo import parse_slo


def result(label, kind, thr, good_per_gpu):  # as test_pd_disagg's: one deployment's figures, hand-set
    stats = {"mean": 0.1, "p50": 0.1, "p90": 0.2, "p99": 0.3, "count": 10}
    return DeploymentResult(label, kind, 4, 0, 0, stats, stats, stats, stats, thr, thr * 100, good_per_gpu * 4,
                            good_per_gpu, good_per_gpu * 4 / thr, {}, 10, 0, 0)


def report(*deps):
    return DisaggReport("m", "g", {"offered_rate_req_per_s": 10.0}, 4, {"text": "ttft ≤ 200 ms"}, 0.9,
                        {"name": "nvlink", "bytes_per_s_one_way": 4.5e11}, "", "prefill", list(deps))


def test_widening_doubles_until_the_target_fails():
    tried = []

    def meets(v):  # the target holds up to 27 req/s
        tried.append(v)
        return v <= 27.0

    w = widen_upward(meets, 6.0)  # 6, 12, 24 meet; 48 misses → bracket [24, 48]
    assert (w.good, w.bad, w.tried, w.capped) == (24.0, 48.0, [6.0, 12.0, 24.0, 48.0], False) and tried == w.tried
    w = widen_upward(lambda v: v <= 5.0, 6.0)  # the first high end already misses: no widening
    assert (w.good, w.bad, w.tried) == (None, None, [6.0])
    w = widen_upward(lambda v: True, 6.0)  # always met: 6 × 2⁵ = 192 is the last probe, a lower bound
    assert MAX_DOUBLINGS == 5 and w.capped and (w.good, w.bad) == (192.0, None) and len(w.tried) == 6


def test_the_search_finds_a_boundary_above_one_and_a_half_times_the_rate():
    from kvledger.accounting.settings import make_settings
    from kvledger.catalog.gpus import get_gpu
    from kvledger.catalog.models import load_model
    from kvledger.dynamics.engine.kv_transfer import link_from_gpu
    from kvledger.dynamics.workload.synthetic import Uniform, synthetic_workload

    gpu = get_gpu("H100-SXM")
    study = DisaggStudy(load_model("meta-llama/Llama-3.1-8B"), gpu, make_settings(max_model_len=8192),
                        link_from_gpu(gpu, "nvlink", 1e-3), parse_slo("ttft=200ms,tpot=50ms"))

    def load(rate):
        return synthetic_workload(120, rate_per_s=rate, prompt=Uniform(200, 2000), output=Uniform(20, 200), seed=5)

    d = search_max_rate(study, Deployment("colocated", 1), load, 2.0)
    # 1.5 × 2 = 3, then 6, 12, 24 meet and 48 misses: the bisection runs in [24, 48] to 2 % of 24 (0.48 req/s); the
    # old bracket [0.2, 3] reported 3 req/s, the ceiling
    assert "bracket widened: the target held at 3, 6, 12, 24 req/s, not at 48" in d["notes"]
    assert d["boundary_is_lower_bound"] is False
    assert 24.0 <= d["boundary_value"] < d["first_failing_value"] <= 48.0
    assert d["first_failing_value"] - d["boundary_value"] <= 0.48


def _searched(label, kind, per_gpu, capped):
    r = result(label, kind, 10.0, 1.0)
    r.max_rate_per_gpu = per_gpu
    r.max_rate_search = {"boundary_value": per_gpu * 4, "boundary_is_lower_bound": capped}
    return r


def test_a_capped_search_prints_at_least_and_no_same_verdict():
    from kvledger.analyses.judgments.pd_disagg_summary import verdict
    from kvledger.report.disagg_view import disagg_row

    co, sp = _searched("colocated ×4", "colocated", 1.72, True), _searched("2P:2D", "disaggregated", 1.72, True)
    v = verdict(report(co, sp))[1]
    assert "colocated ×4 ≥ 1.72, best split 2P:2D ≥ 1.72 req/s" in v and "the same within 2 %." not in v.split(
        "DistServe")[1]
    assert "neither is known to be ahead" in v and disagg_row(co)[-1] == "≥ 1.72"
    # one capped at 3.00 against an exact 2.00: ahead by at least 3.00 / 2.00 = ×1.50
    v = verdict(report(_searched("colocated ×4", "colocated", 3.0, True),
                       _searched("2P:2D", "disaggregated", 2.0, False)))[1]
    assert "colocated ×4 is ahead at least ×1.50" in v
    # capped at 2.00 against an exact 3.00: which is ahead is not known
    v = verdict(report(_searched("colocated ×4", "colocated", 2.0, True),
                       _searched("2P:2D", "disaggregated", 3.0, False)))[1]
    assert "which is ahead is not known" in v
    # neither capped: as before, 3.00 / 2.00 = ×1.50
    v = verdict(report(_searched("colocated ×4", "colocated", 2.0, False),
                       _searched("2P:2D", "disaggregated", 3.0, False)))[1]
    assert "2P:2D is ahead ×1.50" in v


@pytest.mark.parametrize("rate", [4.0])
def test_cli_trial_512_in_64_out(tmp_path, rate):
    import json

    from typer.testing import CliRunner

    from kvledger.cli.main import app

    trace = tmp_path / "ds.csv"
    trace.write_text("num_prefill_tokens,num_decode_tokens\n" + "512,64\n" * 120)
    r = CliRunner().invoke(app, ["disagg", "facebook/opt-13b", "--gpu", "A100-80GB", "--trace", str(trace), "--rate",
                                 str(rate), "--num-gpus", "3", "--slo", "ttft=400ms,tpot=40ms", "--no-tune",
                                 "--search-max-rate", "--json"], catch_exceptions=False)
    assert r.exit_code == 0
    d = json.loads(r.stdout)
    ceiling = 1.5 * d["workload"]["offered_rate_req_per_s"] / 3  # the old bracket's top, per GPU
    for x in d["deployments"]:  # each deployment's boundary lies past the old ceiling
        assert x["max_rate_per_gpu"] > ceiling and x["max_rate_search"]["boundary_is_lower_bound"] is False


def test_equal_throughput_below_the_offered_rate_is_the_replays_not_the_deployments():
    # the trial: Llama-3.1-70B, 8 × H100, TP 4, 300 requests at 12 req/s: colocated 8.48 and 1P:1D 8.40 req/s (within
    # 2 %: 8.40 / 8.48 − 1 = −0.9 %) both under 12 × 0.98 = 11.76; 1P:1D 26.7 % good against 73.0 %
    from kvledger.analyses.judgments.pd_disagg_summary import verdict

    co, sp = result("colocated 2×TP4", "colocated", 8.48, 0.774), result("1P(TP4):1D(TP4)", "disaggregated", 8.40, 0.28)
    rep = report(co, sp)
    rep.workload = {"offered_rate_req_per_s": 12.0, "num_requests": 300}
    v = verdict(rep)
    assert v[0].startswith("Throughput is set by the offered load, not by the deployment: colocated 2×TP4 8.48 req/s")
    assert "below the 12.00 req/s offered — a replay of 300 requests finishes no faster than they arrive" in v[0]
    assert "the same" not in v[0] and "documentation" not in " ".join(v)
    assert "colocated is ahead ×2.76" in v[1]  # 0.774 / 0.28 = 2.764: goodput tells them apart


def test_the_header_says_requested_and_realised_rates():
    # a lengths-only trace draws Poisson gaps with --seed: --rate 12 realised 10.34 req/s over 300 requests (seed 0)
    from kvledger.report.disagg_view import rate_words

    w = {"num_requests": 300, "offered_rate_req_per_s": 10.3437, "requested_rate_req_per_s": 12.0, "seed": 0}
    assert rate_words(w) == "requested 12 req/s, realised 10.34 over 300 requests (seed 0)"
    assert rate_words(w, whole_trace=True).endswith("over 300 requests (the whole trace, seed 0)")
    w.update(offered_rate_req_per_s=12.0)  # a timed trace's gaps rescaled: the rate asked is the rate realised
    assert rate_words(w) == "300 requests at 12.00 req/s offered"
    w.update(requested_rate_req_per_s=None)  # the trace's own rate
    assert rate_words(w) == "300 requests at 12.00 req/s offered"


def test_cli_json_keeps_the_requested_rate(tmp_path):
    import json

    from typer.testing import CliRunner

    from kvledger.cli.main import app

    trace = tmp_path / "ds.csv"
    trace.write_text("num_prefill_tokens,num_decode_tokens\n" + "512,64\n" * 40)
    args = ["disagg", "facebook/opt-13b", "--gpu", "A100-80GB", "--trace", str(trace), "--rate", "12", "--num-gpus",
            "2", "--no-tune"]
    d = json.loads(CliRunner().invoke(app, [*args, "--json"], catch_exceptions=False).stdout)["workload"]
    assert d["requested_rate_req_per_s"] == 12.0 and d["seed"] == 0 and d["num_requests"] == 40
    out = " ".join(CliRunner(env={"COLUMNS": "250"}).invoke(app, args, catch_exceptions=False).stdout.split())
    realised = d["offered_rate_req_per_s"]  # 39 gaps ÷ their span, a Poisson draw of seed 0
    assert f"requested 12 req/s, realised {realised:,.2f} over 40 requests (the whole trace, seed 0)" in out
