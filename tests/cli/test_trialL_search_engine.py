"""Trial L: `kvledger search` plans and simulates vLLM only. `--engine sglang` (or `--policy sglang`) there is refused
with what search does instead, and its help no longer points at a --policy flag it does not take."""

from __future__ import annotations

import json


def test_engine_or_policy_on_search_says_it_simulates_vllm_only(cli_entry):
    for flag in ("--engine", "--policy"):
        code, out, err = cli_entry("search", "llama-3.1-8b", "--slo", "ttft=1s", flag, "sglang")
        assert code == 2 and out == ""
        assert f"error: No such option: {flag}" in err
        assert ("; kvledger search plans and simulates vLLM only (--engine-version picks the release); each "
                "candidate's SGLang launch line is printed beside vLLM's") in err
        assert "picks the engine with" not in err  # search takes neither name
    code, out, _ = cli_entry("search", "llama-3.1-8b", "--slo", "ttft=1s", "--engine", "sglang", "--json")
    assert code == 2 and "simulates vLLM only" in json.loads(out)["error"]["message"]


def test_search_help_names_no_policy_flag(cli_entry):
    code, out, _ = cli_entry("search", "--help")
    text = " ".join(out.split())
    assert code == 0 and "--policy" not in text
    assert "search simulates vLLM only, each SGLang launch line is an unsimulated equivalent" in text
