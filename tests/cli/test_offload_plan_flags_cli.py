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


def test_without_max_model_len_offload_says_its_session_cap_and_what_the_plans_default_would_do():
    # Llama-3.1-8B on an RTX 4090, no --max-model-len: the sessions run at kvledger's 32,768-token session cap, and
    # the plan's default is the model's 131,072 (max_position_embeddings). One such request needs 131,072 / 16 =
    # 8,192 blocks × 2 MiB (16 tokens × 128 KiB) = 16.00 GiB, above the 2,617 usable blocks (2,618 less the null
    # block) the 4090 holds: vLLM's estimated maximum model length is 2,617 × 16 = 41,872 tokens.
    d = cli_json("offload", MODEL, "--gpu", "RTX4090", "--kv-offloading-size", "32", "--sessions", "10")["workload"]
    assert d["context_cap_tokens"] == 32_768 and d["context_cap_source"].startswith("kvledger's session default")
    m = d["model_default"]
    assert (m["max_model_len_tokens"], m["verdict"], m["estimated_max_model_len"]) == (
        131_072, "max_model_len_does_not_fit", 41_872)
    out = " ".join(run_cli("offload", MODEL, "--gpu", "RTX4090", "--kv-offloading-size", "32", "--sessions",
                           "10").output.split())
    assert ("the plan's default max_model_len is the model's 131,072 tokens (what `kvledger plan` and vllm take "
            "without --max-model-len); it would not start on the NVIDIA GeForce RTX 4090: max_model_len does not "
            "fit: one 131,072-token request needs 16.00 GiB") in out
    given = cli_json("offload", MODEL, "--gpu", "RTX4090", "--kv-offloading-size", "32", "--sessions", "10",
                     "--max-model-len", "16K")["workload"]
    assert given["context_cap_tokens"] == 16_384 and "model_default" not in given
