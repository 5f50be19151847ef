"""``--document-pool`` on the commands that share the synthetic workload (simulate, goodput --simulate, search), and
``offload``'s refusal naming where a document pool is simulated; every hit figure counted by hand."""

from __future__ import annotations

import pytest
from cli_run import cli_json, refused, run_cli

MODEL = ["meta-llama/Llama-3.1-8B", "--gpu", "H100"]
#: 8 requests one at a time over 2 documents of 1,024 tokens, each prompt = document + a 16-token question, output 16.
#: KV a request holds: 1,040 + 16 − 1 = 1,055 tokens = 66 blocks of 16; --num-gpu-blocks-override 67 = 66 usable
#: (block 0 is vLLM's null block), so HBM holds one request's blocks: the next document evicts the last one's.
#: Host: --kv-offloading-size 1 GiB of 2 MiB blocks (131,072 B/token × 16) = 512 blocks, both documents (128 blocks).
POOL = ["--prompt-lengths", "16", "--output-lengths", "16", "--num-requests", "8", "--concurrency", "1",
        "--document-pool", "2:1024:uniform", "--max-model-len", "1056", "--num-gpu-blocks-override", "67"]


def test_one_document_in_hbm_and_the_host_tier_serving_the_rest():
    d = cli_json("simulate", *MODEL, *POOL, "--kv-offloading-size", "1")
    # seed 0 draws documents 0 1 1 0 1 0 0 0 (tests/dynamics/test_document_pool.py). Per request:
    #   0: miss (first 0)   1: miss (first 1)   2: 1 after 1, HBM   3: 0, evicted from HBM by 1, host
    #   4: 1, host          5: 0, host          6: 0 after 0, HBM   7: HBM
    # HBM 3 × 1,024 = 3,072 tokens, host 3 × 1,024 = 3,072, of 8 × 1,040 = 8,320 prompt tokens: 0.36923 each
    hbm, host = d["kv_tiers"]["per_tier"]
    assert (hbm["hit_tokens"], host["hit_tokens"], d["kv_tiers"]["prompt_tokens"]) == (3072, 3072, 8320)
    assert hbm["hit_rate"] == pytest.approx(3072 / 8320) and host["hit_rate"] == pytest.approx(3072 / 8320)
    pool = d["workload"]["document_pool"]
    assert (pool["requests_seen_before"], pool["seen_before_share"], pool["segment_tokens"]) == (6, 0.75, 512)
    e_hbm, e_host = pool["expected"]
    # capacities per replica: HBM 66 × 16 = 1,056 tokens; host 512 × 16 = 8,192
    assert (e_hbm["capacity_tokens"], e_host["capacity_tokens"]) == (1056, 8192)
    # the replay of the draw through an LRU of one document, then of both: the hand count above
    assert e_hbm["lru_replay_hit_share"] == pytest.approx(3072 / 8320) == e_hbm["simulated_hit_share"]
    assert e_host["lru_replay_hit_share"] == pytest.approx(3072 / 8320) == e_host["simulated_hit_share"]
    # Che, steady state: HBM: 2,048·h = 1,056 → h = 0.515625; 2 × ½ × h × 1,024 = 528 tokens a request, ÷ 1,040;
    # HBM + host hold both: 1,024 ÷ 1,040; the host's share is the difference
    assert e_hbm["che_hit_share"] == pytest.approx(528 / 1040)
    assert e_host["che_hit_share"] == pytest.approx(1024 / 1040 - 528 / 1040)
    # a cache that never evicts: the 6 requests after each document's first hit 1,024 tokens each
    assert pool["unbounded_hit_share"] == pytest.approx(6 * 1024 / 8320)
    assert any(n.startswith("document pool (2 × 1,024 tokens, uniform)") and "never evicts would serve 73.8% of "
               "prompt tokens (the 75.0% of requests" in n for n in d["notes"])


def test_without_a_host_tier_the_hbm_figure_stands_beside_its_formula():
    d = cli_json("simulate", *MODEL, *POOL)
    # no host tier: only repeats of the last document hit (requests 2, 6, 7)
    assert d["summary"]["prefix_cache_hit_rate"] == pytest.approx(3072 / 8320)
    (row,) = d["workload"]["document_pool"]["expected"]
    assert row["tier"] == "hbm" and row["simulated_hit_share"] == pytest.approx(3072 / 8320)
    text = run_cli("simulate", *MODEL, *POOL, columns=400).output
    assert "document pool 2 documents × 1,024 tokens, uniform, one before each question (2 drawn; 75.0% of " \
           "requests drew one seen before)" in text


def test_goodput_simulate_takes_the_same_pool():
    d = cli_json("goodput", "--simulate", *MODEL, "--slo", "ttft=2s", *POOL, "--kv-offloading-size", "1")
    assert d["simulation"]["workload"]["document_pool"]["requests_seen_before"] == 6
    assert d["simulation"]["workload"]["prompt_tokens_mean"] == 1040
    hbm, host = d["simulation"]["workload"]["document_pool"]["expected"]  # as simulate's, the same run
    assert hbm["simulated_hit_share"] == pytest.approx(3072 / 8320) == host["lru_replay_hit_share"]


def test_search_probes_the_pool_prompts():
    d = cli_json("search", "meta-llama/Llama-3.2-3B", "--slo", "ttft=2s", "--gpus", "H100", "--tp", "1",
                 "--max-model-len", "8K", "--num-requests", "60", "--rate", "5", "--prompt-lengths", "32",
                 "--output-lengths", "16", "--document-pool", "20:2048:zipf=1")
    assert d["spec"]["document_pool"] == "20:2048:zipf=1"
    assert d["candidates"][0]["bounds"]["prompt_tokens_mean"] == 2048 + 32  # document + question


def test_a_pool_needs_the_question_lengths_and_offload_names_simulate():
    said = refused("simulate", *MODEL, "--document-pool", "2:1024", "--num-requests", "8")
    assert said.startswith("--document-pool puts a drawn document before each request's question")
    said = refused("simulate", *MODEL, *POOL[:-4], "--document-pool", "2:nope")
    assert "--document-pool '2:nope'" in said
    said = refused("offload", *MODEL, "--workload", "rag")
    assert "offload simulates multi-turn sessions only (chat, agent)" in said and "--document-pool" in said


def test_cost_simulate_and_the_python_api_take_the_pool():
    import kvledger

    d = cli_json("cost", "--simulate", *MODEL, "--slo", "ttft=2s", "--api", "gpt-4o-mini", "--prompt-lengths", "32",
                 "--output-lengths", "64", "--num-requests", "200", "--document-pool", "20:4096:zipf=1")
    wl = d["simulation"]["workload"]
    assert wl["prompt_tokens_mean"] == 4096 + 32 and wl["document_pool"]["spec"] == "20:4096:zipf=1"
    doc = kvledger.simulate(MODEL[0], "H100", prompt_lengths="16", output_lengths="16", num_requests=8,
                            concurrency=1, document_pool="2:1024:uniform", max_model_len=1056,
                            num_gpu_blocks_override=67)
    assert doc.summary["prefix_cache_hit_rate"] == pytest.approx(3072 / 8320)  # as the CLI run above
