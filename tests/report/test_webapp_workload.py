"""The web app's /api/serving takes the report's synthetic workload by field name (``prompt_lengths``,
``output_lengths``, ``shared_prefix_tokens``), checked as ``kvledger report`` checks its flags and passed to the same
simulation builder ``cost --simulate`` uses: the same workload gives cost's capacity, bill and verdict, and the answer
carries what it rests on and the capacity bound's warning."""

from __future__ import annotations

import json

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.report.webapp import create_app

client = TestClient(create_app(), base_url="http://127.0.0.1")
BASE = {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "slo": "ttft=500ms,tpot=50ms", "num_requests": 300,
        "monthly_tokens": 3e9, "api": "OpenAI:gpt-4.1-mini"}
LENGTHS = {"prompt_lengths": "uniform:1600:2100", "output_lengths": "uniform:100:300"}


def test_a_synthetic_workload_gives_cost_simulates_answer():
    r = client.post("/api/serving", json={**BASE, **LENGTHS})
    assert r.status_code == 200, r.text
    res = CliRunner().invoke(app, ["cost", "--simulate", BASE["model"], "--gpu", "H100", "--slo", BASE["slo"],
                                   "--num-requests", "300", "--prompt-lengths", "uniform:1600:2100",
                                   "--output-lengths", "uniform:100:300", "--monthly-tokens", "3e9", "--api",
                                   "OpenAI:gpt-4.1-mini", "--json"])
    assert res.exit_code == 0, res.output
    h, cost = r.json()["headline"], json.loads(res.output)
    # the 300-request probes find 18 req/s; both size on the capacity bound, 17.076 req/s (work_bounds): 1 replica,
    # 1 H100 × 730 h × $2.69 + $5,000 of people = $6,963.70 a month against the API's $1,548.82
    assert h["sizing_req_per_s"] == cost["capacity"]["sizing_req_per_s"] == pytest.approx(17.0764, rel=1e-4)
    assert cost["capacity"]["sized_on_req_per_s"] == h["sizing_req_per_s"]  # below the 18 req/s found
    assert cost["capacity"]["slo_capacity_req_per_s"] == 18
    assert h["verdict"] == cost["verdict"] and "$6,963.70/month self-hosted" in h["verdict"]
    assert r.json()["cost"]["decision"]["replicas"] == cost["decision"]["replicas"] == 1
    # what the verdict rests on and its notes, as cost says them: the price row's confidence, the uncalibrated step
    # cost, the capacity band ×1/(1 + q90) … ×1/(1 + q10) = ×1/1.2258 … ×1/0.8935 = ×0.82–×1.12 (error_bands.json
    # uncalibrated/dense/vllm throughput); gpt-4.1-mini is another model than Llama-3.1-8B
    assert h["rests_on"].startswith("Rests on: GPU price row: medium confidence (RunPod H100 80GB SXM")
    assert "step cost uncalibrated (roofline)" in h["rests_on"] and "×0.82–×1.12 capacity" in h["rests_on"]
    assert h["notes"][0].startswith("note: OpenAI:gpt-4.1-mini is not the same model") and \
        cost["decision"]["rests_on"] == r.json()["cost"]["decision"]["rests_on"]
    assert "sized on 17.08 req/s, the capacity bound" in h["capacity_warning"]
    assert r.json()["request"]["prompt_lengths"] == "uniform:1600:2100"


@pytest.mark.parametrize(("fields", "named"), [
    ({"prompt_lengths": "uniform:1600:2100"}, "the prompt lengths field (prompt_lengths) and the output lengths field "
                                              "(output_lengths)"),
    ({**LENGTHS, "trace": "azure-code"}, "give either the traffic (trace) field or a synthetic workload"),
    ({"prompt_lengths": "uniform:9:1", "output_lengths": "fixed:10"}, "the prompt lengths field (prompt_lengths): "),
    ({**LENGTHS, "shared_prefix_tokens": 0}, "the shared prefix field (shared_prefix_tokens) 0 is out of range"),
])
def test_a_bad_workload_field_is_refused_naming_it(fields, named):
    r = client.post("/api/serving", json={**BASE, **fields})
    assert r.status_code == 400 and named in r.json()["error"], r.text
    assert "--" not in r.json()["error"]  # the fields, not the CLI's flags


@pytest.mark.parametrize("lengths", ["trace:/etc/passwd:prompt", "trace:../../etc/passwd:prompt"])
def test_a_length_field_reads_no_file_outside_the_data_folder(tmp_path, lengths):
    # trace:NAME:prompt reads a trace: the length fields are held to the trace field's rule (bundled names, files
    # inside --data-dir), refused before anything is read; a review read /etc/passwd's first line back through the
    # error message
    app_dir = TestClient(create_app(data_dir=tmp_path), base_url="http://127.0.0.1")
    r = app_dir.post("/api/serving", json={**BASE, "prompt_lengths": lengths, "output_lengths": "fixed:10"})
    assert r.status_code == 400
    assert r.json()["error"].startswith(f"trace '{lengths.split(':')[1]}' is outside the data folder")
    assert "root:" not in r.text
    r = client.post("/api/serving", json={**BASE, "prompt_lengths": lengths, "output_lengths": "fixed:10"})
    assert r.status_code == 400 and "root:" not in r.text  # no data folder: no local file at all
