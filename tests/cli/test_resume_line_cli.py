"""simulate's resume line: printed under the preemptions without a host KV tier (``preemptions.resume``), and only
the tier's own line with one (``kv_tiers.resume``, with the tier's reloads), never both."""

from __future__ import annotations

import pytest
from cli_run import cli_json, run_cli

# 200 mooncake requests on 30 % of an H100: the pool is small enough for this run to preempt (11 times without a tier)
RUN = ("simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--trace", "mooncake", "--num-requests", "200",
       "--gpu-memory-utilization", "0.3", "--max-model-len", "32768")


def test_without_a_tier_the_resumes_are_in_the_json_and_the_text():
    d = cli_json(*RUN, "--json")
    n, r = d["summary"]["num_preemptions"], d["preemptions"]["resume"]
    assert n > 0 and 0 < r["resumes"] <= n  # a request resumes at most once per preemption
    assert r["hbm_hit_tokens"] + r["recomputed_tokens"] == r["resume_tokens"] and r["hbm_hit_tokens"] > 0
    assert r["recomputed_share_of_prefill"] == pytest.approx(r["recomputed_tokens"] / r["prefill_tokens"])
    out = run_cli(*RUN).output
    assert out.count("on resume after preemption") == 1
    assert (f"on resume after preemption ({r['resumes']:,} resumes, {r['resume_tokens']:,} tokens of prompt + "
            f"generated KV): {r['hbm_hit_tokens']:,} found in HBM's prefix cache, {r['recomputed_tokens']:,} "
            "recomputed") in " ".join(out.split())


def test_with_a_host_tier_only_the_tiers_resume_line_is_given():
    d = cli_json(*RUN, "--kv-offloading-size", "64", "--json")
    assert d["summary"]["num_preemptions"] > 0 and "resume" not in d["preemptions"]
    assert d["kv_tiers"]["resume"]["resumes"] > 0
    out = " ".join(run_cli(*RUN, "--kv-offloading-size", "64").output.split())
    assert out.count("on resume after preemption") == 1 and "reloaded from the host tier" in out


def test_lmcache_resumes_reload_their_prompt_chunks():
    # LMCache 0.5.6 looks a resumed request up again (its saved prompt chunks beyond its HBM hit): on this run the
    # tier reloads some of the resumes' tokens (it reloaded none before the rule; 544 of 95,483 when written)
    d = cli_json(*RUN, "--kv-offloading-size", "64", "--kv-offloading-backend", "lmcache", "--json")
    r = d["kv_tiers"]["resume"]
    assert r["resumes"] > 0 and r["host_reloaded_tokens"] > 0 and "lower_reloaded_tokens" not in r
    assert r["hbm_hit_tokens"] + r["host_reloaded_tokens"] + r["recomputed_tokens"] == r["resume_tokens"]


@pytest.mark.parametrize("backend", ["native", "lmcache"])
def test_offload_prints_the_tiers_resume_line_with_its_json_counts(backend):
    # 100 chat sessions at 5/s on 30 % of an H100: a few turns are preempted; the text gives the JSON's counts
    run = ("offload", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--sessions", "100", "--session-rate", "5",
           "--kv-offloading-size", "64", "--gpu-memory-utilization", "0.3", "--kv-offloading-backend", backend)
    r = cli_json(*run, "--json")["tier_stats"]["resume"]
    assert r["resumes"] > 0 and r["host_reloaded_tokens"] > 0
    out = " ".join(run_cli(*run).output.split())
    assert out.count("on resume after preemption") == 1
    assert (f"({r['resumes']:,} resumes, {r['resume_tokens']:,} tokens of prompt + generated KV): "
            f"{r['hbm_hit_tokens']:,} found in HBM's prefix cache, {r['host_reloaded_tokens']:,} reloaded from the "
            f"host tier, {r['recomputed_tokens']:,} recomputed") in out
