"""One session rule in every command: without --max-model-len, `search`, `simulate` and `offload` cap sessions at
the smaller of kvledger's session default (32,768 tokens) and the model's context, so the same flags draw the same
sessions, and each prints the cap where it describes them."""

from __future__ import annotations

import json

from cli_run import MODEL, refused, run_cli

AGENT8 = ["--workload", "agent", "--sessions", "8", "--session-rate", "1"]
FLAT = ["--gemm-efficiency", "flat"]


def test_search_draws_the_sessions_simulate_and_offload_draw():
    # 8 agent sessions, seed 0: 165 turns under the 32,768-token cap (325 under the model's 131,072, which search
    # used before: tests/cli/test_ux_tiers_cli.py). search's load note: 1 session/s × 165 ÷ 8 = 20.625 turns per
    # session, printed as 20.62 (4 significant figures); the same 165 turns as simulate's and offload's runs
    sim = json.loads(run_cli("simulate", MODEL, "--gpu", "H100", *FLAT, *AGENT8, "--json").stdout)
    off = json.loads(run_cli("offload", MODEL, "--gpu", "H100", *FLAT, "--kv-offloading-size", "64GiB", *AGENT8,
                             "--json").stdout)
    assert sim["workload"]["num_requests"] == off["workload"]["num_turns"] == 165
    res = run_cli("search", MODEL, "--gpu", "H100", "--tp", "1", "--slo", "ttft=500ms,tpot=50ms", *FLAT, *AGENT8)
    assert "× 20.62 turns per session (the 8 sessions drawn with seed 0, context ≤ 32,768 tokens)" in res.output
    out = " ".join(res.output.split())  # the legend wraps at the console's width
    assert ("≥ 8 agent sessions per probe, more where a probe's rate needs them to reach a steady state "
            "(kvledger.analyses.serving.session_ramp), context cap 32,768 tokens (kvledger's session default" in out)
    assert "--max-model-len 32768" in res.output  # the launch line serves the sessions simulated
    # the choice is stated where the cap is: the agent preset's own cap (AGENT.max_context_tokens, 131,072) and the
    # model's context (Llama-3.1-8B's max_position_embeddings, 131,072) are named with the flag that reaches them
    # (before, only "pass --max-model-len to change it": an agent user got 32K sessions without being told why)
    assert ("the agent preset's own cap is 131,072 tokens, which --max-model-len 131072 lets agent sessions reach "
            "where the model's context (131,072 tokens) allows" in out)


def test_a_model_shorter_than_the_default_caps_sessions_at_its_context():
    # facebook/opt-13b's context is 2,048 tokens < 32,768: the cap is 2,048 (before, simulate asked vLLM for 32,768
    # and was refused). 20 chat sessions at seed 0: 8 have a first turn past 2,048 tokens and are left out, the
    # other 12 send 21 turns (read off this run)
    d = json.loads(run_cli("simulate", "facebook/opt-13b", "--gpu", "A100-80GB", "--workload", "chat", "--sessions",
                           "20", "--json").stdout)
    s = d["workload"]["sessions"]
    assert (s["context_cap_tokens"], s["num_sessions"], d["workload"]["num_requests"]) == (2048, 12, 21)
    assert s["context_cap_source"].startswith("the model's context, below kvledger's session default of 32,768")
    # the model's context set the cap: --max-model-len cannot pass it, so the note says so (it said "raise
    # --max-model-len", which vLLM would refuse above 2,048)
    left = [n for n in d["notes"] if n.startswith("sessions: 8 of the 20 drawn sessions left out, 12 run")]
    assert len(left) == 1 and "raise --max-model-len" not in left[0]
    assert left[0].endswith("the cap is the model's own 2,048-token context (the engine refuses a longer max_model_len)"
                            ": these sessions exceed it and cannot be served whole, so no flag keeps them")


def test_no_session_under_the_model_s_own_context_does_not_say_raise_max_model_len():
    # agent sessions open with a 4,096-token system prompt, past facebook/opt-13b's 2,048-token context, so none fits;
    # the cap is the model's context, which vLLM refuses a longer max_model_len past
    msg = refused("simulate", "facebook/opt-13b", "--gpu", "A100-80GB", "--workload", "agent", "--sessions", "3")
    assert msg == ("no agent session fits max_model_len 2,048: it is the model's own context, which the engine "
                   "refuses a longer max_model_len past")
