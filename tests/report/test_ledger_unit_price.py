"""A ledger's unit price is printed as stored (to 5 decimals, at least cents), so that quantity × the price shown gives
the amount shown: GCP's a3-highgpu-8g H100 is $10.97906/GPU-h in gpu_prices.csv, which cents printed as 10.98 (a
fresh user's check: 5,840 GPU-hour × 10.98 = 64,123.20, not the 64,117.71 beside it)."""

from __future__ import annotations

import os

from typer.testing import CliRunner

from kvledger.cli.main import app

FILE = "tests/evidence/data/llmperf/leaderboard_individual_anyscale_70b.json"


def test_the_unit_price_shown_is_the_rows_price():
    res = CliRunner().invoke(app, ["cost", FILE, "--slo", "ttft=500ms,tpot=50ms", "--api", "OpenAI:gpt-4.1", "--gpu",
                                   "H100", "--gpu-provider", "GCP", "--num-gpus", "4", "--monthly-requests", "1e6"],
                             env={**os.environ, "COLUMNS": "200"})
    assert res.exit_code == 0, res.output
    rows = [line for line in res.output.splitlines() if "GPU rental, decode share" in line]
    cells = [c.strip() for c in rows[0].split("│")]
    # quantity "17.79 GPU-hour" (rounded for print) × the row's $10.97906 = the amount to the cent of what is printed
    assert cells[3] == "10.97906"
    assert abs(float(cells[2].split()[0]) * 10.97906 - float(cells[4].replace(",", ""))) < 0.01 * 10.97906
