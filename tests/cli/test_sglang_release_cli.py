"""`--policy sglang --engine-version X`: the replay applies that SGLang release's rules (memory plan, chunked prefill,
request pool, CUDA-graph sizes), and refuses a release older than the oldest read (0.4.0) with exit status 2."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from cli_run import refused, run_cli

SIM = ["simulate", "meta-llama/Llama-3.1-70B", "--gpu", "H200", "--tp", "4", "--policy", "sglang", "--num-requests",
       "5", "--json"]
DATACRUNCH = Path(__file__).parents[2] / "benchmarks/data/public-runs/datacrunch-h200-sglang/" \
    "llama_3_3_70b_online_random.jsonl"


def _sim(*extra: str) -> dict:
    return json.loads(run_cli(*SIM, *extra).stdout)


def test_the_replay_takes_sglang_040s_settings_on_an_h200_at_tp4():
    old, new = _sim("--engine-version", "0.4.0"), _sim()
    e = old["engine"]
    # 0.4.0 server_args.py __post_init__, H200 (143,771 MiB, not below 25,000): chunked_prefill_size 8,192 (the step's
    # token budget); mem_fraction_static 0.85 at TP 4 (0.5.23: 0.897 with the prefill graphs' 464 MiB, so a smaller
    # pool)
    assert e["max_num_batched_tokens"] == 8192 and e["batching"] == "sglang"
    tokens, tokens_new = e["num_gpu_blocks"] - 1, new["engine"]["num_gpu_blocks"] - 1  # the padded slot, page 0
    # the fractions' gap, 0.047 of the 137.29 GiB free before the weights (139.96 GiB less 2.67 held at TP 4 with custom
    # all-reduce), over 81,920 B a token (80 layers × 8 KV heads × 128 × 2 (K, V) × 2 B ÷ TP 4): 84,576 tokens, less
    # 0.5.23's RoPE cos/sin buffer, 32 MiB larger than 0.4.0's (sglang_load.py): 409.6 tokens → 84,166 (1,181,797
    # − 1,097,629 = 84,168)
    assert tokens_new - tokens == 84_168
    assert abs((tokens_new - tokens) - (0.047 * 137.29 * 2**30 - 32 * 2**20) / 81_920) < 5
    # max_running_requests (0.4.0 model_runner.py init_memory_pool, managers/tp_worker.py): the request pool holds
    # clamp(int(#tokens / 131,072 × 512), 2048, 4096) + 1 = 4,096 + 1 (#tokens > 1,048,576), under #tokens // 2;
    # 0.5.23 has no extra slot: 4,096
    assert tokens > 1_048_576 and e["max_num_seqs"] == 4097 and new["engine"]["max_num_seqs"] == 4096
    # decode batches padded up to cuda_graph_max_bs 160 (0.4.0), not 0.5.23's 512 (memory_hook.py, TP ≥ 4)
    assert "up to cuda_graph_max_bs 160" in old["step_cost"]["source"]
    assert "up to cuda_graph_max_bs 512" in new["step_cost"]["source"]
    note = next(n for n in old["notes"] if n.startswith("SGLang 0.4.0 rules"))
    assert "mem_fraction_static 0.85, chunked_prefill_size 8,192, cuda_graph_max_bs 160 (server_args.py" in note
    assert not any(n.startswith("SGLang 0.5.23 rules") for n in new["notes"])  # the default prints as it did


def test_a_release_before_040_is_refused_with_exit_status_2():
    msg = refused(*SIM, "--engine-version", "0.3.6")
    assert msg.startswith("SGLang 0.3.6 predates the releases whose rules were read (0.4.0 onwards")
    proc = subprocess.run([sys.executable, "-m", "kvledger.cli.main", "validate", str(DATACRUNCH), "--gpu", "H200",
                           "--model", "meta-llama/Llama-3.1-70B", "--tp", "4", "--engine-version", "0.3.9"],
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 2 and "SGLang 0.3.9 predates" in proc.stderr and "Traceback" not in proc.stderr


def test_a_release_without_a_hierarchical_cache_refuses_the_host_tier():
    # 0.4.0, 0.4.0.post1 and 0.4.1's server_args.py have no enable_hierarchical_cache (0.4.3's has)
    msg = refused(*SIM, "--engine-version", "0.4.1", "--enable-hierarchical-cache")
    assert msg.startswith("SGLang 0.4.1 has no hierarchical cache") and "0.4.3 or later" in msg
