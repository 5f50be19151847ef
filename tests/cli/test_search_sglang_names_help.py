"""search's help for SGLang's spellings of its axes names no --engine: search takes none (it simulates vLLM only and
writes each candidate's vLLM and SGLang launch lines), so "(with --engine sglang)" sent a user to a flag it refuses."""

from __future__ import annotations

from cli_run import run_cli


def test_search_help_does_not_point_at_an_engine_flag_search_lacks():
    text = " ".join(run_cli("search", "--help").stdout.split())
    assert "--engine sglang" not in text
    assert ("--tp-size <str> SGLang's name for --tp (the same axis: search simulates vLLM only and writes each "
            "candidate's SGLang launch line too).") in text
    refused = run_cli("search", "deepseek-ai/DeepSeek-V3", "--slo", "ttft=2s", "--engine", "sglang")
    assert refused.exit_code == 2 and "No such option: --engine" in refused.output
    # plan, which takes --engine, keeps the words
    plan = " ".join(run_cli("plan", "--help").stdout.split())
    assert "--tp-size <int> SGLang's name for --tp (with --engine sglang)." in plan
