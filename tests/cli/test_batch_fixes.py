"""A batch of small user-facing fixes: each test fails before its fix."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kvledger.cli.main import app

runner = CliRunner()


def test_report_json_writes_no_default_html(tmp_path, monkeypatch):
    # `kvledger report ... --json` prints the data and writes nothing unless --out/--png is given: the default
    # kvledger-report.html of a user who already has one is neither written nor refused over
    monkeypatch.chdir(tmp_path)
    res = runner.invoke(app, ["report", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--slo", "ttft=200ms,tpot=50ms",
                              "--api", "OpenAI:gpt-4.1", "--num-requests", "60", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["plan"]["kv"]["bytes_per_token_per_gpu"] == 131072  # 2 × 32 layers × 8 KV heads × 128 × 2 B
    assert list(tmp_path.iterdir()) == []


def test_report_json_with_out_writes_it(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    res = runner.invoke(app, ["report", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--slo", "ttft=200ms,tpot=50ms",
                              "--api", "OpenAI:gpt-4.1", "--num-requests", "60", "--json", "--out", "mine.html"])
    assert res.exit_code == 0, res.output
    json.loads(res.stdout)
    assert [p.name for p in tmp_path.iterdir()] == ["mine.html"]
    assert (tmp_path / "mine.html").read_text().startswith("<!")
