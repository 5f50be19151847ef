"""SGLang with a pool shorter than one max_model_len request starts and serves shorter requests (every release read,
0.4.0–0.5.23: managers/tp_worker.py max_req_len = min(context_len − 1, pool tokens − 1); it asserts only a positive
max_req_len and max_req_input_len): ``plan`` gives TensorRT-LLM's verdict in that case, "served_at_lower_len", exit
0, and ``simulate`` runs the same plan, capping its requests as SGLang does."""

from __future__ import annotations

import json

from cli_run import cli_json, run_cli

# Qwen3-8B's KV: 2 × 36 layers × 8 KV heads × 128 head_dim × 2 B = 147,456 B a token. --available-kv-memory
# 4718592000B / 147,456 = 32,000 token slots (SGLang's page of 1 token); a 40,960-token request needs 40,960 × 147,456
# = 6,039,797,760 B = 5.62 GiB against 4.39 GiB: max_req_len = min(40,959, 31,999) = 31,999, max_req_input_len
# = 31,994, the longest request 31,999 − 1 = 31,998 tokens (outputs capped at max_req_len − prompt − 1).
ARGS = ("plan", "Qwen/Qwen3-8B", "--gpu", "l4", "--engine", "sglang", "--max-model-len", "40960",
        "--available-kv-memory", "4718592000B")


def test_plan_says_served_at_lower_len_and_exits_0():
    res = run_cli(*ARGS, "--json")
    a = json.loads(res.stdout)["advice"]
    assert res.exit_code == 0 and a["verdict"] == "served_at_lower_len" and a["estimated_max_model_len"] == 32_000
    assert round(a["shortfall_gib"], 2) == 1.23  # (6,039,797,760 − 4,718,592,000) B / 2^30
    msg = a["message"]
    assert "= 31,999 (managers/tp_worker.py" in msg and "prompts of 31,994 tokens or more" in msg
    assert "no request longer than 31,998 tokens runs, as with --context-length 32000" in msg
    res = run_cli(*ARGS)
    assert res.exit_code == 0 and "served at a lower length: SGLang starts" in res.stdout


def test_an_older_release_starts_as_well():
    # 0.4.0's tp_worker.py: the same min() and only `assert self.max_req_len > 0 and self.max_req_input_len > 0`
    res = run_cli(*ARGS, "--engine-version", "0.4.0", "--json")
    assert res.exit_code == 0 and json.loads(res.stdout)["advice"]["verdict"] == "served_at_lower_len"


def test_simulate_runs_the_plan_plan_serves_at_a_lower_length():
    # RTX 4090, Llama-3.1-8B, SGLang 0.5.23: a pool of 9,613 tokens under max_model_len 16,384 (tests/accounting/
    # test_advice.py derives it): plan's verdict served_at_lower_len; simulate starts it, max_req_len 9,612
    base = ("meta-llama/Llama-3.1-8B", "--gpu", "rtx4090", "--engine", "sglang", "--max-model-len", "16384")
    assert cli_json("plan", *base)["advice"]["verdict"] == "served_at_lower_len"
    doc = cli_json("simulate", *base, "--num-requests", "5")
    assert doc["summary"]["num_finished"] == 5
    assert any(n.startswith("SGLang starts with a KV pool of 9,613 tokens, fewer than max_model_len 16,384, and "
                            "serves at a lower length (kvledger plan's verdict served_at_lower_len")
               and "max_req_len = min(context_len − 1, pool − 1) = 9,612" in n for n in doc["notes"])
