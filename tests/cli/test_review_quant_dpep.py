"""Review of the quantization refusals and DP + EP rules against vLLM's own code, as a user meets them in ``plan``."""

from __future__ import annotations

from cli_run import cli_json, refused


def test_a_token_budget_below_the_default_max_num_seqs_starts_on_0_10_1():
    # vLLM 0.10.1 engine/arg_utils.py::_set_default_args_v1: with --max-num-seqs unset, max_num_seqs =
    # min(default_max_num_seqs[usage_context] = 1,024 on an H100, max_num_batched_tokens 512) = 512, so the
    # scheduler's "must be greater than or equal to max_num_seqs" holds; 0.10.0 keeps 1,024 and refuses
    d = cli_json("plan", "Qwen/Qwen3-8B", "--gpu", "H100", "--engine-version", "0.10.1",
                 "--max-num-batched-tokens", "512")
    assert (d["memory"]["max_num_batched_tokens"], d["memory"]["max_num_seqs"]) == (512, 512)
    msg = refused("plan", "Qwen/Qwen3-8B", "--gpu", "H100", "--engine-version", "0.10.0",
                  "--max-num-batched-tokens", "512")
    assert "max_num_batched_tokens (512) must be at least max_num_seqs (1,024)" in msg


def test_deepep_low_latency_is_taken_on_0_10_1_and_chunks_the_profile_rows():
    # 0.10.1 cuda_communicator.py takes deepep_low_latency; fused_moe/layer.py::forward_impl chunks it at 256
    # tokens per rank: DP 2 × min(8,192, 256) = 512 rows (the default naive gathers 2 × 8,192 = 16,384)
    flags = ("Qwen/Qwen3-30B-A3B", "--gpu", "H100", "-dp", "2", "--enable-expert-parallel", "--engine-version",
             "0.10.1")
    assert cli_json("plan", *flags)["data_parallel"]["moe_profile_tokens"] == 16_384
    d = cli_json("plan", *flags, "--all2all-backend", "deepep_low_latency")
    assert d["data_parallel"]["moe_profile_tokens"] == 512
