"""A `vllm serve` launch line pasted into a command: the flags that change nothing kvledger models are refused with
what they do in vLLM, not with a flag guessed by its spelling (the SRE trial's `plan … --swap-space 16` was answered
"No such option: --swap-space (Possible options: --sampler-backend)")."""

from __future__ import annotations

import json

from cli_run import MODEL


def test_swap_space_says_v1_never_swaps(cli_entry):
    code, out, err = cli_entry("plan", MODEL, "--gpu", "H100", "--swap-space", "16")
    assert code == 2 and "Possible options" not in err
    assert err.startswith("error: --swap-space is a `vllm serve` flag that changes nothing kvledger plan models: CPU "
                          "memory for V0's swap-out preemption: the V1 engine preempts by recompute only")


def test_server_flags_in_json_and_in_simulate(cli_entry):
    code, out, _ = cli_entry("plan", MODEL, "--gpu", "H100", "--port=8000", "--json")
    msg = json.loads(out)["error"]["message"]
    assert code == 2 and msg.startswith("--port is a `vllm serve` flag that changes nothing kvledger plan models: the "
                                        "API server's own setting")
    code, _, err = cli_entry("simulate", MODEL, "--gpu", "H100", "--served-model-name", "llama")
    assert code == 2 and "--served-model-name is a `vllm serve` flag that changes nothing kvledger simulate" in err


def test_a_misspelt_flag_keeps_clicks_suggestion(cli_entry):
    code, _, err = cli_entry("plan", MODEL, "--gpu", "H100", "--swap-spice", "3")
    assert code == 2 and "No such option: --swap-spice (Possible options:" in err
