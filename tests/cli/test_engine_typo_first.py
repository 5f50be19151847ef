"""A mistyped --engine is refused before any plan: `simulate deepseek-v3 --gpu H200 --engine sglnag` (TP 1) planned
vLLM's pool for the typo and answered "the model does not fit: the memory plan is short by 507.30 GiB", hiding the
typo; with --tp 8 it ran to "unknown policy 'sglnag'", the word --policy where the user typed --engine."""

from __future__ import annotations

import pytest
from cli_run import refused


@pytest.mark.parametrize("command", [("simulate",), ("goodput", "--simulate"), ("cost", "--simulate")])
def test_a_mistyped_engine_is_named_before_the_plan(command):
    slo = () if command[0] == "simulate" else ("--slo", "ttft=1s")
    price = ("--gpu-usd-per-hour", "3") if command[0] == "cost" else ()
    said = refused(*command, "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--engine", "sglnag", *slo, *price)
    assert said.startswith("unknown --engine/--policy 'sglnag'; did you mean: sglang?")
    assert "does not fit" not in said
