"""``goodput --simulate --target --json`` on the rate axis carries the good rate sustained at the boundary, the figure
its text and ``cost``/``search`` give (boundary rate × its probe's share within the SLO), beside the probe's goodput
(a fresh user's trial: the text printed it, the JSON had no such key)."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvledger.cli.main import app


def test_the_boundary_json_gives_the_sustained_good_rate():
    res = CliRunner().invoke(app, ["goodput", "--simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100",
                                   "--prompt-lengths", "fixed:512", "--output-lengths", "fixed:64", "--num-requests",
                                   "60", "--slo", "ttft=500ms", "--target", "0.9", "--axis", "rate", "--json"])
    assert res.exit_code == 0, res.output
    b = json.loads(res.output.strip().splitlines()[-1])["boundary"]
    share = next(p["attainment"] for p in b["points"] if p["value"] == b["boundary_value"])
    # rate × share: what a replica fed the boundary rate serves within the SLO; the goodput divides by the probe's
    # first arrival → last finish, drain included, so it is no larger
    assert b["sustained_good_req_per_s_at_boundary"] == pytest.approx(b["boundary_value"] * share)
    assert b["goodput_at_boundary_req_per_s"] <= b["sustained_good_req_per_s_at_boundary"]
