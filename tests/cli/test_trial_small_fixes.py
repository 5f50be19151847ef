"""What a small-startup user's trial (RTX 4090, L4, A100-40GB; vLLM 0.8–0.19) found, pinned at the CLI."""

from __future__ import annotations

from cli_run import MODEL
from cli_run import refused as _refused
from cli_run import run_cli as _run


def test_fp8_kv_names_the_vllm_release_it_planned():
    # the header said "— TP 1, batch 19" only; plan and simulate name the release whose memory plan they used
    first = _run("fp8-kv", MODEL, "--gpu", "A100-40GB", "--engine-version", "0.19.0").output.splitlines()[0]
    assert first.endswith("on NVIDIA A100 40GB SXM4 — vllm 0.19.0, TP 1, batch 19")


def test_simulate_on_a_hybrid_model_that_cannot_start_names_the_length_that_does():
    # gemma-2-9b-it on an L4 with FP8 KV (vLLM 0.33): 874 usable blocks; 8,192 tokens need 512 full + 512 sliding
    # blocks, so vLLM refuses; the plan's estimate is 6,976 tokens (2 × 436 + 1 = 873 ≤ 874 blocks at vLLM's start-up
    # rule). tests/analyses/test_max_len_refusal.py derives it; here the user's command line.
    msg = _refused("simulate", "google/gemma-2-9b-it", "--gpu", "L4", "--kv-cache-dtype", "fp8")
    assert "--max-model-len 6976" in msg and "), or give the KV" not in msg
