"""A reasoning model simulated or costed on a chat trace is told that the trace's outputs are short for it: a one-line
note naming the trace's mean output length and the flags that set the lengths; no reasoning length is assumed."""

from __future__ import annotations

import pytest
from cli_run import cli_json, run_cli

from kvledger.catalog.reasoning import reasoning_template

# azure-conv's first 50 requests carry 5,795 output tokens: 5,795 ÷ 50 = 115.9, printed as 116
NOTE_TAIL = ("the trace azure-conv's outputs average 116 tokens, and the model's in use, thinking included, are likely "
             "far longer: --prompt-lengths with --output-lengths simulates the lengths you expect")


def test_deepseek_r1_on_azure_conv_is_told_its_outputs_are_short():
    d = cli_json("simulate", "deepseek-ai/DeepSeek-R1", "--gpu", "H200", "--tp", "8", "--num-requests", "50")
    assert d["workload"]["output_tokens_mean"] == pytest.approx(115.9)
    notes = [n for n in d["notes"] if "reasoning model" in n]
    assert notes == ["deepseek-ai/DeepSeek-R1 is a reasoning model (its chat template opens every reply with "
                     "<think>); " + NOTE_TAIL]


def test_cost_carries_the_note_and_a_non_reasoning_model_gets_none():
    d = cli_json("cost", "--simulate", "Qwen/Qwen3-235B-A22B", "--gpu", "H100", "--tp", "8", "--num-requests", "50",
                 "--slo", "ttft=2s,tpot=100ms")
    assert ("Qwen/Qwen3-235B-A22B is a reasoning model (its chat template thinks unless a request sets "
            "enable_thinking=false); " + NOTE_TAIL) in d["notes"]
    plain = cli_json("simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--num-requests", "50")
    assert not any("reasoning model" in n for n in plain["notes"])
    # a synthetic workload is the user's own lengths: nothing to say
    synth = cli_json("simulate", "openai/gpt-oss-20b", "--gpu", "H100", "--prompt-lengths", "fixed:512",
                     "--output-lengths", "fixed:4096", "--rate", "1", "--num-requests", "10")
    assert not any("reasoning model" in n for n in synth["notes"])


@pytest.mark.parametrize("hub_id, reasons", [
    ("deepseek-ai/DeepSeek-R1", True), ("deepseek-ai/DeepSeek-R1-0528", True),
    ("deepseek-ai/DeepSeek-R1-Distill-Llama-70B", True), ("deepseek-ai/DeepSeek-V3", False),
    ("Qwen/Qwen3-8B", True), ("Qwen/Qwen3-30B-A3B-FP8", True), ("Qwen/Qwen3-235B-A22B", True),
    ("Qwen/Qwen3-235B-A22B-Instruct-2507", False),  # the 2507 Instruct builds are non-thinking
    ("Qwen/Qwen3-235B-A22B-Thinking-2507", True), ("Qwen/Qwen3-Next-80B-A3B-Thinking", True),
    ("Qwen/Qwen2.5-72B", False), ("openai/gpt-oss-120b", True), ("meta-llama/Llama-3.1-405B-Instruct", False),
])
def test_the_families_marked_by_their_chat_templates(hub_id, reasons):
    assert (reasoning_template(hub_id) is not None) is reasons


def test_search_carries_the_note_once_in_its_short_output():
    # every candidate's probes replay azure-conv's first 50 requests: 116 tokens out on average, as simulate's note
    args = ("search", "Qwen/Qwen3-8B", "--slo", "ttft=500ms,tpot=50ms", "--gpus", "H100", "--tp", "1",
            "--num-requests", "50", "--rate", "5")
    d = cli_json(*args)
    note = ("Qwen/Qwen3-8B is a reasoning model (its chat template thinks unless a request sets "
            "enable_thinking=false); " + NOTE_TAIL)
    assert [n for n in d["notes"] if "reasoning model" in n] == [note]
    text = " ".join(run_cli(*args).output.split())  # its lines as one
    assert text.count("is a reasoning model") == 1 and f"note: {note}" in text
    plain = cli_json("search", "meta-llama/Llama-3.1-8B", *args[2:])
    assert not any("reasoning model" in n for n in plain["notes"])
    # a synthetic workload is the user's own lengths: nothing to say
    synth = cli_json(*args, "--prompt-lengths", "fixed:512", "--output-lengths", "fixed:1024")
    assert not any("reasoning model" in n for n in synth["notes"])
