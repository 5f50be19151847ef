"""vLLM's --mamba-ssm-cache-dtype on plan, and --no-enable-prefix-caching among a Mamba hybrid's fixes
(Nemotron-H-56B-Base-8K at TP 2 on H100, max_model_len 8,192, vLLM 0.33.0)."""

from __future__ import annotations

import json

from cli_run import refused, run_cli

NEMO = ("plan", "nvidia/Nemotron-H-56B-Base-8K", "--gpu", "H100-SXM", "--tp", "2")


def _plan(*extra: str) -> dict:
    return json.loads(run_cli(*NEMO, "--json", *extra).output)


def test_ssm_dtype_float16_halves_the_ssm_state():
    # 54 Mamba-2 layers: conv 61,440 × 2 B + SSM 4,194,304 elements, over TP 2. auto → float32 (Nemotron-H's config
    # hook from vLLM 0.20): 54 × (122,880 + 16,777,216) / 2 = 456,302,592 B; float16: 54 × (122,880 + 8,388,608) / 2
    # = 229,810,176 B per sequence. The smaller state page halves the attention block it must fit in (4,128 → 2,080
    # tokens) and about doubles the blocks (198 → 393).
    auto, half = _plan(), _plan("--mamba-ssm-cache-dtype", "float16")
    assert (auto["memory"]["num_gpu_blocks"], auto["memory"]["block_size"]) == (198, 4128)
    assert (half["memory"]["num_gpu_blocks"], half["memory"]["block_size"]) == (393, 2080)
    assert half["settings"]["mamba_ssm_cache_dtype"] == "float16"
    out = run_cli(*NEMO, "--mamba-ssm-cache-dtype", "float16").output
    assert "54 layers × (61,440 conv × 2 B + 4,194,304 SSM × 2 B) / TP 2 = 229,810,176 B per sequence" in out


def test_ssm_dtype_refuses_what_vllm_refuses():
    assert refused(*NEMO, "--mamba-ssm-cache-dtype", "fp8") == ("--mamba-ssm-cache-dtype fp8: vLLM accepts auto, "
                                                                "float32, float16, bfloat16")


def test_no_enable_prefix_caching_is_listed_when_it_raises_concurrency():
    # Prefix caching on ("align"): 2 attention blocks (cdiv(8,192, 4,128)) + 6 state groups × 3 pages = 20 blocks per
    # request → 198 / 20 = 9.90x; off ("none"): 2 + 6 × 1 = 8 → 198 / 8 = 24.75x, 197 // 8 = 24 requests.
    assert _plan()["concurrency"][-1]["max_concurrency"] == 198 / 20
    out = run_cli(*NEMO, "--verbose").output  # the fix's why under --verbose; the short plan: the fix and its figure
    assert ("→ --no-enable-prefix-caching: 24 concurrent 8,192-token requests (24.75x); Mamba state kept as one "
            "page") in out
    assert "→ --no-enable-prefix-caching: 24 concurrent 8,192-token requests (24.75x)\n" in run_cli(*NEMO).output
    assert "--no-enable-prefix-caching:" not in run_cli(*NEMO, "--no-enable-prefix-caching").output


def test_ssm_dtype_is_refused_under_sglang():
    # SGLang reads its own --mamba-ssm-dtype; vLLM's flag would be silently ignored there, so plan refuses it.
    msg = refused(*NEMO, "--engine", "sglang", "--mamba-ssm-cache-dtype", "float16")
    assert msg.startswith("--mamba-ssm-cache-dtype is a vLLM flag") and "--mamba-ssm-dtype" in msg


def test_ssm_dtype_on_a_model_without_mamba_state_is_noted():
    # Llama-3.1-8B keeps no state layer: the flag changes nothing (28,160 blocks either way) and says so.
    plain = json.loads(run_cli("plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100-SXM", "--json").output)
    half = json.loads(run_cli("plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100-SXM", "--json",
                              "--mamba-ssm-cache-dtype", "float16").output)
    assert half["memory"]["num_gpu_blocks"] == plain["memory"]["num_gpu_blocks"] == 28160
    assert ("--mamba-ssm-cache-dtype float16 has no effect: the model keeps no Mamba (SSM) state"
            in half["memory"]["notes"])
