"""``--policy``: the help of validate, calibrate and simulate names every preset the parser takes, and validate
runs under each of the presets beyond vllm and sglang."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_run import refused, run_cli

from kvledger.analyses.serving.from_plan import POLICY_PRESETS

STAGE = Path(__file__).resolve().parents[1] / "evidence" / "data" / "inference-perf" / "stage_0_lifecycle_metrics.json"
VAL = ["--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--max-model-len", "512"]


def _policy_help(command: str) -> str:
    """The help paragraph of --policy, up to the next option."""
    out = run_cli(command, "--help").output
    start = out.index("\n  --policy") + 1  # "--policy, --engine <str>": plan's name is the same flag
    return out[start:out.index("\n  --", start)]


@pytest.mark.parametrize("command", ["validate", "calibrate"])
def test_validate_and_calibrate_help_name_every_preset(command):
    text = " ".join(_policy_help(command).split())
    for name in POLICY_PRESETS:
        assert f" {name}: " in text, (name, text)
    assert "static batching" in text and "max_model_len worth of KV blocks reserved" in text


def test_simulate_help_names_every_preset():
    text = " ".join(_policy_help("simulate").split())
    for name in POLICY_PRESETS:
        assert f"{name} (" in text, (name, text)


@pytest.mark.parametrize(("policy", "batching", "allocation"),
                         [("static", "static", "paged"), ("contiguous", "continuous", "contiguous")])
def test_validate_runs_the_presets_the_help_lists(policy, batching, allocation):
    # from_plan.POLICY_PRESETS: static sets batching static, contiguous sets kv_allocation contiguous; both turn
    # prefix caching off
    out = json.loads(run_cli("validate", str(STAGE), *VAL, "--policy", policy, "--json").output)
    eng = out["engine"]
    assert (eng["batching"], eng["kv_allocation"], eng["enable_prefix_caching"]) == (batching, allocation, False)
    assert out["num_requests"] == 60  # the stage file's 60 requests


def test_an_unknown_preset_is_refused_with_the_four_named():
    assert "Known: vllm, sglang, static, contiguous." in refused("validate", str(STAGE), *VAL, "--policy", "fifo")
