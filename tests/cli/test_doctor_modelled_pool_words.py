"""doctor on a log cut before vLLM prints its KV budget: the capacity clause says its pool is the ledger's model of
the logged settings, not a figure read "from its start-up" (the log has none)."""

from __future__ import annotations

from pathlib import Path

from cli_run import run_cli

LOG = Path(__file__).resolve().parents[1] / "fixtures/vllm_startups_0_19/logs/" \
    "meta-llama-llama-3-1-8b---h100-80gb--tp1pp1dp1--8192.log"


def _capacity_line(path: Path) -> str:
    res = run_cli("doctor", str(path), columns=400)
    return next(line for line in res.stdout.splitlines() if line.startswith("not diagnosed capacity"))


def test_a_log_cut_before_its_kv_budget_says_the_pool_is_modelled(tmp_path):
    # the first 50 lines end before line 52's "Available KV cache memory: 58.11 GiB": the ledger plans 58.10 GiB,
    # 29,749 blocks, 29,748 usable × 16 = 475,968 token slots, 475,968 // 8,192 = 58 requests (the whole log's
    # 29,751 blocks give 476,000 slots, also 58)
    cut = tmp_path / "cut.log"
    cut.write_text("".join(LOG.read_text().splitlines(keepends=True)[:50]))
    line = _capacity_line(cut)
    assert ("from the ledger's plan of its settings (the log prints no KV budget or block count, so the pool is "
            "modelled, not read): the pool holds 58 requests of max_model_len 8,192 tokens at once (475,968 token "
            "slots") in line
    assert "from its start-up" not in line
    # the whole log prints its budget: read, as before
    assert "from its start-up: the pool holds 58 requests of max_model_len 8,192 tokens at once (476,000 token " \
           "slots" in _capacity_line(LOG)
