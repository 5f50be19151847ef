"""search's help for SGLang's spellings of its axes: either engine takes them (search writes each candidate's SGLang
launch line, and with --engine sglang plans and simulates SGLang), so they do not say "(with --engine sglang)" alone."""

from __future__ import annotations

from cli_run import run_cli


def test_search_help_says_either_engine_takes_sglang_spellings():
    text = " ".join(run_cli("search", "--help").stdout.split())
    assert ("--tp-size <str> SGLang's name for --tp (the same axis: search writes each candidate's SGLang launch "
            "line with either engine, and with --engine sglang plans and simulates SGLang).") in text
    # plan, which takes --engine, keeps the words
    plan = " ".join(run_cli("plan", "--help").stdout.split())
    assert "--tp-size <int> SGLang's name for --tp (with --engine sglang)." in plan
