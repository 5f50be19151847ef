"""Fixes from the long-context RAG trial (Llama-3.1-70B / Qwen2.5-72B-Instruct at 40K–120K prompts)."""

from __future__ import annotations

from cli_run import cli_json, refused


def test_qwen25_72b_instruct_plans_at_its_own_32k_and_refuses_128k_as_vllm_does():
    # The Instruct's config.json says max_position_embeddings 32,768; vLLM 0.33 raises "User-specified max_model_len
    # (131072) is greater than the derived max_model_len" without VLLM_ALLOW_LONG_MAX_MODEL_LEN (config/model.py
    # _get_and_verify_max_len). Before, the Instruct planned on the base config: max_model_len 131,072 by default.
    doc = cli_json("plan", "Qwen/Qwen2.5-72B-Instruct", "--gpu", "H100-SXM", "--tp", "4")
    assert doc["settings"]["max_model_len"] == 32_768
    msg = refused("plan", "Qwen/Qwen2.5-72B-Instruct", "--gpu", "H100-SXM", "--tp", "4", "--max-model-len", "131072")
    assert "exceeds the 32,768 tokens Qwen/Qwen2.5-72B-Instruct supports" in msg

