"""search --max-gpus-per-replica on the command line and in kvledger.search: the pruned candidates counted in the notes;
progress on stderr under --json, the document on stdout whole."""

from __future__ import annotations

import json

import pytest
from cli_run import refused, run_cli

import kvledger

# 60 requests of 512 + 64 tokens at 5 req/s on H100: each capacity search takes a second or two
SMALL = ("search", "meta-llama/Llama-3.1-8B", "--slo", "ttft=500ms,tpot=50ms", "--gpus", "H100", "--tp", "1,2",
         "--num-requests", "60", "--prompt-lengths", "fixed:512", "--output-lengths", "fixed:64", "--rate", "5",
         "--workers", "1")


def test_the_pruned_unit_is_counted_and_progress_stays_off_stdout(monkeypatch):
    from kvledger.cli import search_status

    # every finished candidate says a line (the 30 s spacing set to 0: the wiring, not the timing, is under test)
    monkeypatch.setattr(search_status.PlainProgress.__init__, "__defaults__", (0.0,))
    res = run_cli(*SMALL, "--max-gpus-per-replica", "1", "--json")
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)  # stdout is the document alone
    # TP 1 (1 GPU) kept, TP 2 (2 GPUs) pruned before planning: one candidate in the ledger
    assert [c["id"] for c in doc["candidates"]] == ["nvidia_h100_sxm:tp1:kv-auto"]
    assert ("--max-gpus-per-replica 1: 1 candidate of more GPUs per replica pruned before planning, up to 2 GPUs (e.g. "
            "nvidia_h100_sxm:tp2:kv-auto); give --max-gpus-per-replica 2 to search them") in doc["notes"]
    assert "search: 1/1 candidates evaluated" in res.stderr


def test_all_pruned_is_bad_input_and_the_range_is_checked():
    msg = refused(*SMALL[:6], "--tp", "2,4", "--rate", "5", "--max-gpus-per-replica", "1")
    assert "every candidate has more than --max-gpus-per-replica 1 GPUs per replica (the smallest, 2)" in msg
    assert "--max-gpus-per-replica 0 is out of range; allowed: [1, 1,048,576] GPUs per replica" in refused(
        *SMALL, "--max-gpus-per-replica", "0")


def test_the_api_takes_it():
    # the message in the call's words (in_python_terms): max_gpus_per_replica, not --max-gpus-per-replica
    with pytest.raises(kvledger.InputError, match=r"more than max_gpus_per_replica 1 GPUs per replica \(the smallest, "
                                                  r"2\); give max_gpus_per_replica 2 or more"):
        kvledger.search("meta-llama/Llama-3.1-8B", slo="ttft=500ms,tpot=50ms", gpus=["H100"], tp=[2, 4],
                        rate=5.0, max_gpus_per_replica=1, cache=False)
