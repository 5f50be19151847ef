"""--utilization with a monthly volume is refused at the boundary, before any simulation, in cost, report and the web
app (the fresh user's case: the headline said 4.8% realized while the ledgers and the secondary line were at 90%);
without a volume it still prices one replica."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from kvledger.cli.main import app

FILE = str(Path(__file__).resolve().parents[1] / "evidence/data/llmperf/leaderboard_individual_anyscale_70b.json")
COST = ["cost", FILE, "--slo", "ttft=500ms,tpot=50ms", "--api", "OpenAI:gpt-4.1", "--gpu", "H100", "--gpu-provider",
        "Nebius", "--num-gpus", "4"]



@pytest.mark.parametrize("volume", [["--monthly-tokens", "3e9"], ["--monthly-requests", "1e6"],
                                    ["--monthly-input-tokens", "2e9", "--monthly-output-tokens", "1e9"]])
def test_cost_refuses_utilization_with_a_volume_in_one_paragraph(monkeypatch, capsys, volume, cli_entry):
    code, out, err = cli_entry(*COST, "--utilization", "0.9", *volume)
    assert code == 2 and out == ""
    assert err.startswith("error: --utilization 0.9 cannot be given with a monthly volume")
    assert err.count("\n") == 1  # one paragraph
    # both fixes, and what caps the utilization with a volume
    assert "Drop --utilization to price the volume at its realized utilization (with a volume, --max-utilization " \
           "caps the utilization each replica is sized for), or drop the volume" in err


def test_refused_before_simulating_and_as_json_too(monkeypatch, capsys, cli_entry):
    # --simulate: refused with the other input checks (cost_inputs.check_inputs), before the capacity search runs
    code, out, err = cli_entry("cost", "--simulate", "meta-llama/Llama-3.1-8B", "--gpu",
                                "H100-SXM", "--slo", "ttft=200ms,tpot=50ms", "--monthly-tokens", "3e9",
                                "--utilization", "0.9", "--json")
    assert code == 2 and "cannot be given with a monthly volume" in err
    e = json.loads(out)["error"]
    assert (e["exit_code"], e["type"]) == (2, "InputError")
    assert e["message"].startswith("--utilization 0.9 cannot be given with a monthly volume")


def test_without_a_volume_utilization_prices_one_replica():
    res = CliRunner().invoke(app, [*COST, "--utilization", "0.5", "--json"])
    d = json.loads(res.stdout)
    assert res.exit_code == 0 and d["decision"] is None
    assert (d["inputs"]["utilization"], d["inputs"]["utilization_how"]) == (0.5, "given (--utilization)")
    assert d["secondary"].startswith("secondary (not the verdict): at 50.0% utilization (given (--utilization))")


def test_report_and_the_web_app_refuse_it_before_any_simulation():
    from kvledger.analyses.serving.decision_data import ReportRequest, build_report_data
    from kvledger.errors import InputError
    from kvledger.report.webapp import create_app

    req = ReportRequest(model="meta-llama/Llama-3.1-8B", gpu="H100", slo="ttft=200ms,tpot=50ms", utilization=0.9,
                        monthly_tokens=3e9)
    stages: list[str] = []
    with pytest.raises(InputError, match=r"^--utilization 0.9 cannot be given with a monthly volume"):
        build_report_data(req, progress=stages.append)
    assert stages == []  # not even the memory plan
    app = TestClient(create_app(), base_url="http://127.0.0.1")  # the app answers a Host naming this machine only
    r = app.post("/api/serving", json={"model": "meta-llama/Llama-3.1-8B", "gpu": "H100",
                                       "slo": "ttft=200ms,tpot=50ms", "utilization": 0.9, "monthly_tokens": 3e9})
    # in the app's words: its utilization and volume fields
    assert r.status_code == 400 and r.json()["error"].startswith(
        "utilization 0.9 (the utilization field) cannot be given with a monthly volume (the volume field, or the "
        "input and output tokens fields)")
    assert "Empty the utilization field" in r.json()["error"]
