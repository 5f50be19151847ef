"""search's per-token cost at a volume carries the idle GPUs of the whole instances its bill rents, as cost's does."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from kvledger.cli.main import app


def test_search_per_token_cost_times_the_volume_is_its_bill():
    # Llama-3.1-8B at TP 1 on CoreWeave, which rents H100s only as 8-GPU instances: one replica rents 8 GPUs, 7 idle.
    # The per-token ledgers carry the 7 idle GPUs (instances.idle_item), so $/Mtok in × the month's input tokens +
    # $/Mtok out × its output tokens = the monthly bill; and $/1k requests × the month's requests = the bill too
    res = CliRunner().invoke(app, ["search", "meta-llama/Llama-3.1-8B", "--gpus", "H100", "--tp", "1",
                                   "--monthly-tokens", "1B", "--slo", "ttft=2s,tpot=100ms", "--num-requests", "100",
                                   "--gpu-provider", "CoreWeave", "--json"])
    assert res.exit_code == 0, res.output
    c = next(c for c in json.loads(res.stdout)["candidates"] if c.get("status") == "feasible")
    s, cost, wl = c["sizing"], c["cost"], c["workload"]
    assert (s["idle_gpus"], s["gpus_per_instance"]) == (7, 8)
    p, o = wl["prompt_tokens_mean"], wl["output_tokens_mean"]
    tokens_in, tokens_out = 1e9 * p / (p + o) / 1e6, 1e9 * o / (p + o) / 1e6  # Mtok a month, split as the workload
    assert cost["usd_per_mtok_input"] * tokens_in + cost["usd_per_mtok_output"] * tokens_out == pytest.approx(
        s["rental_usd_per_month"], rel=1e-6)
    requests = s["rate_req_per_s"] * 3600 * 730  # a month of the offered rate
    assert cost["usd_per_1k_requests"] * requests / 1000 == pytest.approx(s["rental_usd_per_month"], rel=1e-6)
