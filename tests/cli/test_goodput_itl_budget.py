"""An ITL SLO that a step carrying a full prefill chunk misses at any load (``analyses/serving/itl_budget.py``): the
SRE trial's Llama-3.1-70B-Instruct at TP 4 on H100 (vLLM 0.10.1, azure-conv, itl ≤ 100 ms, 90 %) got "0.289 req/s"
with no word of why; the warning names the step and the budget that fixes it, and that budget does."""

from __future__ import annotations

import pytest
from cli_run import cli_json

from kvledger.analyses.serving.itl_budget import chunk_step_s

ARGS = ("goodput", "--simulate", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "H100", "--tp", "4", "--engine-version",
        "0.10.1", "--max-model-len", "32768", "--trace", "azure-conv", "--slo", "itl=100ms", "--target", "0.9",
        "--axis", "rate", "--num-requests", "300")


def _warning(d: dict) -> str | None:
    return next((n for n in d["notes"] if n.startswith("ITL set by the token budget: ")), None)


def test_the_budget_named_lifts_the_capacity():
    d = cli_json(*ARGS)
    note = _warning(d)
    # the default budget (vLLM 0.10.1 on a ≥ 70 GiB non-A100 GPU: 8,192 tokens) takes the longest of the first 300
    # azure-conv prompts (ContextTokens 4,107 in AzureLLMInferenceTrace_conv.csv) in one chunk: a 270.31 ms step in
    # this step cost, 2.7× the limit; halving to 1,024 (≥ max_num_seqs 1,024, so no cap) gives 81.39 ms, the first
    # halving under 100 ms
    assert note is not None and "max_num_batched_tokens 8,192 tokens (here the longest prompt, 4,107 tokens" in note
    assert "takes 270.31 ms" in note and "--max-num-batched-tokens 1024 caps such a step at 81.39 ms" in note
    assert "--max-num-seqs" not in note and "search --max-num-batched-tokens 1024,8192" in note
    assert d["boundary"]["boundary_value"] == pytest.approx(0.2890625)
    # the lever, simulated: with 1,024 every request meets itl ≤ 100 ms at 1 req/s and the capacity is 7 req/s, 24×
    # the 0.289
    fixed = cli_json(*ARGS, "--max-num-batched-tokens", "1024")
    assert _warning(fixed) is None and fixed["probes"][0]["attainment"] == 1.0
    assert fixed["boundary"]["boundary_value"] == pytest.approx(7.0)


def test_no_warning_without_an_itl_limit_or_with_a_mean():
    base = [a for a in ARGS if a != "itl=100ms"]
    i = base.index("--slo")
    for slo in ("ttft=2s", "itl_mean=100ms"):
        assert _warning(cli_json(*base[:i + 1], slo, *base[i + 1:])) is None


def test_the_step_priced_is_the_last_chunk_of_the_longest_prompt():
    # chunk c = budget − 1 after p = longest − c computed tokens scores c·p + c(c+1)/2 query-key pairs, beside one
    # decode of the longest context; a prompt shorter than the budget is one chunk (p = 0)
    seen = []

    class Cost:
        def step_time_s(self, shape):
            seen.append(shape)
            return 0.0

    chunk_step_s(Cost(), 1024, 7930)
    chunk_step_s(Cost(), 8192, 7930)
    a, b = seen
    assert (a.num_prefill_tokens, a.prefill_kv_tokens, a.prefill_attn_pairs) == (1023, 7930, 1023 * 6907 + 1023 * 512)
    assert (b.num_prefill_tokens, b.prefill_kv_tokens, b.prefill_attn_pairs) == (7930, 7930, 7930 * 7931 / 2)
    assert (a.num_decode_seqs, a.decode_kv_tokens) == (1, 7930)


def test_one_run_at_the_operators_rate_gets_the_warning_too():
    # goodput --simulate at a rate (no --target): the first 300 azure-conv requests at 6 req/s; the same longest prompt
    # (4,107 tokens) and step (270.31 ms), said as a warning of the run
    args = [a for a in ARGS if a not in ("--target", "0.9", "--axis", "rate")]
    d = cli_json(*args, "--rate", "6")
    note = next(n for n in d["notes"] if n.startswith("warning: ITL set by the token budget: in this run, "))
    assert "takes 270.31 ms" in note and "--max-num-batched-tokens 1024 caps such a step at 81.39 ms" in note
