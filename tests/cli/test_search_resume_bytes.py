"""``search --resume``: the resumed ``--json`` is the fresh run's byte for byte, wherever the ledger was cut.

Two things used to differ: a kept entry came back from the ledger with its keys sorted (``launch``: check, note,
sglang, vllm against the fresh vllm, sglang, check, note), and the candidates left to run were decided by bound
against every kept result at once, where the fresh run had only the batches two behind (``prune.rounds``), so their
lighter operating points decided by bound came out otherwise (5 against the fresh run's 10 on this search, cut after
two entries)."""

from __future__ import annotations

import json

import pytest
from cli_run import run_cli

# 12 candidates (L4, H100, A100 × TP 1, 2 × KV auto, fp8), all feasible: three rounds of 4 (prune.ROUND)
SEARCH = ["search", "meta-llama/Llama-3.2-3B", "--slo", "ttft=2s,tpot=100ms", "--gpus", "L4,H100,A100", "--tp", "1,2",
          "--kv-cache-dtype", "auto,fp8", "--max-model-len", "8K", "--num-requests", "60", "--utilization", "0.5",
          "--backend", "serial", "--json"]


@pytest.fixture(scope="module")
def fresh(tmp_path_factory):
    """(the fresh run's stdout, its ledger's lines)."""
    led = tmp_path_factory.mktemp("resume") / "ledger.jsonl"
    res = run_cli(*SEARCH, "--ledger", str(led))
    assert res.exit_code == 0, res.output
    return res.stdout, led.read_text().splitlines(keepends=True)


@pytest.mark.parametrize("kept", [1, 2, 6, 12])
def test_resumed_json_is_the_fresh_runs_byte_for_byte(fresh, tmp_path, kept):
    out, lines = fresh
    assert len(lines) == 13  # the header and the 12 candidates
    cut = tmp_path / "cut.jsonl"
    cut.write_text("".join(lines[:1 + kept]))  # as if the search had stopped after `kept` entries
    res = run_cli(*SEARCH, "--resume", str(cut))
    assert res.exit_code == 0, res.output
    assert res.stdout == out
    assert cut.read_text() == "".join(lines)  # and the ledger it rewrote is the fresh one


def test_a_ledger_resumed_in_finish_order_gives_the_same_bytes(fresh, tmp_path):
    # entries are appended as they finish: the kept ones in any order, here reversed, 7 of 12
    out, lines = fresh
    cut = tmp_path / "cut.jsonl"
    cut.write_text(lines[0] + "".join(reversed(lines[1:8])))
    res = run_cli(*SEARCH, "--resume", str(cut))
    assert res.stdout == out
    d = json.loads(out)
    # the fresh run decided 10 lighter operating points by bound (read off its own screening): the resume keeps them
    assert d["screening"]["lighter_loads_decided_by_bound"] == 10
    assert list(d["winner"]["launch"]) == ["vllm", "sglang", "check", "note"]
