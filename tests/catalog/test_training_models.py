"""The two configs bundled for inference-sim/training's H100 runs (Llama-2-70B at TP4, CodeLlama-34B-Instruct at TP2):
parameter counts and KV bytes per token worked out by hand from the architecture."""

from __future__ import annotations

import pytest

from kvledger.catalog.models import load_model, resolve_bundled, stated_params


def _llama_params(hidden: int, layers: int, heads: int, kv_heads: int, ffn: int, vocab: int) -> int:
    """Untied Llama: embedding + LM head (vocab × hidden each), per layer q/o (hidden²), k/v (hidden × kv_heads ×
    head_dim), gate/up/down (3 × hidden × ffn) and two RMSNorms (2 × hidden), plus the final norm."""
    head_dim = hidden // heads
    per_layer = 2 * hidden * hidden + 2 * hidden * kv_heads * head_dim + 3 * hidden * ffn + 2 * hidden
    return 2 * vocab * hidden + layers * per_layer + hidden


def test_llama_2_70b_parameter_count_by_hand():
    # 80 layers × (2·8192² + 2·8192·8·128 + 3·8192·28672 + 2·8192) = 80 × 855,654,400 = 68,452,352,000;
    # + 2 × 32000 × 8192 = 524,288,000 (embedding and untied head) + 8192 (final norm) = 68,976,648,192 ≈ 68.98e9
    # (Together's published count for llama-2-70b: 68,976,648,192)
    spec = load_model("meta-llama/Llama-2-70b-hf")
    assert spec.num_params == 68_976_648_192 == _llama_params(8192, 80, 64, 8, 28672, 32000)
    assert spec.num_params / stated_params("meta-llama/Llama-2-70b-hf").total - 1 == pytest.approx(0, abs=1e-4)


def test_codellama_34b_parameter_count_by_hand():
    # 48 layers × (2·8192² + 2·8192·8·128 + 3·8192·22016 + 2·8192) = 48 × 692,076,544 = 33,219,674,112;
    # + 524,288,000 + 8192 = 33,743,970,304 ≈ 33.74e9 (vocab 32000: the Instruct model has no infilling tokens)
    spec = load_model("codellama/CodeLlama-34b-Instruct-hf")
    assert spec.num_params == 33_743_970_304 == _llama_params(8192, 48, 64, 8, 22016, 32000)


def test_their_kv_bytes_per_token_and_names():
    # GQA with 8 KV heads of 128: 2 (K, V) × layers × 8 × 128 × 2 B = 4096 B per layer:
    # 80 layers → 327,680 B (320 KiB); 48 layers → 196,608 B (192 KiB)
    for name, layers in (("meta-llama/Llama-2-70b-hf", 80), ("codellama/CodeLlama-34b-Instruct-hf", 48)):
        spec = load_model(name)
        assert sum(layer.kv_bytes_per_token(2) for layer in spec.layers) == layers * 4096
        # per GPU at the TP the runs used (70B: 4, 34B: 2): the 8 KV heads split evenly
        tp = 4 if layers == 80 else 2
        assert sum(layer.kv_bytes_per_token(2, tp) for layer in spec.layers) == layers * 4096 / tp
    # the names inference-sim/training's launch records use resolve to these files (case-insensitive)
    assert resolve_bundled("codellama/CodeLlama-34b-Instruct-hf").file == "codellama--CodeLlama-34b-Instruct-hf.json"
    assert resolve_bundled("Llama-2-70b-hf").file == "meta-llama--Llama-2-70b-hf.json"
