"""``kvledger doctor FILE`` on a vLLM Prometheus /metrics scrape: the preemption count (vLLM 0.10.x logs print none),
the KV pool ``vllm:cache_config_info`` names against the ledger's plan, usage and queue now, and the capacity advice.

The real scrape: tests/fixtures/vllm_metrics/aibrix_qwen2.5-coder-1.5b.prom (source and licence in SOURCES.md there)."""

from __future__ import annotations

from pathlib import Path

from cli_run import cli_json, refused, run_cli

FIX = Path(__file__).resolve().parents[1] / "fixtures" / "vllm_metrics"
SCRAPE = FIX / "aibrix_qwen2.5-coder-1.5b.prom"
CONFIG = FIX / "qwen2.5-coder-1.5b-instruct.config.json"


def test_the_real_scrape_is_read_not_refused():
    # values read from the scrape: vllm:num_preemptions_total 0.0; cache_config_info num_gpu_blocks="81767",
    # block_size="16" → 81,767 × 16 = 1,308,272 token slots; vllm:gpu_cache_usage_perc 0.0 (its V0 name: the scrape
    # has no kv_cache_usage_perc); running 0, waiting 0
    out = run_cli("doctor", str(SCRAPE)).output
    assert "a vLLM Prometheus /metrics scrape (model_name Qwen/Qwen2.5-Coder-1.5B-Instruct)" in out
    assert "0 preemption(s) since the server started (vllm:num_preemptions_total, a counter)" in out
    assert "81,767 blocks × 16 tokens = 1,308,272 token slots" in out
    assert "engine 0.0% (vllm:gpu_cache_usage_perc" in out and "running 0, waiting 0" in out
    assert "pass --model and --gpu" in out and "advice:" not in out  # nothing preempted: no remedy offered


def test_the_pool_in_bytes_and_against_the_plan():
    # Qwen2.5-Coder-1.5B: 28 layers × 2 KV heads × head_dim 128 (1536 ÷ 12 heads) × 2 (K and V) × 2 B (bf16) =
    # 28,672 B per token; × 16 tokens = 458,752 B per block; × 81,767 blocks = 37,510,774,784 B = 34.93 GiB
    d = cli_json("doctor", str(SCRAPE), "--model", str(CONFIG), "--gpu", "L40S", "--engine-version", "0.10.1")
    pool = d["pool"]
    assert (pool["num_gpu_blocks"], pool["block_size"], pool["token_slots"]) == (81767, 16, 1_308_272)
    assert pool["bytes_per_block"] == 458_752 and pool["kv_bytes"] == 37_510_774_784
    from kvledger.api import plan as api_plan  # the plan the comparison names: the ledger's for the scrape's settings

    p = api_plan(str(CONFIG), "L40S", engine_version="0.10.1", gpu_memory_utilization=0.9, block_size=16)
    blocks = p.plan.memory.num_gpu_blocks
    assert pool["plan"]["num_gpu_blocks"] == blocks
    assert pool["scrape_vs_plan_pct"] == round(100 * (81767 - blocks) / blocks, 1)
    assert d["preemptions"] == {"count": 0, "triggered": False, "message": d["preemptions"]["message"]}


def test_preemptions_counted_across_engines_with_the_advice(tmp_path):
    # the same scrape as a DP-2 0.19 server would export it: vllm:num_preemptions_total per engine label (3 + 4 = 7
    # summed), vllm:kv_cache_usage_perc (0.19's only usage name) per engine, kept apart
    text = SCRAPE.read_text().replace("vllm:num_preemptions_total{model_name=",
                                      'vllm:num_preemptions_total{engine="0",model_name=')
    text = text.replace('engine="0",model_name="Qwen/Qwen2.5-Coder-1.5B-Instruct"} 0.0\n# HELP vllm:prompt',
                        'engine="0",model_name="Qwen/Qwen2.5-Coder-1.5B-Instruct"} 3.0\n'
                        'vllm:num_preemptions_total{engine="1",model_name="Qwen/Qwen2.5-Coder-1.5B-Instruct"} 4.0\n'
                        'vllm:kv_cache_usage_perc{engine="0"} 0.97\nvllm:kv_cache_usage_perc{engine="1"} 0.5\n'
                        '# HELP vllm:prompt')
    f = tmp_path / "metrics.txt"
    f.write_text(text)
    d = cli_json("doctor", str(f))
    assert d["preemptions"]["count"] == 7 and d["preemptions"]["triggered"]
    assert d["kv_usage_metric"] == "vllm:kv_cache_usage_perc" and d["kv_usage_pct"] == {"0": 97.0, "1": 50.0}
    out = run_cli("doctor", str(f)).output
    assert "7 preemption(s) since the server started" in out and "KV blocks vLLM freed" in out
    assert "advice: raise --gpu-memory-utilization, raise --tensor-parallel-size or lower --max-num-seqs" in out


def test_another_engines_scrape_is_refused_by_name(tmp_path):
    f = tmp_path / "sglang.txt"
    f.write_text('# TYPE sglang:num_running_reqs gauge\nsglang:num_running_reqs{tp_rank="0"} 4.0\n')
    msg = refused("doctor", str(f))
    assert "none of them vLLM's" in msg and "reads vLLM's metrics (vllm:…) only" in msg


def test_prefix_cache_counters_gpu_and_connector(tmp_path):
    # The real V0 scrape: vllm:gpu_prefix_cache_hit_rate -1.0, which 0.10.1's NaiveBlockAllocator returns (caching off).
    assert "prefix cache: prefix caching off (vllm:gpu_prefix_cache_hit_rate −1, V0)" in run_cli("doctor",
                                                                                                 str(SCRAPE)).output
    # A V1 scrape of a DP-2 server with CPU offloading: the GPU counters per engine summed, 3,000,000 + 2,980,000 =
    # 5,980,000 hit of 12,000,000 + 12,281,682 = 24,281,682 queried = 24.6 %; the connector's 900,000 of the
    # 18,301,682 tokens past the GPU hit (24,281,682 − 5,980,000) = 4.9 %.
    text = SCRAPE.read_text() + (
        "# TYPE vllm:prefix_cache_queries_total counter\n"
        'vllm:prefix_cache_queries_total{engine="0",model_name="m"} 12000000.0\n'
        'vllm:prefix_cache_queries_total{engine="1",model_name="m"} 12281682.0\n'
        "# TYPE vllm:prefix_cache_hits_total counter\n"
        'vllm:prefix_cache_hits_total{engine="0",model_name="m"} 3000000.0\n'
        'vllm:prefix_cache_hits_total{engine="1",model_name="m"} 2980000.0\n'
        "# TYPE vllm:external_prefix_cache_queries_total counter\n"
        'vllm:external_prefix_cache_queries_total{engine="0",model_name="m"} 18301682.0\n'
        "# TYPE vllm:external_prefix_cache_hits_total counter\n"
        'vllm:external_prefix_cache_hits_total{engine="0",model_name="m"} 900000.0\n')
    f = tmp_path / "metrics.txt"
    f.write_text(text)
    p = cli_json("doctor", str(f))["prefix_cache"]
    assert (p["gpu"]["queries_tokens"], p["gpu"]["hits_tokens"]) == (24_281_682, 5_980_000)
    assert round(p["gpu"]["hit_rate"], 4) == 0.2463 and round(p["connector"]["hit_rate"], 4) == 0.0492
    out = run_cli("doctor", str(f)).output
    assert "prefix cache: GPU 5,980,000 of 24,281,682 prompt tokens looked up = 24.6%" in out
    assert "KV connector 900,000 of 18,301,682 tokens past the GPU hit" in out and "= 4.9%" in out


def test_a_v0_scrape_is_planned_under_the_v0_rules():
    # the real scrape exports vllm:gpu_prefix_cache_hit_rate -1.0, vllm:num_requests_swapped and
    # vllm:cpu_cache_usage_perc: vLLM's V0 engine (V1 has none of them). Without --engine-version the pool was planned
    # under the newest V1 rules (0.33.0) and set against the scrape's V0 pool; now under the ledger's V0 rules, as a
    # V0 log is (0.7.3), and said so
    d = cli_json("doctor", str(SCRAPE), "--model", str(CONFIG), "--gpu", "L40S")
    assert d["pool"]["plan"]["engine_version"] == "0.7.3"
    assert any("gauge of vLLM's V0 engine only" in n and "(0.7.3, versions before 0.8)" in n for n in d["notes"])
    from kvledger.api import plan as api_plan

    p = api_plan(str(CONFIG), "L40S", engine_version="0.7.3", gpu_memory_utilization=0.9, block_size=16)
    assert d["pool"]["plan"]["num_gpu_blocks"] == p.plan.memory.num_gpu_blocks
    # --engine-version still picks
    assert cli_json("doctor", str(SCRAPE), "--model", str(CONFIG), "--gpu", "L40S", "--engine-version",
                    "0.10.1")["pool"]["plan"]["engine_version"] == "0.10.1"


def _preempting(tmp_path, running: str, usage: str) -> Path:
    """The real scrape of one engine with 5 preemptions, ``running`` requests and KV usage ``usage`` (0–1)."""
    text = SCRAPE.read_text().replace('vllm:num_preemptions_total{model_name="Qwen/Qwen2.5-Coder-1.5B-Instruct"} 0.0',
                                      'vllm:num_preemptions_total{model_name="Qwen/Qwen2.5-Coder-1.5B-Instruct"} 5.0')
    text = text.replace('vllm:num_requests_running{model_name="Qwen/Qwen2.5-Coder-1.5B-Instruct"} 0.0',
                        f'vllm:num_requests_running{{model_name="Qwen/Qwen2.5-Coder-1.5B-Instruct"}} {running}')
    text = text.replace('vllm:gpu_cache_usage_perc{model_name="Qwen/Qwen2.5-Coder-1.5B-Instruct"} 0.0',
                        f'vllm:gpu_cache_usage_perc{{model_name="Qwen/Qwen2.5-Coder-1.5B-Instruct"}} {usage}')
    f = tmp_path / "metrics.txt"
    f.write_text(text)
    return f


def test_the_advice_prints_the_flag_lines_vllm_serve_takes(tmp_path):
    # 5 preemptions; cache_config_info gpu_memory_utilization="0.9" → 0.9 + 0.05 = 0.95 (the cap); --tp 1 given →
    # TP 2; 60 running at 96% KV usage → 60 ÷ 0.96 = 62.5 → 62 requests of their size fit; cache_dtype="auto" → fp8
    f = _preempting(tmp_path, "60.0", "0.96")
    d = cli_json("doctor", str(f), "--tp", "1")
    assert [x["flag"] for x in d["advice_flags"]] == ["--gpu-memory-utilization 0.95", "--tensor-parallel-size 2",
                                                     "--max-num-seqs 62", "--kv-cache-dtype fp8"]
    out = " ".join(run_cli("doctor", str(f), "--tp", "1").output.split())
    assert "→ --max-num-seqs 62: 60 running held 96.0% of the KV pool, so 60 ÷ 0.960 = 62 requests" in out
    assert "→ --gpu-memory-utilization 0.95: +5% of the GPU's memory for KV (from 0.9; at most 0.95)" in out
    # no TP given: a scrape does not name it, so no TP line (the words still name the remedy); --max-num-seqs 48
    # given: 62 is no lower cap, so no --max-num-seqs line
    flags = [x["flag"] for x in cli_json("doctor", str(f), "--max-num-seqs", "48")["advice_flags"]]
    assert flags == ["--gpu-memory-utilization 0.95", "--kv-cache-dtype fp8"]


def test_no_flag_lines_without_preemptions():
    assert cli_json("doctor", str(SCRAPE))["advice_flags"] == []
