"""The boundary search's note on a lightest probe that misses names the token budget, not the step time, where the
ItlBudget analysis says the budget is the cause (``itl_budget.idle_cause``): Llama-3.1-70B-Instruct at TP 4 on H100,
vLLM 0.10.1, mooncake's first 300, itl ≤ 100 ms at 90 % said "the step time itself is over the limit (a faster GPU, a
higher TP or a looser limit would)" while a lone decode takes a fifth of the limit and --max-num-batched-tokens 256
meets it (tests/cli/test_search_itl_unreachable.py). Where the step at batch 1 is itself over the limit the old words
stand."""

from __future__ import annotations

import json

import pytest
from cli_run import refused, run_cli

from kvledger.ledgers.boundary import IDLE_STEP_WORDS

ARGS = ("meta-llama/Llama-3.1-70B-Instruct", "--gpu", "H100", "--tp", "4", "--engine-version", "0.10.1", "--trace",
        "mooncake", "--target", "0.9", "--num-requests", "300")


def _no_capacity(*args: str) -> dict:
    """The JSON of a goodput search that found no rate meeting the target (exit status 1, README)."""
    res = run_cli("goodput", "--simulate", *ARGS, *args, "--axis", "rate", "--json")
    assert res.exit_code == 1
    return json.loads(res.stdout)


def _no_bisection(d: dict) -> str:
    (note,) = [n for n in d["boundary"]["notes"] if n.startswith("no bisection")]
    return note


def test_the_budget_and_the_tied_arrivals_are_named_with_the_budget_that_fixes_it():
    # mooncake_fast25/conversation_trace.jsonl's first 300 rows: 265 of the 299 gaps between sorted timestamps are 0
    # (counted from the file) and the longest input_length is 120,633. At 1/1024 req/s 251 of 300 missed itl ≤ 100 ms
    # (49 good, 16.3 %). The lone decode of 120,633 tokens of context: 19.76 ms in the roofline step cost (≈ 35.3 GB
    # of weights + 9.9 GB of KV per GPU at 3.35 TB/s is 13.5 ms before its efficiencies), under the limit; the step
    # with the 8,191-token last chunk takes 1.408 s, and halving the budget first passes at 256 (58.19 ms), below the
    # default max_num_seqs 1,024 (0.10.1 on a ≥ 70 GiB GPU), so the cap is named
    d = _no_capacity("--slo", "itl=100ms")
    note = _no_bisection(d)
    assert IDLE_STEP_WORDS not in note and "a faster GPU" not in note
    assert note.startswith("no bisection: the lowest request_rate of the bracket, 0.000976562, already misses; there, "
                           "of 300 completed requests, 251 missed itl ≤ 100 ms: the step time at batch 1 is under the "
                           "limit (one decode of the longest context, 19.76 ms), but a step that carries a prefill "
                           "chunk of up to max_num_batched_tokens 8,192 tokens (the last chunk of the longest prompt, "
                           "120,633 tokens) takes 1.408 s")
    assert "265 of the 299 arrival gaps are 0, requests the trace gives one time" in note
    assert note.endswith("so no lower load meets it: --max-num-batched-tokens 256 with --max-num-seqs 256 or fewer "
                         "(vLLM refuses a budget below max_num_seqs, 1,024 here: config/scheduler.py) caps such a step "
                         "at 58.19 ms, under the limit")
    assert d["probes"][-1]["attainment"] == pytest.approx(49 / 300)


def test_cost_simulate_says_the_same_cause_in_its_no_capacity_answer():
    msg = refused("cost", "--simulate", *ARGS, "--slo", "itl=100ms")
    assert "the step time at batch 1 is under the limit (one decode of the longest context, 19.76 ms)" in msg
    assert "--max-num-batched-tokens 256 with --max-num-seqs 256 or fewer" in msg and IDLE_STEP_WORDS not in msg


def test_a_limit_under_the_lone_decode_step_keeps_the_step_time_words():
    # itl ≤ 15 ms is under the 19.76 ms lone decode above: no budget can meet it, and the step time is the cause; the
    # search is bracketed at the rate the widening above ends on (1/1024 req/s, ten halvings down from 1), so it judges
    # that one probe (the same 300 requests at the same rate) without the ten lighter-and-lighter probes before it
    d = _no_capacity("--slo", "itl=15ms", "--lo", "0.0009765625", "--hi", "1")
    note = _no_bisection(d)
    assert note.endswith("298 missed itl ≤ 15 ms" + IDLE_STEP_WORDS)


def test_another_limit_missed_too_keeps_the_step_time_words():
    # ttft ≤ 1 s is missed as well near idle (a 120,633-token prompt's prefill alone is longer): the budget is not the
    # only cause, so the note is not rewritten
    d = _no_capacity("--slo", "itl=100ms,ttft=1s")
    assert _no_bisection(d).endswith("missed itl ≤ 100 ms" + IDLE_STEP_WORDS)
