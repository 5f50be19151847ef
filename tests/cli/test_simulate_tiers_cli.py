"""`kvledger simulate` with the engines' tier flags (the shared TierFlags group) and on synthetic session workloads."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from cli_run import cli_json
from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.errors import InputError

runner = CliRunner(env={"COLUMNS": "250"})
MODEL = ["meta-llama/Llama-3.1-8B", "--gpu", "H100"]
SESSIONS = ["--workload", "chat", "--sessions", "8", "--session-rate", "1", "--max-model-len", "32K"]


def test_simulate_with_a_vllm_host_tier_matches_offload_on_the_same_sessions():
    d = cli_json("simulate", *MODEL, *SESSIONS, "--kv-offloading-size", "64")
    k = d["kv_tiers"]
    # Llama-3.1-8B KV per token: 32 layers × 8 KV heads × 128 dims × 2 (K, V) × 2 B (bf16) = 131,072 B; a 16-token
    # block is 2,097,152 B, so 64 GiB = 68,719,476,736 B holds 32,768 CPU blocks (vLLM 0.33.0: 64 × 2^30 // 2^21).
    # Read bandwidth: H100 SXM PCIe Gen5 x16 128 GB/s both ways → 64 GB/s one way × 0.8 = 51.2 GB/s.
    assert k["host_tier"]["capacity_units"] == 32_768 and k["host_tier"]["unit_tokens"] == 16
    assert k["host_tier"]["bytes_per_token"] == 131_072 and k["host_tier"]["read_bytes_per_s"] == 51.2e9
    hbm, host = k["per_tier"]
    assert host["loaded_bytes"] == host["loaded_tokens"] * 131_072
    assert host["load_s"] == pytest.approx(host["loaded_bytes"] / 51.2e9)
    assert hbm["hit_tokens"] + host["hit_tokens"] <= k["prompt_tokens"]
    turns = d["workload"]["num_requests"]
    assert d["summary"]["num_requests"] == turns and k["ttft_s_without_tier"]["count"] == turns
    assert d["workload"]["sessions"]["num_sessions"] == 8
    # `kvledger offload` draws the same 8 sessions (seed 0, 64-token segments, max_model_len 32K) and runs the same
    # simulate_offload: the per-tier figures must be the same numbers
    o = cli_json("offload", *MODEL, "--kv-offloading-size", "64", "--sessions", "8", "--session-rate", "1")
    s = o["tier_stats"]
    assert (hbm["hit_tokens"], host["hit_tokens"], host["stored_units"]) == (
        s["hbm_hit_tokens"], s["host_hit_tokens"], s["stored_units"])
    assert k["ttft_s_with_tier"] == o["ttft_s_with_offload"] and k["ttft_s_without_tier"] == o["ttft_s_without_offload"]


def test_simulate_with_sglang_hicache_counts_the_trace_segments():
    d = cli_json("simulate", *MODEL, "--policy", "sglang", "--trace", "mooncake", "--num-requests", "40",
              "--enable-hierarchical-cache", "--hicache-size", "10")
    h = d["kv_tiers"]["host_tier"]
    # --hicache-size 10 GB: 10^10 // 131,072 B = 76,293 tokens (+ 1 padding page of 1 token = 76,294, SGLang 0.5.23);
    # Mooncake hash ids are 512-token segments: 76,294 // 512 = 149 host units
    assert d["kv_tiers"]["plan"]["tiers"][1]["capacity_tokens"] == 76_294
    assert (h["unit_tokens"], h["capacity_units"], h["write_policy"]) == (512, 149, "write_through")


def test_session_workload_without_a_tier_and_a_trace_without_tier_flags():
    d = cli_json("simulate", *MODEL, *SESSIONS)
    assert "kv_tiers" not in d and d["workload"]["sessions"]["kind"] == "chat"
    assert d["workload"]["mode"].startswith("sessions: 8 closed loops")
    d = cli_json("simulate", *MODEL, "--num-requests", "20")
    assert "kv_tiers" not in d and "sessions" not in d["workload"]


@pytest.mark.parametrize(("flags", "words"), [
    # the engine is chosen by --policy in simulate: the error names that flag, not offload's/plan's --engine
    (["--policy", "sglang", "--kv-offloading-size", "64"], "is a vLLM flag; with --policy sglang it would be ignored"),
    (["--enable-hierarchical-cache"], "is an SGLang flag; with --policy vllm it would be ignored"),
    (["--policy", "sglang", "--hicache-ratio", "2"], "exists only with --enable-hierarchical-cache"),
    (["--kv-offloading-size", "64", "--kv-offloading-backend", "foo"], "must be native or lmcache"),
    (["--kv-offloading-size", "lots"], "cannot read 'lots' as a size"),
    (["--kv-offloading-size", "64", "--engine-version", "0.11.0"], "arrive in 0.11.1"),
    (["--hicache-write-policy", "write_through"], "--hicache-write-policy is an SGLang flag; with --policy vllm"),
    (["--store-threshold", "2"], "give no host tier: pass --kv-offloading-size"),
    (["--kv-offloading-size", "64", "--no-enable-prefix-caching"], "prefix caching off"),
])
def test_bad_tier_flags_are_one_paragraph_errors(flags, words):
    res = runner.invoke(app, ["simulate", *MODEL, "--num-requests", "20", *flags])
    assert isinstance(res.exception, InputError), res.output
    assert words in str(res.exception) and "\n" not in str(res.exception)


@pytest.mark.parametrize(("flags", "words"), [
    (["--sessions", "3"], "add --workload chat"),
    (["--workload", "chat", "--rate", "3", "--trace", "mooncake"],
     "--trace and --rate would be ignored: drop --trace and --rate"),
    (["--workload", "chats"], "chat, agent"),
])
def test_bad_session_flags_are_one_paragraph_errors(flags, words):
    res = runner.invoke(app, ["simulate", *MODEL, *flags])
    assert isinstance(res.exception, InputError), res.output
    assert words in str(res.exception) and "\n" not in str(res.exception)


def test_a_model_the_engine_cannot_offload_is_refused_with_the_reason_without_a_traceback():
    # vLLM 0.14.0 turns the hybrid KV cache manager off under a KV connector; a Mamba/linear-attention model then
    # fails at startup ("hybrid SSM models require HMA"): refused as `plan` and `offload` refuse it
    proc = subprocess.run([sys.executable, "-m", "kvledger.cli.main", "simulate", "Qwen/Qwen3-Next-80B-A3B-Thinking",
                           "--gpu", "H200", "--tp", "4", "--engine-version", "0.14.0", "--num-requests", "5",
                           "--kv-offloading-size", "64", "--kv-offloading-backend", "native"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2 and "hybrid SSM models require HMA" in proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.count("\n") == 1


@pytest.mark.parametrize(("router", "hit_tokens"), [
    # 512-token prefix ids, 2 replicas, each request done long before the next (1 s apart, 4 output tokens).
    # Sessions inferred (≥ 2 shared ids): A [1,2,3] s0; B [7,8] s1; C [1,9] shares 1 id only: s2; D [1,2,3,4]: s0.
    # round_robin: A r0, B r1, C r0 (hits A's first segment: 512), D r1 (B's replica: miss) = 512.
    ("round_robin", 512),
    # session_affinity: new sessions to the least loaded replica (all idle: r0), D to A's: 512 + 3 × 512 = 2,048.
    ("session_affinity", 2048),
    # prefix_aware: B → r1 (smaller tree); C matches 512 of 1,100 (≤ 50 %) → smaller tree r1 (1,100 < 1,600): miss;
    # D matches 1,536 of 2,100 on r0: hit 1,536.
    ("prefix_aware", 1536),
])
def test_session_affinity_on_a_trace_without_session_ids_infers_them_from_prefix_ids(tmp_path, router, hit_tokens):
    rows = [(0, 1600, [1, 2, 3]), (1, 1100, [7, 8]), (2, 1100, [1, 9]), (3, 2100, [1, 2, 3, 4])]
    path = tmp_path / "t.jsonl"
    path.write_text("".join(json.dumps({"arrival_s": t, "num_prompt_tokens": p, "num_output_tokens": 4,
                                        "prefix_segments": s}) + "\n" for t, p, s in rows))
    d = cli_json("simulate", *MODEL, "--trace", str(path), "--replicas", "2", "--router", router)
    s = d["summary"]
    assert (s["prefix_cache_hit_tokens"], s["prefix_cache_query_tokens"]) == (hit_tokens, 5900)  # Σ prompts
    inferred = d["workload"].get("sessions_inferred")
    assert (inferred or {}).get("num_sessions") == (3 if router == "session_affinity" else None)


def test_out_with_a_tier_writes_the_tier_block_in_summary_json(tmp_path):
    res = runner.invoke(app, ["simulate", *MODEL, *SESSIONS, "--kv-offloading-size", "64", "--out", str(tmp_path)],
                        catch_exceptions=False)
    assert res.exit_code == 0, res.output
    d = json.loads((tmp_path / "summary.json").read_text())
    assert d["kv_tiers"]["host_tier"]["capacity_units"] == 32_768 and (tmp_path / "records.parquet").is_file()


def test_simulate_with_sglang_hicache_matches_offload_on_the_same_sessions():
    d = cli_json("simulate", *MODEL, "--policy", "sglang", *SESSIONS, "--enable-hierarchical-cache", "--hicache-ratio",
              "1")
    k = d["kv_tiers"]
    o = cli_json("offload", *MODEL, "--engine", "sglang", "--enable-hierarchical-cache", "--hicache-ratio", "1",
              "--sessions", "8", "--session-rate", "1")
    s = o["tier_stats"]
    # host units are the sessions' 64-token segments: the host tier's tokens // 64, as `offload` sizes it
    assert k["host_tier"]["unit_tokens"] == 64 and k["host_tier"]["capacity_units"] == s["host_capacity_units"]
    assert k["host_tier"]["capacity_units"] == k["plan"]["tiers"][1]["capacity_tokens"] // 64
    hbm, host = k["per_tier"]
    assert (hbm["hit_tokens"], host["hit_tokens"], host["stored_units"]) == (
        s["hbm_hit_tokens"], s["host_hit_tokens"], s["stored_units"])
    assert k["ttft_s_with_tier"] == o["ttft_s_with_offload"]
