"""What a newcomer's trial found in the flags' names: `plan` names the engine with --engine, the simulating commands
with --policy; each command's unknown-option error says which of the two it takes."""

from __future__ import annotations

import json


def test_policy_on_plan_names_engine(cli_entry):
    # the simulating commands take --engine as plan names it (the same flag as their --policy,
    # tests/cli/test_engine_alias_cli.py); plan takes no --policy and says which flag it takes instead
    code, out, err = cli_entry("plan", "llama-3.1-8b", "--gpu", "H100", "--policy", "sglang", "--json")
    assert code == 2 and "kvledger plan picks the engine with --engine (e.g. --engine sglang)" in err
    assert json.loads(out)["error"]["message"].endswith("; kvledger plan picks the engine with --engine (e.g. --engine "
                                                        "sglang)")
    # a command that takes neither, and a misspelt flag, keep click's own words
    code, _, err = cli_entry("fp8-kv", "llama-3.1-8b", "--gpu", "H100", "--engine", "sglang")
    assert code == 2 and "picks the engine" not in err
    code, _, err = cli_entry("plan", "llama-3.1-8b", "--gpu", "H100", "--engin", "sglang")
    assert code == 2 and "picks the engine" not in err and "Possible options: --engine, --engine-version" in err
