"""The web app's serving answer as the CLI states it: with the API field empty (the page's default) the API row
compared is the CLI's own default (the cheapest row serving the same model), a row that is another model carries cost's
note, and the break-even line and what the answer rests on come with the answer (``webapp_answer``), each checked
against ``kvledger cost --simulate --json`` and the HTML report's functions for the same inputs."""

from __future__ import annotations

import json
import re

from fastapi.testclient import TestClient
from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.report.html_report import rests_on_text
from kvledger.report.webapp import create_app

client = TestClient(create_app(), base_url="http://127.0.0.1")
runner = CliRunner()
MODEL, GPU, SLO = "meta-llama/Meta-Llama-3.1-8B", "nvidia_h100_sxm", "ttft=1s,tpot=50ms"
# the trial's request: 2B tokens a month, 600 requests per simulation
BODY = {"model": MODEL, "gpu": GPU, "tp": 1, "slo": SLO, "trace": "azure-conv", "monthly_tokens": 2e9,
        "num_requests": 600}


def _app(**over) -> dict:
    r = client.post("/api/serving", json={**BODY, **over})
    assert r.status_code == 200, r.text
    return r.json()


def _cli(*extra: str, gpu: str = GPU, num_requests: int = 600) -> dict:
    res = runner.invoke(app, ["cost", "--simulate", MODEL, "--gpu", gpu, "--trace", "azure-conv", "--num-requests",
                              str(num_requests), "--slo", SLO, "--monthly-tokens", "2e9", *extra, "--json"])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)


def test_an_empty_api_field_compares_with_the_clis_default_row():
    web, cli = _app(), _cli()  # no "api": what the page sends with its API field at its default (empty)
    c = web["cost"]
    assert web["request"]["api"] is None
    # the CLI's default: the cheapest row serving the same model, here DeepInfra's 8B row
    assert c["inputs"]["api_price"] == cli["inputs"]["api_price"] == \
        "DeepInfra:meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo"
    opts = c["decision"]["api_options"]
    assert all(o["same_model"] for o in opts) and len(opts) == 4  # Together, Fireworks, Groq, DeepInfra
    assert c["decision"]["api_usd_per_month"] == min(o["usd_per_month"] for o in opts) == \
        cli["decision"]["api_usd_per_month"]
    assert web["headline"]["answer"] == cli["headline"][0]
    assert web["headline"]["answer"].startswith("answer: the API — $44.42/month on the API vs $")
    # the same model, so no "not the same model" note; DeepInfra's Turbo row serves FP8 weights, so the FP8 note
    # (api_cost.quantized_row_note), as the CLI prints it; then the one replica's missing spare (spare_note.py)
    fp8, spare = web["headline"]["notes"]
    assert spare.startswith("not priced: a spare replica — the bill is one replica")
    assert fp8.startswith("note: DeepInfra:meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo serves an FP8-quantized variant")
    assert [line.strip() for line in cli["headline"] if line.strip().startswith("note:")][0].startswith(fp8[:80])


def test_a_row_of_another_model_shows_costs_note():
    web, cli = _app(api="OpenAI:gpt-4.1"), _cli("--api", "OpenAI:gpt-4.1")
    notes = [line.strip() for line in cli["headline"] if line.strip().startswith(("note:", "not priced:"))]
    assert web["headline"]["notes"] == notes and len(notes) == 2  # the note, then the missing spare (spare_note.py)
    assert notes[1].startswith("not priced: a spare replica — the bill is one replica")
    assert notes[0].startswith("note: OpenAI:gpt-4.1 is not the same model: compare quality separately (rows serving "
                               "it: ")
    assert web["headline"]["answer"] == cli["headline"][0]


def test_the_break_even_and_what_the_answer_rests_on_come_with_it():
    web, cli = _app(), _cli()
    h = web["headline"]
    # cost's own break-even line under its answer (the 80%-utilization replica costs more than its requests on the API)
    assert h["break_even"] == next(x.strip() for x in cli["headline"] if x.strip().startswith("break-even"))
    assert h["break_even"].endswith("self-hosting never breaks even")
    # the report's "Rests on" for the same decision: the API row's confidence, the GPU price row's, the step cost
    assert h["rests_on"] == rests_on_text(cli["decision"])
    rests = cli["decision"]["rests_on"]
    assert rests[0].startswith("API price row DeepInfra:meta-llama/Meta-Llama-3.1-8B-Instruct-Turbo: low confidence")
    assert "step cost uncalibrated (roofline): the capacity is a model estimate" in rests
    assert h["rests_on"].startswith("Rests on: " + "; ".join(rests) + "; the verdict holds within ×")


def test_the_memory_rules_caveat_on_another_gpu():
    # the memory rules were measured on the H100 only: on an A100 the answer says it rests on them unvalidated
    web = _app(gpu="nvidia_a100_80gb_sxm", num_requests=100)
    cli = _cli(gpu="nvidia_a100_80gb_sxm", num_requests=100)
    assert "memory rules measured on H100 with vLLM 0.19 only: not validated on nvidia_a100_80gb_sxm" in \
        web["headline"]["rests_on"]
    assert web["headline"]["rests_on"] == rests_on_text(cli["decision"])


def test_without_a_volume_the_break_even_is_the_reports_and_nothing_rests_on_a_decision():
    from kvledger.report.html_report import break_even_text

    d = client.post("/api/serving", json={k: v for k, v in BODY.items() if k != "monthly_tokens"} | {
        "num_requests": 100}).json()
    assert d["headline"]["break_even"] == break_even_text(d["cost"]) and d["headline"]["rests_on"] is None
    assert d["cost"].get("decision") is None


def test_the_page_defaults_to_the_clis_row_and_draws_the_caveats():
    html = client.get("/").text
    assert re.search(r'fill\("api", \[\{id: "", name: "[^"]*"\}, \.\.\.c\.apis\], ""\)', html)
    assert "OpenAI:gpt-4.1" not in html
    for key in ("h.notes", "h.break_even", "h.rests_on"):
        assert key in html
    assert 'id="answer-notes"' in html and 'id="break-even"' in html and 'id="rests-on"' in html


def test_app_errors_name_fields_not_flags():
    r = client.post("/api/serving", json={**BODY, "slo": ""})
    assert r.status_code == 400 and r.json()["error"] == (
        "the SLO field is empty; write e.g. 'ttft=200ms,tpot=50ms' (keys: ttft, tpot, e2e, itl_max, itl_mean, itl_pQ)")
    r = client.post("/api/serving", json={**BODY, "slo": 5})
    assert r.status_code == 400 and r.json()["error"] == "invalid parameter: slo must be text, got 5"


def test_max_model_len_takes_a_whole_number_as_the_cli_does():
    plan = {"model": MODEL, "gpu": "H100"}
    as_number = client.post("/api/plan", json={**plan, "max_model_len": 8192})
    as_text = client.post("/api/plan", json={**plan, "max_model_len": "8K"})  # 8K = 8 × 1,024 = 8,192 tokens
    assert as_number.status_code == as_text.status_code == 200
    assert as_number.json()["plan"] == as_text.json()["plan"]
    assert as_number.json()["headline"]["max_model_len"] == 8192
    for bad in (True, 8192.5, [8192]):
        r = client.post("/api/plan", json={**plan, "max_model_len": bad})
        assert r.status_code == 400 and r.json()["error"] == (
            "invalid parameter: max_model_len must be a token count: text such as '32K' or a whole number such as "
            f"8192, got {bad!r}")
