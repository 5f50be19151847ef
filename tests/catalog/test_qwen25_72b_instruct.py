"""Qwen2.5-72B-Instruct is its own bundled config, not a twin of the base Qwen2.5-72B: the two differ in
max_position_embeddings, which sets vLLM's default max_model_len and its RoPE buffer."""

from __future__ import annotations

from kvledger.catalog.models import load_model, resolve_bundled


def test_instruct_resolves_to_its_own_config_with_32k_positions():
    # The published Instruct config.json: max_position_embeddings 32,768 (Qwen's card: "set for context length up to
    # 32,768 tokens", YaRN factor 4 for 131,072); the base model's: 131,072. vLLM 0.33 _get_and_verify_max_len derives
    # max_model_len from it (no rope_scaling in the published file, so no factor): 32,768 and 131,072.
    inst, base = load_model("Qwen/Qwen2.5-72B-Instruct"), load_model("Qwen/Qwen2.5-72B")
    assert resolve_bundled("Qwen/Qwen2.5-72B-Instruct").file == "Qwen--Qwen2.5-72B-Instruct.json"
    assert resolve_bundled("qwen2.5-72b-instruct").file == "Qwen--Qwen2.5-72B-Instruct.json"
    assert (inst.derived_max_model_len, base.derived_max_model_len) == (32_768, 131_072)
    # Same architecture: 80 layers × 8 KV heads × 128 head_dim × 2 (K, V) × 2 B = 327,680 B per token, and the
    # 72,706,203,648 parameters VERIFIED.md counts (the same as the base: only non-architectural keys differ).
    assert inst.num_params == base.num_params == 72_706_203_648
    kv = [sum(layer.kv_bytes_per_token(2) for layer in m.layers if layer is not None) for m in (inst, base)]
    assert kv == [327_680, 327_680]
