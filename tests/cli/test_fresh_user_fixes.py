"""Findings of a fresh-user trial: each test fails on the code before its fix."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kvledger.cli.main import app

runner = CliRunner()
L8 = "meta-llama/Llama-3.1-8B"


def _run(*args: str):
    return runner.invoke(app, list(args), catch_exceptions=False, env={"COLUMNS": "200"})


def test_a_trace_without_prefix_ids_says_its_zero_hit_rate_is_by_construction():
    # azure-conv rows hold timestamp, prompt and output lengths only: with prefix caching on (vLLM's default) no two
    # prompts can share a block, so the 0 % hit rate is a property of the trace, and both outputs say so
    args = ("simulate", L8, "--gpu", "H100", "--trace", "azure-conv", "--num-requests", "40")
    doc = json.loads(_run(*args, "--json").stdout)
    assert doc["summary"]["prefix_cache_hit_rate"] == 0.0 and doc["workload"]["prefix_ids"] is False
    assert any("carries no prefix ids" in n and "0 by construction" in n for n in doc["notes"])
    text = " ".join(_run(*args).stdout.split())
    q = doc["summary"]["prefix_cache_query_tokens"]
    assert f"prefix cache: hit rate 0.0% (0 of {q:,} prompt tokens) — 0 by construction" in text
    # Mooncake rows carry hash ids: no such note, and the field is absent
    moon = json.loads(_run("simulate", L8, "--gpu", "H100", "--trace", "mooncake", "--num-requests", "40",
                           "--json").stdout)
    assert "prefix_ids" not in moon["workload"] and not any("no prefix ids" in n for n in moon["notes"])
    # prefix caching off: nothing to explain
    off = json.loads(_run(*args, "--no-enable-prefix-caching", "--json").stdout)
    assert not any("no prefix ids" in n for n in off["notes"])


def test_validate_does_not_read_a_burst_as_overload_nor_advise_flags_it_lacks():
    # aiperf run1 sent its 100 requests within 0.0205 s (89 finished): the median → last arrival window is 0.0158 s,
    # against a median decode time (E2E − TTFT) of 6.745 s — a burst, not a queue growing with the trace
    doc = json.loads(_run("validate", "tests/evidence/data/aiperf/run1_profile_export.jsonl", "--gpu", "H100",
                          "--json").stdout)
    assert not doc["saturated"]
    assert not any("--rate" in n for n in doc["notes"])
