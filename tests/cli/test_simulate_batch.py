"""simulate reports the requests it held at once (running, waiting: time-weighted mean and max, text and --json), so
plan's concurrency can be set beside it, and takes --disable-hybrid-kv-cache-manager (the plan's pool changes)."""

from __future__ import annotations

import json
from pathlib import Path

from cli_run import run_cli

from kvledger.analyses.serving.sim_batch import batch_occupancy
from kvledger.records import RequestRecord

GEMMA3 = str(Path(__file__).resolve().parents[1] / "fixtures" / "configs" / "google--gemma-3-27b-it.json")
LOAD = ("--gpu", "H100-SXM", "--max-model-len", "8192", "--prompt-lengths", "fixed:6000", "--output-lengths",
        "fixed:2000", "--rate", "50", "--num-requests", "60", "--json")


def test_batch_occupancy_by_hand():
    # Two requests over 0 → 10 s: A waits 0–1, runs 1–10; B waits 2–6, runs 6–8. Running: (9 + 2) / 10 = 1.1, at most
    # 2 (6–8); waiting: (1 + 4) / 10 = 0.5, at most 1.
    recs = [RequestRecord("a", 0.0, 10, 10, first_token_s=1.0, finish_s=10.0),
            RequestRecord("b", 2.0, 10, 10, first_token_s=6.0, finish_s=8.0)]
    b = batch_occupancy(recs, 2, 1)
    assert b["span_s"] == 10.0 and b["running"] == {"mean": 1.1, "max": 2} and b["waiting"] == {"mean": 0.5, "max": 1}


def test_gemma3_runs_what_plan_says_while_decoding_and_the_flag_shrinks_it():
    # plan: ≈15 8,192-token requests at once while decoding with the hybrid manager (902 blocks each of 13,866);
    # with --disable-hybrid-kv-cache-manager 2,236 blocks of 512 per 8,192 tokens: 4 (8,000-token requests: 500
    # blocks → 2,235 // 500 = 4; the 5th fits while the others are short).
    on = json.loads(run_cli("simulate", GEMMA3, *LOAD).output)
    off = json.loads(run_cli("simulate", GEMMA3, *LOAD, "--disable-hybrid-kv-cache-manager").output)
    assert on["engine"]["num_gpu_blocks"] == 13_866 and off["engine"]["num_gpu_blocks"] == 2_236
    assert 13 <= on["batch"]["running"]["max"] <= 16 and off["batch"]["running"]["max"] <= 5
    assert on["batch"]["running"]["mean"] > 2 * off["batch"]["running"]["mean"]
