"""`kvledger offload` on a TP > 1 replica: replicas and GPUs labelled apart, tier sizes per GPU beside the ranks'
total, the verdict's TTFT figures, offload's --link-fraction and --suffix-tokens."""

from __future__ import annotations

import json

from cli_run import MODEL, run_cli

_TP2 = ("offload", MODEL, "--gpu", "H100", "--tp", "2", "--kv-offloading-size", "64GiB", "--sessions", "6",
        "--session-rate", "1", "--compare-gpus", "2", "--gpu-usd-per-hour", "2.5",
        "--host-memory-usd-per-gib-month", "3.65")


def test_compare_gpus_counts_replicas_and_their_gpus():
    d = json.loads(run_cli(*_TP2, "--json").stdout)
    # --compare-gpus 2 at TP 2: 2 replicas of 2 GPUs = 4 GPUs; the tiered run is 1 replica of 2 GPUs
    g = d["more_gpus"]
    assert (g["num_replicas"], g["num_gpus"], g["gpus_per_replica"], d["gpus_per_replica"]) == (2, 4, 2, 2)
    # 2 GPUs × $2.50 = $5.00/h for the replica; 4 GPUs × $2.50 = $10.00/h for the two replicas
    assert d["cost"]["gpu_usd_per_hour"] == 5.0 and d["cost"]["more_gpus_usd_per_hour"] == 10.0
    out = run_cli(*_TP2).stdout
    assert "1 replica (2 GPUs) + host tier" in out and "2 replicas (4 GPUs), no tier" in out
    assert "1 replica (2 GPUs) $5.00 + host memory" in out and "2 replicas (4 GPUs) without the tier $10.00" in out
    assert "1 GPU + host tier" not in out and "2 GPUs, no tier" not in out


def test_plan_tier_bytes_and_tokens_are_per_gpu_with_the_ranks_total():
    r = run_cli("plan", "meta-llama/Llama-3.1-70B", "--gpu", "H100", "--tp", "4", "--kv-offloading-size", "256GiB",
                "--json")
    host = json.loads(r.stdout)["kv_tiers"]["tiers"][1]
    # 256 GiB is the 4 ranks' sum: 64 GiB = 68,719,476,736 B per GPU; 256 × 2^30 // round_up(1,310,720 B × 4, 4096)
    # = 52,428 blocks × 16 = 838,848 tokens per GPU (81,920 B/token × 838,848 = 64 GiB less a part block)
    assert host["capacity_bytes"] == 64 * 2**30 and host["capacity_tokens"] == 838_848
    assert host["total_capacity_bytes"] == 256 * 2**30 and host["num_ranks"] == 4
    out = run_cli("plan", "meta-llama/Llama-3.1-70B", "--gpu", "H100", "--tp", "4", "--kv-offloading-size",
                  "256GiB").stdout
    row = next(line for line in out.splitlines() if "host_dram" in line and "GiB" in line)
    assert row.index("64.00 GiB") < row.index("256.00 GiB")  # per GPU, then all 4 GPUs


def test_offload_takes_link_fraction_and_suffix_tokens_and_names_a_gpu_files_host_link(tmp_path):
    f = tmp_path / "g.json"
    f.write_text('{"memory": "80GiB", "bandwidth_tb_s": 3.35, "bf16_tflops": 989, "host_link_gb_s": 100}')
    d = json.loads(run_cli("offload", MODEL, "--gpu", str(f), "--kv-offloading-size", "64GiB", "--sessions", "4",
                           "--session-rate", "1", "--link-fraction", "0.4", "--suffix-tokens", "64",
                           "--json").stdout)
    host = d["kv_tiers"]["tiers"][1]
    # 100 GB/s bidirectional ÷ 2 per direction × 0.4 = 20 GB/s
    assert host["read_bytes_per_s"] == 20e9 and "(GPU file " in host["bandwidth_source"]
    assert "GPU catalog" not in host["bandwidth_source"]
    assert d["kv_tiers"]["break_even"][0]["suffix_tokens"] == 64
    assert d["kv_tiers"]["settings"]["link_fraction"] == 0.4


def test_a_host_tier_below_one_block_is_refused_with_the_size_it_needs():
    from cli_run import refused

    msg = refused("plan", MODEL, "--gpu", "H100", "--kv-offloading-size", "1MiB")
    # Llama-3.1-8B: 16 tokens × 131,072 B/token = 2,097,152 B a block on 1 rank, already whole 4 KiB pages = 2.00 MiB
    assert "holds no whole block" in msg and "2,097,152 B in all" in msg and "--kv-offloading-size 2.00MiB" in msg


def test_nvme_tokens_are_whole_chunks():
    d = json.loads(run_cli("plan", MODEL, "--gpu", "H100", "--kv-offloading-size", "64", "--kv-offloading-backend",
                           "lmcache", "--kv-tier-nvme", "100.01", "--json").stdout)
    nvme = d["kv_tiers"]["tiers"][2]
    # 100.01 × 2^30 B ÷ 131,072 B/token = 819,281.9 tokens: 3,200 whole chunks of 256 = 819,200 tokens
    assert nvme["capacity_tokens"] == 819_200 and "3,200 chunks of 256 tokens" in nvme["capacity_rule"]


def test_a_hicache_break_even_starts_at_its_load_back_threshold():
    from types import SimpleNamespace

    from kvledger.accounting.kv_tiers import HICACHE_LOAD_BACK_THRESHOLD_TOKENS, tier_break_even
    from kvledger.dynamics.engine.hicache_host import LOAD_BACK_THRESHOLD
    from kvledger.report.kv_tiers_view import _be_cell

    assert HICACHE_LOAD_BACK_THRESHOLD_TOKENS == LOAD_BACK_THRESHOLD == 10
    # a step of n new tokens takes n ms, loads are free: recompute (n + 1) ms against max(0, 1 ms) — loading wins
    # from n = 1, but HiCache skips loads under 10 tokens, so the overlapped break-even is 10; vLLM's stays 1
    rc = SimpleNamespace(step_time_s=lambda sh: sh.num_prefill_tokens * 1e-3)
    tier = SimpleNamespace(name="host_dram", read_bytes_per_s=1e30)
    hicache = tier_break_even(rc, tier, 1.0, 1, 4096, True)
    assert (hicache.kind, hicache.break_even_tokens) == ("always", 10)
    assert _be_cell(hicache) == "always (from 10 tokens: HiCache skips shorter loads)"
    vllm = tier_break_even(rc, tier, 1.0, 1, 4096, False)
    assert (vllm.kind, vllm.break_even_tokens, _be_cell(vllm)) == ("always", 1, "always (from 1 token)")


def test_sglang_offload_header_says_rules_once():
    out = run_cli("offload", MODEL, "--gpu", "H100", "--engine", "sglang", "--enable-hierarchical-cache",
                  "--sessions", "3", "--session-rate", "1").stdout
    assert "sglang 0.5.23 rules" in out and "rules rules" not in out


def test_search_show_command_takes_a_tier_variant_by_id_or_table_name():
    args = ("search", MODEL, "--gpus", "H100", "--tp", "1,2", "--offload", "none,cpu:256GiB", "--slo",
            "ttft=200ms,tpot=30ms", "--rate", "10", "--json", "--show-command")
    for name in ("nvidia_h100_sxm:tp2:kv-auto:offload-cpu-256GiB", "h100_sxm tp2 auto + cpu:256GiB"):
        d = json.loads(run_cli(*args, name).stdout)
        # cpu:256GiB is per replica, as vLLM's --kv-offloading-size 256 is the sum over the TP 2 ranks (128 GiB per
        # GPU); SGLang's --hicache-size is one GPU's share in GB: 128 × 2^30 // 10^9 = 137
        assert d["id"] == "nvidia_h100_sxm:tp2:kv-auto:offload-cpu-256GiB"
        assert d["launch"]["vllm"].endswith("--kv-offloading-size 256 --kv-offloading-backend native")
        assert "--kv-offloading-size 256" in d["launch"]["check"]
        assert "--hicache-size 137" in d["launch"]["sglang"]
        assert "cpu:256GiB = 256 GiB host memory per replica, 128 GiB per GPU at 2 GPUs per replica" in d["launch"][
            "note"]


def test_search_sizing_text_states_the_boundary_runs_attainment():
    from types import SimpleNamespace

    from kvledger.analyses.search.evaluate import _attainment

    # the user's session search: attainment 0.912 while good req/s ÷ sized-on req/s was 0.53 ÷ 65 = 0.008; the text
    # says "the boundary run's attainment", so it is 0.912; a run without a stated attainment keeps the ratio
    assert _attainment(SimpleNamespace(attainment=0.912, goodput_req_per_s=0.53), 65.0) == 0.912
    assert _attainment(SimpleNamespace(attainment=None, goodput_req_per_s=13.0), 65.0) == 0.2
