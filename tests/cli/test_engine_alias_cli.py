"""The simulating commands take ``--engine`` as ``plan`` names it, the same flag as their ``--policy``: one vocabulary
across commands (one who planned with ``plan --engine sglang`` simulated with ``--engine sglang`` and was refused)."""

from __future__ import annotations

import json

from cli_run import MODEL, run_cli


def test_simulate_engine_is_policy():
    args = ("simulate", MODEL, "--gpu", "H100-SXM", "--num-requests", "30", "--rate", "2", "--json")
    by_engine = run_cli(*args, "--engine", "sglang")
    by_policy = run_cli(*args, "--policy", "sglang")
    assert by_engine.exit_code == by_policy.exit_code == 0
    assert by_engine.stdout == by_policy.stdout  # byte-identical: the same flag
    # SGLang's pool reserves slot 0 (its padded slot), which a vLLM run never says: the preset was applied
    assert "padded slot" in json.dumps(json.loads(by_engine.stdout))
