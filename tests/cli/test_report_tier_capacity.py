"""``kvledger report`` with a KV tier finds the SLO capacity with the tier too: the same rate search as the capacity
without it, each probe ``goodput --simulate``'s run with the tier flags, shown beside the capacity without it with both
80% bands, the tier's hit share at the capacity with it and whether the difference is inside the band. Before, the KV
tiers section showed the tier only at the capacity found without it (the search's probes did not run the tier), and
under ``--gpu-profile`` the plan's tiers were priced with the default fractions."""

from __future__ import annotations

import json
import shlex

import pytest
from cli_run import MODEL, cli_json, run_cli, write_gpu_profile

# 400 requests, each prompt one of 40 documents of 1,024 tokens (uniform) + a 16-token question, 16 output tokens;
# --gpu-memory-utilization 0.24 leaves HBM 9,408 tokens (9.2 documents), the 8 GiB host tier holds 65,536 (all 40)
W = ["--gpu", "H100", "--prompt-lengths", "16", "--output-lengths", "16", "--num-requests", "400", "--slo",
     "ttft=300ms", "--api", "OpenAI:gpt-4.1-mini", "--document-pool", "40:1024:uniform", "--gpu-memory-utilization",
     "0.24", "--max-model-len", "4096"]
HOST = ["--kv-offloading-size", "8"]
H100 = "NVIDIA H100 80GB SXM5"  # the catalog name `--gpu H100` resolves to


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[dict, str]:
    """The report with the host tier, run once for the module: its --json document and the HTML --out wrote."""
    out = tmp_path_factory.mktemp("tier_report") / "r.html"
    return cli_json("report", MODEL, *W, *HOST, "--out", str(out)), out.read_text()


@pytest.fixture(scope="module")
def report(built) -> dict:
    return built[0]


def _goodput_at(report: dict, rate: float, *extra: str) -> dict:
    """``goodput --simulate`` with the tier flags at ``rate``: the report's own kv_tiers command line."""
    cmd = report["commands"]["kv_tiers"].replace("RATE", repr(rate))
    return cli_json(*shlex.split(cmd)[1:], *extra)


def test_both_capacities_from_the_search(report):
    c = report["kv_tiers"]["capacity"]
    # without the tier: the headline's capacity (cost --simulate's search), 35.5 req/s, its band 28.96–39.73 req/s
    assert c["without_tier"]["slo_capacity_req_per_s"] == report["cost"]["capacity"]["slo_capacity_req_per_s"] == 35.5
    band = c["without_tier"]["error_band"]
    assert (round(band["low"], 2), round(band["high"], 2)) == (28.96, 39.73)
    # with it: doubling from 1 req/s met the target up to 32 and missed at 64 (83.25%), then the bisection
    # 48 ✓, 56 ✓ (93.25%), 60 ✗ (87.25%), 58 ✗ (89.25%), 57 ✓ (90.5%), 57.5 ✓ (90.25%): 57.5 req/s, to 1% of 58
    w = c["with_tier"]
    assert (w["slo_capacity_req_per_s"], w["first_failing_req_per_s"]) == (57.5, 58.0)
    assert [p[0] for p in c["probes_with_tier"]] == [1, 2, 4, 8, 16, 32, 64, 48, 56, 60, 58, 57, 57.5]
    # 57.5 is past the band's 39.73: the tier changes the capacity the decision rests on
    assert c["inside_band"] is False and w["sized_on_req_per_s"] == 57.5
    # the host tier served 66.0% of prompt tokens there: 400 × 1,040 = 416,000 prompt tokens, HBM 22.6%
    assert w["hit_share"]["host_dram"] == pytest.approx(0.66008, abs=1e-5)
    # the headline stays on the capacity without the tier: the cost prices 35.5 req/s
    assert report["kv_tiers"]["rate_req_per_s"] == 35.5


def test_the_capacity_with_the_tier_is_goodput_simulates(report):
    w = report["kv_tiers"]["capacity"]["with_tier"]
    # goodput --simulate … --slo ttft=300ms --rate 57.5 --kv-offloading-size 8: attainment 0.9025 (361 of 400 within
    # the SLO) ≥ the 90% target; at 58 req/s 0.8925 (357 of 400) misses it: 57.5 is the capacity at 1% resolution
    at, above = _goodput_at(report, 57.5), _goodput_at(report, 58.0)
    assert (at["attainment"], above["attainment"]) == (0.9025, 0.8925)
    assert at["attainment"] == w["attainment_at_boundary"]
    # and the tier's hit share at the capacity is that run's host_dram row
    host = next(r for r in at["kv_tiers"]["per_tier"] if r["tier"] == "host_dram")
    assert host["hit_rate"] == w["hit_share"]["host_dram"]


def test_the_caption_states_both_capacities(built):
    html = built[1].replace("&#x27;", "'")
    assert ("35.5 req/s without the tiers (80% band 28.96–39.73 req/s, uncalibrated roofline) → 57.5 req/s with them "
            "(80% band 46.91–64.36 req/s, uncalibrated roofline)") in html
    assert "at 57.5 req/s: hbm 22.6%, host_dram 66.0%; the difference is outside the band" in html


def test_no_tier_no_second_search():
    # a document pool alone: the section has no capacity block (no search with a tier is run)
    d = cli_json("report", MODEL, *W[:-4])
    assert "capacity" not in d["kv_tiers"]


@pytest.fixture()
def profile(tmp_path):
    # a hand-written GPU profile for the H100: 50% of peak FLOP/s, 60% of peak bandwidth (as test_gpu_profile_flag)
    return write_gpu_profile(tmp_path / "h100.json", H100, MODEL)


def test_the_gpu_profile_prices_the_tiers(profile):
    d = cli_json("report", MODEL, *W, *HOST, "--gpu-profile", str(profile))
    # the plan section is plan --gpu-profile's, its tiers' break-evens included (before: priced at 70% / 80%, the
    # defaults, and the plan command line had no --gpu-profile)
    cmd = d["commands"]["plan"]
    assert f" --gpu-profile {profile} " in cmd
    assert cli_json(*shlex.split(cmd)[1:]) == d["plan"]
    assert "matmuls at 50% of peak FLOP/s, 60% of peak bandwidth" in d["plan"]["kv_tiers"]["priced_by"]
    # the search with the tier runs with the profile: slower steps, 44 req/s (57.5 unprofiled); goodput --simulate
    # --gpu-profile … --rate 44 --kv-offloading-size 8: 0.9 (360 of 400) meets the 90% target, 44.5: 0.89 (356) misses
    c = d["kv_tiers"]["capacity"]
    assert (c["without_tier"]["slo_capacity_req_per_s"], c["with_tier"]["slo_capacity_req_per_s"]) == (28.25, 44.0)
    assert c["with_tier"]["first_failing_req_per_s"] == 44.5
    assert (_goodput_at(d, 44.0)["attainment"], _goodput_at(d, 44.5)["attainment"]) == (0.9, 0.89)


def test_a_small_tier_moves_the_capacity_inside_the_band(tmp_path):
    # 2 GiB of host offloading = 1,024 blocks of 2 MiB = 16,384 tokens (16 documents): beside HBM's 9.2 it holds 16 of
    # the 40, so it serves 13.9% of prompt tokens at the capacity with it; the search: 36 ✓, 38 ✓ (94.75%),
    # 39 ✓ (93.5%), 39.5 ✓ (91.25%), 40 ✗ (88.75%): 39.5 req/s, inside the 28.96–39.73 band of the 35.5 without it
    out = tmp_path / "r.html"
    res = run_cli("report", MODEL, *W, "--kv-offloading-size", "2", "--out", str(out), "--json")
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    c = d["kv_tiers"]["capacity"]
    w = c["with_tier"]
    assert (c["without_tier"]["slo_capacity_req_per_s"], w["slo_capacity_req_per_s"]) == (35.5, 39.5)
    assert w["first_failing_req_per_s"] == 40.0 and c["inside_band"] is True
    assert w["hit_share"]["host_dram"] == pytest.approx(0.13862, abs=1e-5)
    # goodput --simulate … --rate 39.5 --kv-offloading-size 2: 0.9125 (365 of 400) meets 90%; --rate 40: 0.8875 (355)
    assert (_goodput_at(d, 39.5)["attainment"], _goodput_at(d, 40.0)["attainment"]) == (0.9125, 0.8875)
    html = out.read_text().replace("&#x27;", "'")
    assert "35.5 req/s without the tiers (80% band 28.96–39.73 req/s, uncalibrated roofline) → 39.5 req/s" in html
    assert ("the difference is inside the band of the capacity without them: the tiers do not change the decision"
            in html)
