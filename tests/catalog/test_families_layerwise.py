"""Layouts that vary layer by layer, read from transformers 5.24's default configs (benchmarks/data/oracle_configs)."""

from __future__ import annotations

import json
from pathlib import Path

from kvledger.accounting.kvcache import kv_ledger
from kvledger.catalog.modelspec import parse_config

CONFIGS = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "oracle_configs"


def _spec(mt):
    return parse_config(json.loads((CONFIGS / f"{mt}.json").read_text()), source=mt)


def _elements(spec):
    return sum(layer.kv_elements_per_token(1) for layer in spec.layers if layer is not None)


def test_gemma4_full_layers_take_their_head_dim_from_per_layer_config():
    # Gemma4TextConfig: 30 layers, 4 KV heads; per_layer_config gives the 5 full layers (5, 11, 17, 23, 29) head_dim
    # 512,
    # the 25 sliding layers keep head_dim 256: 2 × 4 × (25 × 256 + 5 × 512) = 71,680 K+V elements (the oracle's cache).
    spec = _spec("gemma4_text")
    assert _elements(spec) == 71_680
    assert [layer.head_dim for layer in spec.layers if layer.kind == "full"] == [512] * 5


def test_mimo_v2_flash_sliding_layers_double_the_kv_heads_and_v_is_padded_as_vllm_does():
    # 9 full layers of 4 KV heads, 39 sliding layers of 2 × 4 = 8 (transformers MiMoV2FlashAttention; vLLM reads
    # swa_num_key_value_heads, 8 in the published config); vLLM 0.19 pads V to head_dim 192:
    # 2 × 192 × (9 × 4 + 39 × 8) = 133,632 elements, × 2 B = 267,264 B/token; window 129 tokens on the sliding layers.
    spec = _spec("mimo_v2_flash")
    assert _elements(spec) == 133_632
    assert kv_ledger(spec).bytes_per_token == 267_264
    assert {layer.window_tokens for layer in spec.layers if layer.kind == "sliding_window"} == {129}


def test_dots3_sliding_mla_layers_and_indexer_keys_only_on_indexed_layers():
    # dots3_note_text: 13 'indexed_attention' layers cache the 512 + 64 latent plus DSA indexer keys (128 FP8 + one fp32
    # scale = 132 B); 33 'sliding_attention' layers cache a 1024 + 64 latent (per_layer_config) for the last 512 tokens.
    # K/V elements 13 × 576 + 33 × 1088 = 43,392 (the oracle's cache); bf16 bytes 43,392 × 2 + 13 × 132 = 88,500
    # B/token.
    spec = _spec("dots3_note_text")
    assert _elements(spec) == 43_392
    assert kv_ledger(spec).bytes_per_token == 88_500
    assert sum(layer.tokens_held(10_000) for layer in spec.layers) == 13 * 10_000 + 33 * 512


def test_longcat_flash_has_two_latent_caches_per_layer():
    # vLLM longcat_flash.py: self_attn is a ModuleList of 2 MLA attentions per decoder layer; 28 layers × 2 × (512 + 64)
    # = 32,256 latent elements per token (the oracle's kv_a_proj_with_mqa outputs).
    assert _elements(_spec("longcat_flash")) == 32_256


def test_bamba_without_attn_layer_indices_is_all_mamba():
    # BambaConfig.layers_block_type: attention only at attn_layer_indices (None by default), so all 32 layers are
    # Mamba-2:
    # no per-token KV; state per layer conv (4 − 1) × (128 × 64 + 2 × 1 × 256) = 26,112, SSM 128 × 64 × 256 = 2,097,152.
    spec = _spec("bamba")
    assert _elements(spec) == 0
    assert kv_ledger(spec).state_bytes_per_seq == 32 * (26_112 + 2_097_152) * 2


def test_inkling_layers_keep_attention_and_four_short_convolutions():
    # inkling_text: 66 layers, 11 'hybrid' (full attention, 8 KV heads × 128) and 55 'hybrid_sliding' (swa: 16 KV heads
    # × 128, window 512): 2 × 128 × (11 × 8 + 55 × 16) = 247,808 K+V elements (the oracle's cache). Each layer also
    # keeps
    # short convolutions of its k and v inputs and of its attention and MLP inputs, kernel 4 → 3 columns:
    # full (2 × 1024 + 2 × 6144) × 3 = 43,008, sliding (2 × 2048 + 2 × 6144) × 3 = 49,152;
    # 11 × 43,008 + 55 × 49,152 = 3,176,448 elements × 2 B = 6,352,896 B per sequence.
    spec = _spec("inkling_text")
    assert _elements(spec) == 247_808
    assert kv_ledger(spec).state_bytes_per_seq == 6_352_896


def test_looped_layers_keep_one_cache_per_pass():
    # Dory: 72 layers alternating attention and MLP (36 attention layers of 4 KV heads × 256: 2,048 elements each);
    # layers 16–55 run n_recurrent_loops = 2 times with recurrent_kv_cache_mode 'per_loop', so their 20 attention layers
    # keep a second cache: 36 × 2,048 + 20 × 2,048 = 114,688 (the oracle's 56 cache layers).
    assert _elements(_spec("dory")) == 114_688
    # Inkling-2-Loop: 24 layers of 8 KV heads × 128 (2,048 each); layers 6–17 run loop_num_passes = 3 times:
    # (24 + 12 × 2) × 2,048 = 98,304 (the oracle's 48 cache layers).
    assert _elements(_spec("inkling2_loop_text")) == 98_304


def test_zaya_cca_layers_keep_kv_and_a_convolution_state():
    # ZAYA: 40 'hybrid' layers of compressed convolutional attention, 2 KV heads × 128: K and V 2 × 256 = 512 elements
    # per layer, 40 × 512 = 20,480 (the oracle's cache). State (ZayaCCAProjection): the q/k convolution's
    # (2 − 1) + (2 − 1) = 2 columns of (8 + 2) × 128 = 1,280 channels = 2,560, plus the delayed half of V, 2 × 128 / 2 =
    # 128:
    # 40 × 2,688 × 2 B = 215,040 B per sequence.
    spec = _spec("zaya")
    assert _elements(spec) == 20_480
    assert kv_ledger(spec).state_bytes_per_seq == 215_040


def test_prophetnet_is_read_from_its_decoder_fields():
    # ProphetNet names its decoder num_decoder_layers / num_decoder_attention_heads (no num_hidden_layers): the
    # causal-LM
    # cache is the decoder's self-attention, 12 layers × 2 × 16 heads × (1024 / 16 = 64) = 24,576 (the oracle's cache;
    # cross-attention keeps the encoder's K/V, not a per-token cache).
    assert _elements(_spec("prophetnet")) == 24_576


def test_falcon_h1_layers_keep_attention_and_a_mamba2_state_side_by_side():
    # FalconH1 default: 32 layers, each attention (8 KV heads × 128: 2,048 K+V elements, 65,536 in all — the oracle's
    # cache) and a Mamba-2 mixer. vLLM falcon_h1.py get_mamba_state_shape_from_config: intermediate mamba_d_ssm 1024,
    # conv (4 − 1) × (1024 + 2 × 1 × 256) = 4,608, SSM 128 heads × 8 × 256 = 262,144 → 32 × 266,752 × 2 B = 17,072,128
    # B.
    spec = _spec("falcon_h1")
    assert _elements(spec) == 65_536
    assert kv_ledger(spec).state_bytes_per_seq == 17_072_128


def test_dbrx_reads_its_moe_from_the_nested_ffn_config():
    # DbrxConfig default keeps moe_num_experts 4, moe_top_k 1 and ffn_hidden_size 3584 under ffn_config (vLLM dbrx.py
    # reads them there). Parameters: embeddings 2 × 32,000 × 2048 = 131,072,000 (untied); per layer Wqkv
    # (2048 + 2 × 128) × 2048 = 4,718,592, out 2048² = 4,194,304, router 4 × 2048 = 8,192, experts 4 × 3 × 3584 × 2048
    # = 88,080,384, two norms 4,096 → 97,005,568 × 24 = 2,328,133,632; final norm 2,048: 2,459,207,680 (the meta-device
    # count).
    spec = _spec("dbrx")
    assert (spec.num_experts, spec.experts_per_token) == (4, 1)
    assert spec.num_params == 2_459_207_680


def test_falcon_h1_published_config_with_null_attn_layer_indices_keeps_attention_in_every_layer():
    # tests/fixtures/configs/Falcon-H1-0.5B.json carries "attn_layer_indices": null, as the published Falcon-H1
    # configs do; it is not Bamba's list: every layer runs attention beside its Mamba-2 mixer (vLLM falcon_h1.py).
    # KV: 2 (K,V) × 36 layers × 2 KV heads × 64 × 2 B = 18,432 B/token.
    # State: conv (4 − 1) × (1536 + 2 × 1 × 128) = 5,376, SSM 24 heads × 64 × 128 = 196,608 → 36 × 201,984 × 2 B
    # = 14,542,848 B per sequence.
    # Parameters: embeddings 2 × 32,784 × 1024 = 67,141,632 (untied); per layer mamba in_proj (2 × 1536 + 2 × 128 +
    # 24) × 1024 = 3,432,448, conv 1792 × 4 = 7,168 and its bias 1,792 ("mamba_conv_bias": true; conv_dim 1536 + 2 × 1
    # × 128 = 1,792), dt_bias/A_log/D 72, no gated-norm weight ("mamba_rms_norm": false: vLLM mamba_mixer2.py registers
    # none), out_proj 1024 × 1536 = 1,572,864; attention q 512 × 1024 + k, v 128 × 1024 each + o 1024 × 512
    # = 1,310,720; two norms 2,048; MLP 3 × 2048 × 1024 = 6,291,456 → 12,618,568 × 36 = 454,268,448; final norm 1,024:
    # 521,411,104 (was 521,401,888: + 36 × 1,792 conv bias − 36 × 1,536 norm).
    path = Path(__file__).resolve().parents[1] / "fixtures" / "configs" / "Falcon-H1-0.5B.json"
    spec = parse_config(json.loads(path.read_text()), source="falcon-h1-0.5b")
    led = kv_ledger(spec)
    assert led.bytes_per_token == 18_432
    assert led.state_bytes_per_seq == 14_542_848
    assert spec.num_params == 521_411_104
