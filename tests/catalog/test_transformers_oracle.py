"""Every causal-LM model type transformers ships, planned from its default config and checked against the meta-device
oracle.

``benchmarks/transformers_oracle.py`` (run with torch and transformers 5.24.0, which are not project
dependencies) built each type's default config, instantiated the model on PyTorch's meta device and
wrote ``benchmarks/data/transformers_oracle.csv``: the K+V elements one token adds (from the cache of a
one-token forward pass, else from the self-attention k/v projections) and the parameter count. Where transformers'
own default config leaves unset a field its model needs, the script fills it and the row's note says which. This test
reads that table: KV per token must equal the oracle wherever the oracle could be read, except for the
types listed below with the reason; where it could not be read, the table records why.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from kvledger.catalog.families import _VERIFIED_DECODERS, FAMILY_OF
from kvledger.catalog.modelspec import parse_config
from kvledger.errors import ConfigError

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data"
ROWS = {r["model_type"]: r for r in csv.DictReader((DATA / "transformers_oracle.csv").open(encoding="utf-8"))}

# Refused with a ConfigError naming the field, a last resort where a plan would have to invent a cache layout:
# Whisper (model_type "whisper"), whose decoder self-attention the oracle counts (WhisperForCausalLM on the default
# config: 4 layers × 2 × 384 = 3,072 elements per token, which the plan read) but whose per-request cross-attention K/V
# over the encoder's positions a plan of WhisperForConditionalGeneration would have to invent
# (catalog/cross_attention.py). DeepSeek-V4's compressed attention is read (below, and
# tests/accounting/test_dsv4_layout.py).
REFUSED: dict[str, str] = {"whisper": "cross-attention KV not modelled"}
# Read, but the per-token KV differs from transformers' cache, with the reason.
DIFFERS = {
    # DeepSeek-V4: vLLM 0.33 keeps one K=V latent of head_dim 512 per token in each layer's 128-token window (an
    # fp8_ds_mla entry of 584 B), plus compressed entries beyond it; transformers' DeepseekV4CSACache/HCACache keep K
    # and V apart over the window only, 43 layers × 2 × 512 = 44,032 elements (the oracle); read as vLLM:
    # 43 × 512 = 22,016.
    "deepseek_v4": ("vLLM keeps one K=V fp8_ds_mla entry per window token and compressed entries; "
                    "transformers K and V apart"),
    "minicpm3": ("vLLM's MiniCPM3Attention caches decompressed K/V (40 heads of qk_head_dim 96), "
                 "transformers the latent"),
    # vLLM 0.19's MiMoV2Attention pads V to head_dim 192 and gives its Attention no head_size_v, transformers caches V
    # at v_head_dim 128; KV heads agree (sliding layers 2 × num_key_value_heads = 8, full 4; 39 sliding, 9 full):
    # vLLM 2 × 192 × (39 × 8 + 9 × 4) = 133,632 elements, transformers (192 + 128) × 348 = 111,360 (the oracle).
    "mimo_v2_flash": "vLLM caches V padded to head_dim (192), transformers at v_head_dim (128)",
    # Reformer: LSH layers share one query_key projection, so the projection count (no cache reading: transformers keeps
    # each layer's input hidden states, past_buckets_states) sees only their value: 3 local × 2 × 768 + 3 LSH × 768 =
    # 6,912.
    # Read as vLLM reads any decoder, K and V of 12 heads × attention_head_size 64 in all 6 layers: 6 × 2 × 768 = 9,216.
    "reformer": "LSH layers' shared query_key is not a k/v projection; transformers caches hidden states, not K/V",
}


def _spec(mt):
    return parse_config(json.loads((DATA / "oracle_configs" / f"{mt}.json").read_text()), source=f"{mt} default config")


def _kv(spec) -> int:
    return sum(layer.kv_elements_per_token(1) for layer in spec.layers if layer is not None)


def test_the_oracle_covers_every_causal_lm_type():
    # transformers 5.24.0 registers 196 causal-LM model types; every one has a row, with a reason where it failed.
    assert len(ROWS) == 196 and {r["transformers_version"] for r in ROWS.values()} == {"5.24.0"}
    for mt, r in ROWS.items():
        readable = r["kv_elements_per_token_cache"] or r["kv_elements_per_token_proj"]
        assert readable or r["error"] or r["cache_note"], mt


@pytest.mark.parametrize("mt", sorted(ROWS))
def test_every_type_plans_with_the_oracles_kv(mt):
    r = ROWS[mt]
    cfg = DATA / "oracle_configs" / f"{mt}.json"
    if not cfg.exists():  # transformers could not build the default config at all (the row says why)
        assert r["error"], mt
        return
    if mt in REFUSED:
        with pytest.raises(ConfigError) as e:
            _spec(mt)
        assert REFUSED[mt] in str(e.value)
        return
    spec = _spec(mt)
    oracle = r["kv_elements_per_token_cache"] or r["kv_elements_per_token_proj"]
    if not oracle or mt in DIFFERS:
        return  # unreadable oracle (reason in the table) or a documented difference
    assert _kv(spec) == int(oracle), (mt, _kv(spec), oracle)


def test_counts_and_totals():
    # 191 of the 196 types match the oracle's KV exactly; Whisper is refused and 4 differ for the reasons above. XLNet's
    # forward pass fails on the meta device, so its reading is the k and v Parameters of its XLNetRelativeAttention
    # modules: 24 layers × 2 × 16 heads × 64 = 49,152, as the plan reads it. Gemma-4's assistant is built with the four
    # text-config fields its own validator requires (the row says which): 30 query-only layers, 0 K/V of its own.
    equal = 0
    for mt, r in ROWS.items():
        oracle = r["kv_elements_per_token_cache"] or r["kv_elements_per_token_proj"]
        if oracle and mt not in REFUSED and mt not in DIFFERS and (DATA / "oracle_configs" / f"{mt}.json").exists():
            equal += _kv(_spec(mt)) == int(oracle)
    assert (equal, len(REFUSED), len(DIFFERS)) == (191, 1, 4)


def test_gemma4_assistant_keeps_no_kv_of_its_own():
    # Gemma4UnifiedAssistantConfig: num_kv_shared_layers 30 = num_hidden_layers 30, so every layer reads the target's
    # K/V; on the meta device its self-attention modules have q_proj, q_norm and o_proj but no k_proj/v_proj (the
    # oracle's projection count is 0), and vLLM 0.33 wires each layer to a target layer (spec_decode/gemma4.py).
    spec = _spec("gemma4_unified_assistant")
    assert ROWS["gemma4_unified_assistant"]["kv_elements_per_token_proj"] == "0"
    assert spec.layers == (None,) * 30 and _kv(spec) == 0
    assert any(n.startswith("KV per token 0 B (a draft model)") for n in spec.notes)


@pytest.mark.parametrize("mt", ["qwen4_exp", "qwen4_exp_text"])
def test_qwen4_exp_qsa_layers(mt):
    # transformers builds Qwen4-Exp only with its QSA indexer set (the oracle fills indexer_n_heads 4, indexer_kv_heads
    # 1,
    # indexer_head_dim 128, indexer_budget 2048, indexer_compress_ratio 4; the row's note says so). Every 4th of the 40
    # layers is indexed_attention: 10 × K and V of 2 KV heads × head_dim 256 = 10 × 1,024 = 10,240 elements per token
    # (the oracle's k/v projections); the other 30 are Gated DeltaNet state layers.
    spec = _spec(mt)
    assert (
        "indexer_compress_ratio=4" in ROWS[mt]["cache_note"] and int(ROWS[mt]["kv_elements_per_token_proj"]) == 10_240
    )
    assert _kv(spec) == 10_240 and spec.layer_counts() == {"state": 30, "full": 10}
    # vLLM 0.33 (QSACompressedKeyCache) adds one BF16 key of indexer_head_dim per 4 tokens: 128 × 2 B / 4 = 64 B per
    # token per layer, so at bf16 KV a token costs 10 × (1,024 × 2 B + 64 B) = 21,120 B (the K/V alone: 20,480 B).
    full = [layer for layer in spec.layers if layer is not None and layer.kind == "full"]
    assert {item.indexer_bytes_per_token for item in full} == {64.0}
    assert sum(item.kv_bytes_per_token(2) for item in full) == 21_120
    # without indexer_n_heads vLLM builds plain Qwen3NextAttention: the same K/V and no indexer keys
    cfg = json.loads((DATA / "oracle_configs" / f"{mt}.json").read_text())
    target = cfg.get("text_config", cfg)
    target["indexer_n_heads"] = None
    plain = parse_config(cfg, source=mt)
    assert _kv(plain) == 10_240 and all(
        layer.indexer_bytes_per_token == 0 for layer in plain.layers if layer is not None and layer.kind == "full"
    )


@pytest.mark.parametrize("mt", ["gemma4", "gemma4_text", "gemma4_unified", "gemma4_unified_text",
                                "gemma4_unified_assistant",
                                "gemma4_assistant"])
def test_gemma4_parameter_counts_equal_the_meta_device_model(mt):
    # Gemma-4's layers keep Gemma's four norms and q/k RMSNorms of the layer's head size (256 sliding, 512 full); the
    # assistant's 30 layers are query-only (q_proj, q_norm, o_proj: no k/v, as vLLM's Gemma4MTPAttention loads them) and
    # it adds pre_projection (2 × backbone_hidden_size 3,840 → 2,304) and post_projection (2,304 → 3,840):
    # 17,694,720 + 8,847,360 parameters.
    assert _spec(mt).num_params == int(ROWS[mt]["num_params"])


def test_blt_sums_its_four_self_attention_stacks():
    # BLT's default sub-configs (head size = hidden // heads, as BltSelfAttention computes it), K+V per byte:
    #   local encoder   1 layer  × 2 × 16 KV heads × (1024 // 16 = 64)  =   2,048
    #   global          25 layers × 2 × 16 × (2048 // 16 = 128)           = 102,400
    #   local decoder   9 layers × 2 × 16 × 64                            =  18,432
    #   entropy patcher 14 layers × 2 × 12 × (768 // 12 = 64)             =  21,504
    #   total                                                             = 144,384 (the oracle's projection count)
    spec = _spec("blt")
    assert _kv(spec) == 144_384 == int(ROWS["blt"]["kv_elements_per_token_proj"])
    kinds = [(layer.kind, layer.num_kv_heads * layer.head_dim) for layer in spec.layers]
    assert kinds == [("sliding_window", 1024)] + [("full", 2048)] * 25 + [("sliding_window",
                                                                           1024)] * 9 + [("sliding_window", 768)] * 14
    # local_attention_window_len, patcher's sliding_window
    assert {layer.window_tokens for layer in spec.layers if layer.kind == "sliding_window"} == {512}
    assert spec.num_params == 4_633_127_680 == int(ROWS["blt"]["num_params"])
    assert any(n.startswith("KV per byte, an upper bound") and "one entry per patch" in n for n in spec.notes)


@pytest.mark.parametrize(
    "mt", sorted((set(_VERIFIED_DECODERS) | set(FAMILY_OF)) & {m for m, r in ROWS.items() if r["num_params"]})
)
def test_parameter_count_equals_the_meta_device_model(mt):
    # Families with their own layout here (and the verified decoders) count every tensor transformers builds;
    # Nemotron-H's default config differs by 8 parameters (a per-group norm of n_groups = 8 that this layout keeps
    # whole).
    expected = int(ROWS[mt]["num_params"])
    got = _spec(mt).num_params
    # DeepSeek-V4 adds the hash-routed layers' expert tables vLLM loads as parameters (gate.tid2eid, vocab × top-k
    # int32; transformers keeps them as buffers): 3 hash layers × 129,280 × 6 = 2,327,040.
    extra = {"nemotron_h": 8, "deepseek_v4": 3 * 129_280 * 6}.get(mt, 0)
    assert got - expected == extra, (mt, got, expected)


@pytest.mark.parametrize("mt,before", [
    # 32 Mamba-2 layers each: conv_dim 1024 + 2 × 1 × 256 = 1,536 bias (+49,152), no gated-norm weight of 1,024
    # ("mamba_rms_norm": false, −32,768): 8,514,945,024 + 16,384
    ("falcon_h1", 8_514_945_024),
    # 32 Mamba-2 layers each with a conv bias of 128 × 64 + 2 × 1 × 256 = 8,704: + 278,528
    ("bamba", 9_992_486_912),
    ("granitemoehybrid", 38_600_785_920),
])
def test_mamba2_mixer_conv_bias_and_norm_as_the_config_says(mt, before):
    # vLLM layers/mamba/mamba_mixer2.py (0.19, 0.33): conv1d bias=use_conv_bias (config.mamba_conv_bias in
    # falcon_h1.py, bamba.py, granitemoehybrid.py); Falcon-H1 passes use_rms_norm=config.mamba_rms_norm
    expected = int(ROWS[mt]["num_params"])
    assert expected == before + {"falcon_h1": 16_384}.get(mt, 278_528)
    assert _spec(mt).num_params == expected


@pytest.mark.parametrize("flags,delta", [
    ({"use_conv_bias": False}, -32 * 1536),           # no conv1d bias of d_inner 1,536 in 32 layers: −49,152
    ({"use_bias": True}, 32 * (2 * 1536 + 768)),      # in_proj bias 2 × 1,536 + out_proj bias 768: +122,880
])
def test_mamba_conv_and_projection_biases_follow_the_config(flags, delta):
    # vLLM models/mamba.py (0.19, 0.33): MambaMixer(use_conv_bias=config.use_conv_bias, use_bias=config.use_bias);
    # the default config (hidden 768, intermediate 1,536, 32 layers) keeps the conv bias and no projection bias
    raw = json.loads((DATA / "oracle_configs" / "mamba.json").read_text())
    base = parse_config(raw, source="mamba").num_params
    assert base == int(ROWS["mamba"]["num_params"]) == 159_308_544
    assert parse_config({**raw, **flags}, source="mamba").num_params - base == delta
