"""Trial L, then `search --engine sglang`: search takes --engine (vllm, the default, or sglang) and no --policy; an
engine it does not plan is refused in its words (exit 2), and --policy is pointed at --engine."""

from __future__ import annotations

import json


def test_policy_on_search_points_at_engine_and_an_unknown_engine_is_refused(cli_entry):
    code, out, err = cli_entry("search", "llama-3.1-8b", "--slo", "ttft=1s", "--policy", "sglang")
    assert code == 2 and out == ""
    assert "error: No such option: --policy" in err
    assert "; kvledger search picks the engine with --engine (e.g. --engine sglang)" in err
    code, out, _ = cli_entry("search", "llama-3.1-8b", "--slo", "ttft=1s", "--engine", "trtllm", "--json")
    assert code == 2
    assert json.loads(out)["error"]["message"] == (
        "--engine 'trtllm': search plans and simulates vllm (default) or sglang")


def test_search_help_names_engine_and_no_policy_flag(cli_entry):
    code, out, _ = cli_entry("search", "--help")
    text = " ".join(out.split())
    assert code == 0 and "--policy" not in text
    assert "--engine <str> vllm (default) or sglang: the engine every candidate is planned" in text
    assert "with --engine sglang the SGLang release's. Under vLLM each SGLang launch line is an unsimulated" in text
