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
