"""The web app takes cost's people line and prompt-cache write share (team capability, engineer-months and their
price, cache-write rate), checked by cost's own rules, so a CLI bill with non-default people costs is reproduced."""

from __future__ import annotations

import json

from fastapi.testclient import TestClient
from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.errors import InputError
from kvledger.report.webapp import create_app

client = TestClient(create_app(), base_url="http://127.0.0.1")
MODEL = "meta-llama/Llama-3.2-3B"
BODY = {"model": MODEL, "gpu": "H100", "slo": "ttft=2s,tpot=100ms", "api": "OpenAI:gpt-4.1", "num_requests": 50,
        "monthly_tokens": 2e9}
CLI = ["cost", "--simulate", MODEL, "--gpu", "H100", "--slo", "ttft=2s,tpot=100ms", "--api", "OpenAI:gpt-4.1",
       "--num-requests", "50", "--monthly-tokens", "2B"]


def test_the_apps_people_fields_give_the_clis_bill():
    people = {"team_capability": "experienced", "engineer_months_per_month": 0.5, "engineer_usd_per_month": 30_000.0,
              "cache_write_rate": 0.2}
    r = client.post("/api/serving", json={**BODY, **people})
    assert r.status_code == 200, r.json()
    cli = CliRunner().invoke(app, [*CLI, "--team-capability", "experienced", "--engineer-months-per-month", "0.5",
                                   "--engineer-usd-per-month", "30000", "--cache-write-rate", "0.2", "--json"])
    assert cli.exit_code == 0, cli.output
    web, cmd = r.json()["cost"]["monthly"], json.loads(cli.stdout)["monthly"]
    # one replica on the cheapest H100 row (RunPod, $2.69/GPU-h × 730 h = $1,963.70) + 0.5 engineer-month × $30,000
    # = $15,000: $16,963.70, the CLI's to the cent; the API bill with 20% of input tokens written to the cache as well
    assert web["self_host"]["total_usd"] == cmd["self_host"]["total_usd"] == 16_963.7
    assert web["self_host"]["items"][-1]["quantity"] == 0.5
    assert web["api"]["total_usd"] == cmd["api"]["total_usd"]
    plain = client.post("/api/serving", json=BODY).json()["cost"]["monthly"]
    assert plain["self_host"]["total_usd"] == 1_963.7 + 5_000  # team 'some': 0.25 × $20,000


def test_the_people_fields_are_refused_in_costs_words_before_any_simulation():
    # (the app's fields, cost's flags, cost's message: the app's names it by the field, as for its other fields)
    cases = [({"team_capability": "great"}, ["--team-capability", "great"],
              "team capability must be one of experienced, some, none, got 'great'",
              "the team capability field (team_capability) must be one of experienced, some, none, got 'great'"),
             ({"engineer_months_per_month": -1}, ["--engineer-months-per-month", "-1"],
              "--engineer-months-per-month -1 is out of range; allowed: [0, 1,000,000] engineer-months/month",
              "the engineer-months field (engineer_months_per_month) -1 is out of range; allowed: [0, 1,000,000] "
              "engineer-months/month"),
             ({"cache_write_rate": 2}, ["--cache-write-rate", "2"],
              "--cache-write-rate 2 is out of range; allowed: [0, 1] (fraction)",
              "cache_write_rate 2 is out of range; allowed: [0, 1] (fraction)")]
    for fields, flags, cli_said, app_said in cases:
        r = client.post("/api/serving", json={**BODY, **fields})
        assert (r.status_code, r.json()["error"]) == (400, app_said)
        res = CliRunner().invoke(app, [*CLI, *flags])
        assert isinstance(res.exception, InputError) and str(res.exception) == cli_said  # exit 2 at the console
