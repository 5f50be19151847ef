"""--offload-prompt-only / --no-offload-prompt-only: vLLM's kv_connector_extra_config offload_prompt_only (from 0.23.0,
default on) on the simulated native host tier, for `offload` and `simulate`; refused where vLLM has no such key."""

from __future__ import annotations

import pytest
from cli_run import cli_json
from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.errors import InputError

runner = CliRunner(env={"COLUMNS": "250"})
# test_offload_rules_cli.py's ONE: one chat session (seed 0) that fits in HBM (no host load, nothing evicted); turns
# (input, output) = (1,709, 155), (273, 265), (73, 40), (47, 215) after a 512-token system prompt: prompts 2,221,
# 2,649, 2,987, 3,074 tokens; each turn's blocks keyed by segment through its prompt's and output's whole 64-token
# segments (t0 37, t1 45, t2 47), the rest its own.
ONE = ("offload", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--sessions", "1", "--session-rate", "1",
       "--kv-offloading-size", "64")


def test_prompt_blocks_only_by_default_and_every_block_when_turned_off():
    # default (0.33.0): each turn's full prompt blocks: t0 2,221 // 16 = 138; t1 2,649 // 16 = 165, 27 new; t2
    # 2,987 // 16 = 186, 21 new; t3 3,074 // 16 = 192, 6 new: 138 + 27 + 21 + 6 = 192 stored.
    on = cli_json(*ONE)["tier_stats"]
    assert (on["stored_units"], on["evicted_units"], on["host_hit_tokens"]) == (192, 0, 0)
    # off (every full block of the computed tokens, as 0.19.0–0.22.0): t0 computes 2,221 + 154 = 2,375 tokens = 148
    # blocks; t1 2,649 + 264 = 2,913 = 182: 148-179 new (32) and 180-181, past its 45 segments, its own (2); t2
    # 2,987 + 39 = 3,026 = 189: 180-187 (8) and its own 188 (1); t3 its prompt's 192 (4; its decode blocks are offered
    # at its free, after the run's last step): 148 + 34 + 9 + 4 = 195.
    off = cli_json(*ONE, "--no-offload-prompt-only")["tier_stats"]
    assert (off["stored_units"], off["evicted_units"], off["host_hit_tokens"]) == (195, 0, 0)
    # vLLM 0.22.0 has no offload_prompt_only: every block, as the flag off
    assert cli_json(*ONE, "--engine-version", "0.22.0")["tier_stats"]["stored_units"] == 195


def test_simulate_takes_the_flag_and_says_which_blocks_are_stored():
    sim = ("simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--workload", "chat", "--sessions", "1",
           "--session-rate", "1", "--max-model-len", "32K", "--kv-offloading-size", "64")
    on, off = cli_json(*sim)["kv_tiers"], cli_json(*sim, "--no-offload-prompt-only")["kv_tiers"]
    assert on["host_tier"]["prompt_only"] is True and off["host_tier"]["prompt_only"] is False
    assert (on["per_tier"][1]["stored_units"], off["per_tier"][1]["stored_units"]) == (192, 195)  # as offload's
    assert off["plan"]["settings"]["offload_prompt_only"] is False  # named where given
    assert "offload_prompt_only" not in on["plan"]["settings"]


@pytest.mark.parametrize("flags, words", [
    (("--engine-version", "0.22.0", "--no-offload-prompt-only"), "no offload_prompt_only key"),
    (("--kv-offloading-backend", "lmcache", "--offload-prompt-only"), "native CPU offloading"),
])
def test_the_flag_is_refused_where_vllm_has_no_such_key(flags, words):
    res = runner.invoke(app, [*ONE, *flags])
    assert res.exit_code == 2 or isinstance(res.exception, InputError), res.output
    assert words in res.output + str(res.exception)
