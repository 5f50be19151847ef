"""`kvledger offload`'s text view gives the resume line its --json holds (``tier_stats.resume``), as simulate prints
it under a host tier."""

from __future__ import annotations

from cli_run import cli_json, run_cli

# 200 chat sessions at 10 starts/s on 26% of an H100 (16K context cap): the pool is small enough that requests are
# preempted and resumed with a 64 GiB host tier
RUN = ("offload", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--kv-offloading-size", "64", "--sessions", "200",
       "--session-rate", "10", "--gpu-memory-utilization", "0.26", "--max-model-len", "16384")


def test_the_text_gives_the_jsons_resume_figures():
    r = cli_json(*RUN, "--json")["tier_stats"]["resume"]
    # the JSON's own figures: 135 resumes needing 394,714 tokens back, 356,832 of them from HBM, 33,232 reloaded from
    # the host tier, 4,650 recomputed (356,832 + 33,232 + 4,650 = 394,714, nothing loaded then evicted)
    assert (r["resumes"], r["resume_tokens"], r["hbm_hit_tokens"], r["host_reloaded_tokens"], r["recomputed_tokens"]) \
        == (135, 394_714, 356_832, 33_232, 4_650)
    assert r["hbm_hit_tokens"] + r["host_reloaded_tokens"] + r["recomputed_tokens"] == r["resume_tokens"]
    out = " ".join(run_cli(*RUN).stdout.split())
    assert ("on resume after preemption (135 resumes, 394,714 tokens of prompt + generated KV): 356,832 found in "
            "HBM's prefix cache, 33,232 reloaded from the host tier, 4,650 recomputed") in out
    assert out.count("on resume after preemption") == 1
