"""goodput --simulate with SGLang HiCache plans the pool as simulate does: --enable-hierarchical-cache also turns
SGLang 0.5.10–0.5.16's default prefill CUDA graphs off (kvledger.accounting.sglang_prefill_graphs), which frees their
reserve for KV (cli.tier_opts.with_hicache, shared by both commands)."""

from __future__ import annotations

from cli_run import cli_json

RUN = ["meta-llama/Llama-3.1-8B", "--gpu", "H100", "--trace", "azure-conv", "--num-requests", "50", "--policy",
       "sglang", "--engine-version", "0.5.14"]
SLO = ["--slo", "ttft=1s,tpot=100ms"]


def test_goodput_plans_hicache_as_simulate_does():
    sim = cli_json("simulate", *RUN, "--enable-hierarchical-cache")["engine"]["num_gpu_blocks"]
    good = cli_json("goodput", "--simulate", *RUN, "--enable-hierarchical-cache", *SLO)["simulation"]
    off = cli_json("goodput", "--simulate", *RUN, *SLO)["simulation"]["engine"]["num_gpu_blocks"]
    # SGLang 0.5.14 on the H100 (78.77 GiB free before the weights load): mem_fraction_static 0.83 with the prefill
    # graphs' reserve, 0.835 without it under HiCache: 0.005 × 78.77 GiB = 0.3939 GiB ÷ 131,072 B of KV per token
    # (32 layers × 8 KV heads × 128 × 2 × 2 B) = 0.005 × 78.77 × 8,192 = 3,226 more one-token pages
    assert (off, good["engine"]["num_gpu_blocks"], sim) == (411_994, 415_220, 415_220)  # goodput had 411,994
    assert good["plan"]["num_gpu_blocks"] == 415_219  # the plan's usable blocks: the engine's less its null block
