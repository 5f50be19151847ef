"""vLLM's long-prefill flags in simulate, goodput --simulate and cost --simulate, per release (analyses/serving/
long_prefill.py; the per-step rule itself is worked by hand in tests/dynamics/test_long_prefill.py), and the mixture
length distribution a mixed chat + RAG workload needs."""

from __future__ import annotations

import pytest
from cli_run import MODEL, cli_json, refused

SIM = (MODEL, "--gpu", "H100", "--max-model-len", "128K", "--prompt-lengths", "mix:0.95*fixed:2K,0.05*fixed:100K",
       "--output-lengths", "fixed:128", "--rate", "0.5", "--num-requests", "100")
SMALL = (MODEL, "--gpu", "H100", "--prompt-lengths", "fixed:2K", "--output-lengths", "fixed:16", "--rate", "1",
         "--num-requests", "5")


def test_a_threshold_cuts_the_short_prompts_ttft_behind_100k_token_prefills():
    # 95% 2,048-token chat prompts, 5% 100,000-token RAG prompts: without a cap a chat prompt arriving during a RAG
    # prefill waits for all of it (12 steps of 8,192 tokens, the rule of tests/dynamics/test_long_prefill.py); with
    # 2,048 it joins the next step. The p90 TTFT is a chat prompt's (95 of 100 are).
    before = cli_json("simulate", *SIM)
    after = cli_json("simulate", *SIM, "--long-prefill-token-threshold", "2048")
    # without the flag the keys are there at vLLM's default: threshold 0 (no cap), so no cap to hold alone (null)
    assert (before["engine"]["long_prefill_token_threshold"], before["engine"]["long_prefill_cap_alone"]) == (0, None)
    assert list(before["engine"]) == list(after["engine"])  # the same keys in the same order
    assert after["engine"]["long_prefill_token_threshold"] == 2048
    assert after["engine"]["long_prefill_cap_alone"] is False  # 0.33: lifted for a request alone (0.31 on)
    assert after["summary"]["ttft_s"]["p90"] < before["summary"]["ttft_s"]["p90"] / 3
    assert after["workload"]["num_requests"] == 100
    assert any("one request's chunk per step capped at 2,048 tokens" in n for n in after["notes"])


def test_up_to_0_30_the_cap_holds_for_a_request_alone():
    d = cli_json("simulate", *SMALL, "--engine-version", "0.30.0", "--long-prefill-token-threshold", "512")
    assert d["engine"]["long_prefill_token_threshold"] == 512 and d["engine"]["long_prefill_cap_alone"] is True


def test_0_8_0_has_the_flag_but_its_v1_scheduler_does_not_read_it():
    d = cli_json("simulate", *SMALL, "--engine-version", "0.8.0", "--long-prefill-token-threshold", "512")
    assert (d["engine"]["long_prefill_token_threshold"], d["engine"]["long_prefill_cap_alone"]) == (0, None)
    assert any("has no effect in vLLM 0.8.0" in n for n in d["notes"])


def test_partial_prefill_limits_at_their_default_are_accepted_where_the_flags_exist():
    d = cli_json("simulate", *SMALL, "--engine-version", "0.19.0", "--max-num-partial-prefills", "1")
    assert any("--max-num-partial-prefills 1 as given: vLLM's default" in n for n in d["notes"])


@pytest.mark.parametrize(("extra", "words"), [
    (("--engine-version", "0.19.0", "--max-num-partial-prefills", "2"), "V1 engine refuses to start"),
    (("--engine-version", "0.10.2", "--max-long-partial-prefills", "2"), "falls back to the V0 engine"),
    (("--max-num-partial-prefills", "1"), "vLLM 0.33.0 has no --max-num-partial-prefills"),
    (("--engine-version", "0.7.3", "--long-prefill-token-threshold", "512"), "runs the V0 engine"),
    (("--long-prefill-token-threshold", "200000"), "above max_model_len 131,072"),
    (("--batching", "static", "--long-prefill-token-threshold", "512"), "not with --batching static"),
])
def test_what_the_release_or_rule_does_not_run_is_refused(extra, words):
    assert words in refused("simulate", *SMALL, *extra)


@pytest.mark.parametrize("cmd", [("simulate",), ("goodput", "--simulate"), ("cost", "--simulate")])
def test_sglang_is_told_they_are_vllm_flags(cmd):
    slo = () if cmd == ("simulate",) else ("--slo", "ttft=1s")
    cost = ("--api", "OpenAI:gpt-4.1", "--gpu-provider", "Nebius", "--at-offered-load") if cmd[0] == "cost" else ()
    msg = refused(*cmd, *SMALL, *slo, *cost, "--policy", "sglang", "--long-prefill-token-threshold", "512")
    assert "--long-prefill-token-threshold is a vLLM flag" in msg and "--chunked-prefill-size" in msg


def test_the_adaptive_floor_from_0_31_and_refused_before():
    # vLLM 0.31.0's SchedulerConfig.long_prefill_token_threshold_adaptive (absent in 0.30.0's arg_utils.py: argparse
    # refuses it); the rule itself is worked by hand in tests/dynamics/test_long_prefill.py
    d = cli_json("simulate", *SMALL, "--engine-version", "0.31.0", "--long-prefill-token-threshold", "512",
                 "--long-prefill-token-threshold-adaptive")
    assert d["engine"]["long_prefill_token_threshold_adaptive"] is True
    assert any("floored at max_num_batched_tokens // (running + waiting requests)" in n for n in d["notes"])
    msg = refused("simulate", *SMALL, "--engine-version", "0.30.0", "--long-prefill-token-threshold", "512",
                  "--long-prefill-token-threshold-adaptive")
    assert msg.startswith("--long-prefill-token-threshold-adaptive: vLLM 0.30.0 refuses it at argument parsing "
                          "(\"vllm serve: error: unrecognized arguments: --long-prefill-token-threshold-adaptive\")")
    off = refused("simulate", *SMALL, "--engine-version", "0.30.0", "--no-long-prefill-token-threshold-adaptive")
    assert "unrecognized arguments: --no-long-prefill-token-threshold-adaptive" in off
    alone = cli_json("simulate", *SMALL, "--long-prefill-token-threshold-adaptive")
    # without a threshold there is no cap to floor: null, as long_prefill_cap_alone (every run has both keys)
    assert alone["engine"]["long_prefill_token_threshold_adaptive"] is None
    assert any("has no effect without --long-prefill-token-threshold" in n for n in alone["notes"])


def test_goodput_simulate_takes_the_threshold():
    d = cli_json("goodput", "--simulate", *SMALL, "--slo", "ttft=1s", "--long-prefill-token-threshold", "512")
    assert any("capped at 512 tokens" in n for n in d["simulation"]["notes"])


def test_a_mixture_that_is_not_weight_times_distribution_is_refused():
    msg = refused("simulate", MODEL, "--gpu", "H100", "--prompt-lengths", "mix:0.9fixed:2K",
                  "--output-lengths", "fixed:16", "--rate", "1", "--num-requests", "5")
    assert "is not WEIGHT*DIST" in msg
