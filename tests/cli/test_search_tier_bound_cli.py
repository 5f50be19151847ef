"""search --offload: a tier variant is sized and priced on its base candidate's capacity bound, and a variant that is
not feasible carries no capacity band of its base's."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvledger.cli.main import app

runner = CliRunner()

# 60 requests of 1,024 prompt and 2 output tokens under a lax TTFT: the probes meet the target above what one H100 can
# keep pace with. The bound (analyses/serving/work_bounds.py), Llama-3.2-3B on one H100, uncalibrated roofline:
#   matmul params 2,818,747,392, head 788,004,864 FLOPs per sequence, matmul rate 989.5e12 × 0.70723 = 6.99801e14/s;
#   w = (2 × 2,818,747,392 × 1,025 + 788,004,864 × 2) / 6.99801e14 = 8.25946 ms of matmuls
#     + 114,688 B/token × (1 × 1,024 + 0 + 1,024) tokens / (3.35e12 × 0.8 B/s) = 0.08764 ms of KV reads = 8.34710 ms;
#   every request alike, so k ÷ Σ of the k smallest w = 1 ÷ w = 119.80 req/s (k = ⌈0.9 × 60⌉ = 54).
SHORT = ["search", "meta-llama/Llama-3.2-3B", "--slo", "ttft=60s", "--num-requests", "60", "--prompt-lengths",
         "fixed:1024", "--output-lengths", "fixed:2", "--gpus", "H100", "--tp", "1", "--rate", "5", "--json"]
BOUND = 1 / (2 * 2_818_747_392 * 1025 / 6.99801e14 + 788_004_864 * 2 / 6.99801e14 + 114_688 * 2048 / (3.35e12 * 0.8))


def _by_id(args: list[str]) -> dict[str, dict]:
    res = runner.invoke(app, args)
    assert res.exit_code == 0, res.output
    return {c["id"]: c for c in json.loads(res.stdout)["candidates"]}


@pytest.mark.parametrize("cv", ["0", "1"])
def test_a_tier_variant_is_sized_and_priced_on_the_bound_of_its_base(cv):
    # cv 1: the base's probes met 121 req/s, above the bound; the variant starts there, met, and is sized on the bound.
    # cv 0: the base met 119 req/s (below the bound), but the variant's bisection met 148.75 — above it: capped too.
    c = _by_id([*SHORT, "--arrival-cv", cv, "--offload", "none,cpu:64GiB"])
    base, v = c["nvidia_h100_sxm:tp1:kv-auto"], c["nvidia_h100_sxm:tp1:kv-auto:offload-cpu-64GiB"]
    assert base["bounds"]["capacity_bound_req_per_s"] == pytest.approx(BOUND, rel=1e-4)
    cap = v["capacity"]
    assert cap["slo_capacity_req_per_s"] > base["bounds"]["capacity_bound_req_per_s"]
    assert cap["sized_on_req_per_s"] == base["bounds"]["capacity_bound_req_per_s"]
    assert v["sizing"]["sizing_req_per_s"] == base["bounds"]["capacity_bound_req_per_s"]
    assert any(n.startswith("sized on 119.8 req/s, the capacity bound, not on the ") for n in cap["notes"])
    # priced on the run with the tier at the bound: every request within the SLO there, 119.80 × 1.0 good req/s
    assert cap["attainment_at_sized_rate"] == 1.0
    assert cap["goodput_req_per_s"] == pytest.approx(BOUND, rel=1e-4)
    # its band is centred on the rate sized on, as the base's (same GPU and regime: the same multipliers)
    assert v["capacity_band"]["low"] == pytest.approx(BOUND * base["capacity_band"]["low_multiplier"], rel=1e-4)
    # no probe above the first rate met at or past the bound: the doubling ends there (119.8 ≤ rate < 2 × 121)
    assert max(r for r, _ in cap["probes"]) < 2 * 121.0



def test_a_skipped_or_rejected_tier_variant_carries_no_capacity_band(monkeypatch):
    # prefix caching off: the variant is skipped (nothing to load); it must not show its base's band
    c = _by_id([*SHORT, "--prefix-caching", "on,off", "--offload", "none,cpu:64GiB"])
    assert c["nvidia_h100_sxm:tp1:kv-auto:pc-off"]["capacity_band"] is not None
    skipped = c["nvidia_h100_sxm:tp1:kv-auto:pc-off:offload-cpu-64GiB"]
    assert skipped["status"] == "skipped" and "capacity_band" not in skipped
    # a tier that misses at every rate (start: the base's capacity 126 req/s ÷ 64 = 1.97 the lowest simulated; 121
    # before 122 and 124 req/s, 2-3 % past the 119.8 req/s compute bound in 60-request runs, stopped being read as
    # queues growing from two instants: backlog_windows): rejected, no band either
    import kvledger.analyses.search.tier_entries as te

    monkeypatch.setattr(te, "tier_capacity", lambda p, start, bound=None: (None, start / 64))
    c = _by_id([*SHORT, "--arrival-cv", "1", "--offload", "none,cpu:64GiB"])
    assert c["nvidia_h100_sxm:tp1:kv-auto"]["capacity_band"] is not None
    rejected = c["nvidia_h100_sxm:tp1:kv-auto:offload-cpu-64GiB"]
    assert rejected["status"] == "rejected" and "capacity_band" not in rejected
    assert "no request rate down to 1.97 req/s" in rejected["detail"]
