"""`plan --engine sglang --enable-hierarchical-cache` plans with HiCache's prefill-graph rule: off in SGLang
0.5.10–0.5.16 (0.5.14 server_args.py _disable_tc_piecewise_cudagraph_if_incompatible: "CPU offload / hierarchical
cache"), so the default mem_fraction_static reserves no prefill-graph MiB (tests/accounting/
test_sglang_prefill_unflagged.py has the rule by release)."""

from __future__ import annotations

from cli_run import cli_json


def test_plan_reads_hicache_from_its_tier_flag():
    base = ["plan", "Qwen/Qwen3-8B", "--gpu", "h100", "--engine", "sglang", "--engine-version", "0.5.14"]
    plain, hicache = cli_json(*base), cli_json(*base, "--enable-hierarchical-cache")
    assert plain["memory"]["fraction"] == 0.83 and hicache["memory"]["fraction"] == 0.835
    assert hicache["settings"]["enable_hierarchical_cache"] is True and "enable_hierarchical_cache" not in plain[
        "settings"]
    assert any(n.startswith("prefill CUDA graphs off (HiCache") for n in hicache["memory"]["notes"])


def test_simulate_reads_hicache_for_its_sglang_pool_too():
    # the same rule as plan's: the pool grows by what the 464 MiB prefill-graph reserve held, 367,206 − 364,339 =
    # 2,867 one-token pages on this H100 at SGLang 0.5.14 (the plans above; the simulator's engine counts one more page)
    base = ["simulate", "Qwen/Qwen3-8B", "--gpu", "h100", "--policy", "sglang", "--engine-version", "0.5.14",
            "--num-requests", "20"]
    plain, hicache = cli_json(*base), cli_json(*base, "--enable-hierarchical-cache")
    assert hicache["engine"]["num_gpu_blocks"] - plain["engine"]["num_gpu_blocks"] == 367_206 - 364_339
