"""The API mix's discounts against the self-hosted side: a comparison whose two sides assume different traffic says so
(a FinOps trial priced a shared 2,000-token system prompt at the API's cached-input price while the self-hosted run
reused nothing, and nothing said so)."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from kvledger.cli.main import app

BASE = ["cost", "--simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--slo", "ttft=500ms,tpot=50ms",
        "--num-requests", "200", "--monthly-tokens", "2e9", "--api", "OpenAI:gpt-4.1-mini", "--json"]


def _notes(*extra: str) -> list[str]:
    res = CliRunner().invoke(app, [*BASE, *extra])
    assert res.exit_code == 0, res.output
    return json.loads(res.stdout)["notes"]


def test_a_cache_hit_rate_against_prompts_that_share_nothing_names_the_shared_prefix_flag():
    # azure-conv carries no prefix ids: the self-hosted run's prefix-cache hit rate is 0 by construction
    (note,) = [n for n in _notes("--cache-hit-rate", "0.5") if n.startswith("--cache-hit-rate")]
    assert note.startswith("--cache-hit-rate 0.5: the API bill prices 50% of the input tokens at the cached-input "
                           "price; the self-hosted run was simulated on prompts that share no prefix")
    assert "--shared-prefix-tokens N" in note


def test_with_a_shared_prefix_the_self_hosted_reuse_is_stated_and_batch_share_is_said():
    # a 512-token system prompt on every prompt of at least 512 tokens: the run reuses part of its prompt tokens, the
    # share the simulator counted (summary.prefix_cache_hit_rate), stated beside the API's 50%
    notes = _notes("--cache-hit-rate", "0.5", "--shared-prefix-tokens", "512", "--batch-share", "0.3")
    (cache,) = [n for n in notes if n.startswith("--cache-hit-rate")]
    assert "the self-hosted run reused " in cache and "of its prompt tokens from vLLM's prefix cache" in cache
    reused = int(cache.split("reused ")[1].split("%")[0])
    assert 0 < reused < 100
    (batch,) = [n for n in notes if n.startswith("--batch-share")]
    assert batch.startswith("--batch-share 0.3: the API bill prices 30% of the requests at the batch API's price")


def test_no_mix_no_note():
    assert not [n for n in _notes() if n.startswith(("--cache-hit-rate", "--batch-share"))]


def test_an_api_cache_share_far_from_the_runs_reuse_is_a_caveat_the_verdict_rests_on():
    # azure-conv with a 1,500-token system prompt: only the prompts of at least 1,500 tokens share it, so the run
    # reuses far less than the API's 80% cached input (the fresh-user trial's 11% at 300 requests): more than
    # LIKE_FOR_LIKE (10 points) apart, the verdict's "rests on" says it, as it does a batch share
    from kvledger.analyses.serving.mix_notes import LIKE_FOR_LIKE

    res = CliRunner().invoke(app, [*BASE, "--cache-hit-rate", "0.8", "--shared-prefix-tokens", "1500", "--batch-share",
                                   "0.2"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    rests = d["decision"]["rests_on"]
    (cache,) = [r for r in rests if r.startswith("API input 80% cached")]
    reused = int(cache.split("reused ")[1].split("%")[0]) / 100
    assert abs(0.8 - reused) > LIKE_FOR_LIKE and "of its prompt tokens: not like for like — " in cache
    # and how to make it alike: no N shares 80% of azure-conv's prompt tokens (N × the prompts of ≥ N tokens ÷ all
    # of them peaks near half), so the API priced at the run's own reuse
    assert "— no one shared system prompt reaches 80% of these prompts' tokens (at most " in cache
    assert cache.endswith(f"so --cache-hit-rate {reused:.2f} prices the API at the run's own reuse")
    assert "API 20% at batch prices (--batch-share), the self-hosted side all at the SLO" in rests
    # no mix: no such caveat
    plain = json.loads(CliRunner().invoke(app, BASE).stdout)["decision"]["rests_on"]
    assert not [r for r in plain if r.startswith("API ")]


def test_a_shared_prefix_no_prompt_reaches_is_said_not_asked_for_again():
    # fixed 1,000-token prompts under a 2,000-token shared prefix: no prompt reaches it, so the note says so rather
    # than suggesting --shared-prefix-tokens, already given (a fresh-user trial)
    notes = _notes("--cache-hit-rate", "0.5", "--shared-prefix-tokens", "2000", "--prompt-lengths", "fixed:1000",
                   "--output-lengths", "fixed:50")
    (note,) = [n for n in notes if n.startswith("--cache-hit-rate")]
    assert "--shared-prefix-tokens 2,000 reaches no prompt of its workload" in note
    assert "--shared-prefix-tokens N simulates" not in note


def test_a_run_that_reuses_its_prompts_against_an_uncached_api_bill_says_so():
    # a long-context trial: cost --simulate with a shared prefix priced the self-hosted side on its prefix-cache hits
    # and the API at list price, with no word that the two sides assume different traffic. Here fixed 2,048-token
    # prompts under a 1,536-token shared prefix (96 whole 16-token blocks): the first prompt misses and the other 199
    # hit the prefix, 199 × 1,536 ÷ (200 × 2,048) = 0.7463 of the prompt tokens → "75%", --cache-hit-rate 0.75
    res = CliRunner().invoke(app, [*BASE, "--prompt-lengths", "fixed:2048", "--output-lengths", "fixed:64",
                                   "--shared-prefix-tokens", "1536"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.stdout)
    (note,) = [n for n in d["notes"] if n.startswith("the self-hosted run reused")]
    assert note.startswith("the self-hosted run reused 75% of its prompt tokens from vLLM's prefix cache")
    assert "--cache-hit-rate 0.75 prices the API's prompt caching on the same reuse" in note
    assert ("API input priced uncached (no --cache-hit-rate) against a self-hosted run that reused 75% of its prompt "
            "tokens: not like for like — --cache-hit-rate 0.75 prices the API at the run's own reuse") in (
        d["decision"]["rests_on"])
    # given the same share, neither the note nor the caveat: 0.75 against 0.7463 is within LIKE_FOR_LIKE
    res = CliRunner().invoke(app, [*BASE, "--prompt-lengths", "fixed:2048", "--output-lengths", "fixed:64",
                                   "--shared-prefix-tokens", "1536", "--cache-hit-rate", "0.75"])
    d = json.loads(res.stdout)
    assert not [n for n in d["notes"] if n.startswith("the self-hosted run reused")]
    assert not [r for r in d["decision"]["rests_on"] if r.startswith("API input")]
