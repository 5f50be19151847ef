"""The web app's plan panel takes a host KV tier, vLLM's --kv-offloading-size (GiB summed over the TP ranks), as
`kvledger plan` takes it: the same kv_tiers section, its host tier's tokens on a card, and a bad size refused in the
field's words (before, the app had no tier option at all)."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.report.webapp import create_app

client = TestClient(create_app(), base_url="http://127.0.0.1")
MODEL = "meta-llama/Llama-3.1-8B"
CTX = "1K,2K,4K,8K,16K,32K,64K,128K"


def test_a_host_tier_plans_as_plan_kv_offloading_size():
    r = client.post("/api/plan", json={"model": MODEL, "gpu": "H100", "max_model_len": "32K", "kv_offloading_size": 64})
    assert r.status_code == 200, r.json()
    cli = CliRunner().invoke(app, ["plan", MODEL, "--gpu", "H100", "--max-model-len", "32K", "--kv-offloading-size",
                                   "64", "--context", CTX, "--json"])
    assert cli.exit_code == 0, cli.output
    assert r.json()["plan"] == json.loads(cli.stdout)
    # 64 GiB ÷ (131,072 B a token × 16 tokens a block) = 32,768 blocks = 524,288 tokens (Llama-3.1-8B at TP 1)
    assert r.json()["headline"]["host_kv_tier_tokens"] == 524_288
    assert r.json()["request"]["kv_offloading_size"] == 64
    plain = client.post("/api/plan", json={"model": MODEL, "gpu": "H100"}).json()
    assert plain["headline"]["host_kv_tier_tokens"] is None and "kv_tiers" not in plain["plan"]


@pytest.mark.parametrize("size", [0, -5])
def test_a_size_at_or_below_zero_reads_in_the_fields_words(size):
    r = client.post("/api/plan", json={"model": MODEL, "gpu": "H100", "kv_offloading_size": size})
    assert r.status_code == 400
    assert r.json()["error"] == (f"the host KV tier field (kv_offloading_size) {size} is out of range; allowed: "
                                 "(0, 1,048,576) GiB")
