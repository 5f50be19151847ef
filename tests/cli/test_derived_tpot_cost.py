"""``kvledger cost`` on an inference-perf stage: its load check reads TPOT as goodput does, (E2E − TTFT)/(output − 1),
and says so with goodput's note (text and ``--json``'s ``capacity_basis.notes``)."""

from __future__ import annotations

import json
from pathlib import Path

from cli_run import run_cli

STAGES = Path(__file__).resolve().parents[1] / "evidence" / "data" / "inference-perf"


def test_cost_prints_the_note_and_carries_it_in_json():
    # stage 0 at tpot=10ms: the file's TPOT p90 3.51 ms (35% of the limit) called it under-loaded; the derived p90
    # is at most 7.40 ms (74%: tests/ledgers/test_derived_tpot_load_check.py), so it is not flagged
    args = ("cost", str(STAGES / "stage_0_lifecycle_metrics.json"), "--slo", "tpot=10ms", "--gpu", "H100", "--api",
            "OpenAI:gpt-4.1-mini")
    text = run_cli(*args).stdout
    assert "note: TPOT judged as (E2E − TTFT)/(output − 1)" in text and "UNDER-LOADED" not in text
    basis = json.loads(run_cli(*args, "--json").stdout)["capacity_basis"]
    assert basis["load_check"]["status"] == "not_flagged" and "notes" not in basis["load_check"]
    assert basis["notes"][0].startswith("TPOT judged as (E2E − TTFT)/(output − 1)")
