"""The web app's serving panel takes a document pool (``document_pool``, ``report --document-pool``'s K:L[:zipf=S])
and runs the plan panel's host KV tier (``kv_offloading_size``, ``report --kv-offloading-size``) at the capacity,
answering what ``kvledger report`` answers for the same inputs; a bad value is refused in the CLI's words with the
field named (before, the panel took no pool and simulated without the tier)."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.errors import KvLedgerError
from kvledger.report.webapp import create_app

MODEL = "meta-llama/Llama-3.1-8B"
client = TestClient(create_app(), base_url="http://127.0.0.1")
SERVING = {"model": MODEL, "gpu": "H100", "slo": "ttft=2s", "api": "OpenAI:gpt-4.1-mini", "num_requests": 100,
           "prompt_lengths": "16", "output_lengths": "16"}
CLI = ["report", MODEL, "--gpu", "H100", "--slo", "ttft=2s", "--api", "OpenAI:gpt-4.1-mini", "--num-requests", "100",
       "--prompt-lengths", "16", "--output-lengths", "16"]


def cli_json(*args: str) -> dict:
    res = CliRunner().invoke(app, [*args, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def refused(*args: str) -> str:
    with pytest.raises(KvLedgerError) as err:
        CliRunner().invoke(app, list(args), catch_exceptions=False)
    return str(err.value)


def test_the_panel_answers_as_report_with_the_pool_and_the_tier():
    r = client.post("/api/serving", json={**SERVING, "document_pool": "2:1024:uniform", "kv_offloading_size": 1})
    assert r.status_code == 200, r.json()
    d = r.json()
    cli = cli_json(*CLI, "--document-pool", "2:1024:uniform", "--kv-offloading-size", "1")
    # the same capacity's requests with the same tier: HBM serves 98 × 1,024 = 100,352 of 104,000 prompt tokens
    # (both documents fit in it; the 98 requests after each document's first), the 1 GiB host tier nothing more
    shares = {t["tier"]: t["hit_rate"] for t in cli["kv_tiers"]["kv_tiers"]["per_tier"]}
    assert d["headline"]["kv_tier_hit_shares"] == shares == pytest.approx({"hbm": 100_352 / 104_000, "host_dram": 0})
    rows = d["figures"]["kv_tier_hits"]["rows"]
    assert rows[1][:3] == ["host_dram", "8,192", "8.0"]  # 1 GiB ÷ 2 MiB a block = 512 blocks × 16 tokens
    assert rows[0][3:] == ["96.5%", "98.5%", "96.5%"]  # simulated, Che (1,024 ÷ 1,040), replay (100,352 ÷ 104,000)
    assert d["request"]["document_pool"] == "2:1024:uniform" and d["request"]["kv_offloading_size"] == 1
    plain = client.post("/api/serving", json=SERVING).json()
    assert plain["headline"]["kv_tier_hit_shares"] is None and "kv_tier_hits" not in plain["figures"]


@pytest.mark.parametrize("extra, argv", [
    ({"document_pool": "2:nope"}, ["--document-pool", "2:nope"]),
    ({"document_pool": "0:1024"}, ["--document-pool", "0:1024"]),
    ({"document_pool": "2:1024:zipf=x"}, ["--document-pool", "2:1024:zipf=x"]),
])
def test_a_bad_pool_reads_as_the_cli_with_the_field_named(extra, argv):
    r = client.post("/api/serving", json={**SERVING, **extra})
    assert r.status_code == 400
    said = refused(*CLI, *argv)
    field = said.replace("--document-pool K", "the document pool field's K (document_pool)").replace(
        "--document-pool", "the document pool field (document_pool)")
    assert r.json()["error"] == field


def test_a_pool_on_a_trace_and_a_tier_at_zero_are_refused_before_any_simulation():
    on_trace = {k: v for k, v in SERVING.items() if k not in ("prompt_lengths", "output_lengths")}
    r = client.post("/api/serving", json={**on_trace, "document_pool": "2:1024"})
    assert r.status_code == 400 and r.json()["error"].startswith(
        "the document pool field (document_pool) puts a drawn document before each request's question, whose length "
        "a synthetic workload gives: use the prompt lengths field (prompt_lengths)")
    r = client.post("/api/serving", json={**SERVING, "kv_offloading_size": 0})
    assert r.status_code == 400 and r.json()["error"] == ("the host KV tier field (kv_offloading_size) 0 is out of "
                                                          "range; allowed: (0, 1,048,576) GiB")


@pytest.mark.parametrize("pool", ["2:trace:/etc/passwd:prompt", "2:trace:../../etc/passwd:prompt:zipf=1"])
def test_a_pool_reads_no_file_outside_the_data_folder(tmp_path, pool):
    # the pool's document lengths take the lengths fields' forms, trace:FILE:prompt among them: held to the trace
    # rule, refused before anything is read (before, /etc/passwd's first line came back in the error)
    app_dir = TestClient(create_app(data_dir=tmp_path), base_url="http://127.0.0.1")
    r = app_dir.post("/api/serving", json={**SERVING, "document_pool": pool})
    assert r.status_code == 400
    assert r.json()["error"].startswith(f"trace '{pool.split(':')[2]}' is outside the data folder")
    r = client.post("/api/serving", json={**SERVING, "document_pool": pool})
    assert r.status_code == 400 and "root:" not in r.text  # no data folder: no local file at all


def test_a_pool_drawn_by_a_bundled_traces_lengths_stays_usable():
    # beside the refusals above (the same simulation for both of their cases, so run once here): 2 documents drawn
    # by arxiv's prompt lengths
    r = client.post("/api/serving", json={**SERVING, "document_pool": "2:trace:arxiv:prompt:zipf=1"})
    assert r.status_code == 200, r.text
