"""``offload`` takes the plan flags ``simulate`` takes (its KV pool and scheduler as ``plan`` sizes them with the same
flags), and names its comparison for what it is: ``--compare-replicas N`` (N replicas; ``--compare-gpus`` kept as a
hidden alias)."""

from __future__ import annotations

from cli_run import MODEL, cli_json, refused, run_cli

OFFLOAD = ("offload", MODEL, "--gpu", "H100", "--kv-offloading-size", "64", "--sessions", "20")


def test_offload_takes_the_plan_flags_and_its_pool_is_plans():
    flags = ("--gpu-memory-utilization", "0.8", "--kv-cache-dtype", "fp8", "--max-num-seqs", "64")
    plan = cli_json("plan", MODEL, "--gpu", "H100", "--max-model-len", "32768", *flags)["memory"]
    # plan: blocks of 16 tokens at 1 MiB each (FP8 KV: 32 layers × 8 KV heads × 128 × 2 (K, V) × 1 B × 16); 47,863
    # usable at 0.8 of the GPU with CUDA graphs captured up to 64 sequences (46,589 without --max-num-seqs: more
    # graphs), block 0 the null block; offload's HBM tier is that pool: 47,863 × 16 = 765,808 tokens
    assert plan["usable_blocks"] == 47_863 and plan["bytes_per_block"] == 2**20
    hbm = cli_json(*OFFLOAD, *flags)["kv_tiers"]["tiers"][0]
    assert hbm["name"] == "hbm" and hbm["capacity_tokens"] == 47_863 * 16


def test_compare_replicas_is_the_name_and_compare_gpus_its_hidden_alias():
    new = cli_json(*OFFLOAD, "--compare-replicas", "2")["more_gpus"]
    old = cli_json(*OFFLOAD, "--compare-gpus", "2")["more_gpus"]
    assert new == old and new["num_replicas"] == 2 and new["num_gpus"] == 2  # 2 replicas × TP 1
    help_text = run_cli("offload", "--help").output
    assert "--compare-replicas" in help_text and "--compare-gpus" not in help_text
    assert "--gpu-memory-utilization" in help_text and "--max-num-seqs" in help_text
    assert refused(*OFFLOAD, "--compare-replicas", "2", "--compare-gpus", "2") == (
        "--compare-gpus is the old name of --compare-replicas: give one")
