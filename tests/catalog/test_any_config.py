"""Any Hugging Face config, read as vLLM reads it: aliases, transformers' class defaults, length keys, vision towers."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvledger.catalog.models import load_model
from kvledger.catalog.modelspec import parse_config

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "configs"


def _kv_bytes(spec, elem=2):
    return sum(layer.kv_bytes_per_token(elem) for layer in spec.layers if layer is not None)


def test_falcon_7b_without_a_length_key_plans_at_2048():
    # tiiuae/falcon-7b's config.json has no max_position_embeddings: transformers' FalconConfig fills 2048 (its class
    # default) and vLLM, which reads the config through that class, plans 2048 tokens. MQA: one KV head of 4544/71 = 64:
    # 32 layers × 1 × 2 × 64 × 2 B = 8,192 B/token.
    raw = dict(alibi=False, architectures=["FalconForCausalLM"], bias=False, hidden_size=4544, model_type="falcon",
               multi_query=True,
               new_decoder_architecture=False, num_attention_heads=71, num_hidden_layers=32, parallel_attn=True,
               torch_dtype="bfloat16", vocab_size=65024)
    spec = parse_config(raw, source="falcon-7b")
    assert spec.derived_max_model_len == 2048 and _kv_bytes(spec) == 8192
    assert any("max_position_embeddings=2048" in n for n in spec.notes)


def test_no_length_key_at_all_gives_vllms_2048():
    # A model_type transformers does not know and none of vLLM's length keys: vLLM warns and assumes 2048.
    raw = dict(model_type="my_decoder", hidden_size=256, num_hidden_layers=2, num_attention_heads=4, vocab_size=1000,
               intermediate_size=512)
    spec = parse_config(raw, source="t")
    assert spec.derived_max_model_len == 2048 and any("assumes 2048" in n for n in spec.notes)


def test_smallest_length_key_wins():
    # vLLM derive_max_model_len_and_key: the smallest of max_position_embeddings, n_positions, max_seq_len, seq_length,
    # ...
    raw = dict(model_type="my_decoder", hidden_size=256, num_hidden_layers=2, num_attention_heads=4, vocab_size=1000,
               intermediate_size=512, max_position_embeddings=8192, seq_length=4096)
    assert parse_config(raw, source="t").derived_max_model_len == 4096


def test_published_gemma_3_27b_it_plans():
    # google/gemma-3-27b-it: the text part has no vocab_size and no max_position_embeddings; transformers'
    # Gemma3TextConfig fills 262,208 and 131,072. 62 layers: every 6th global (10), the rest local with window 1024;
    # 16 KV heads of 128: 2 × 16 × 128 × 2 B = 8,192 B per layer per token.
    spec = parse_config(json.loads((FIXTURES / "google--gemma-3-27b-it.json").read_text()), source="gemma-3-27b-it")
    assert (spec.vocab_size, spec.derived_max_model_len) == (262_208, 131_072)
    assert dict(spec.layer_counts()) == {"sliding_window": 52, "full": 10}
    assert _kv_bytes(spec) == 62 * 8192 and spec.layers[0].window_tokens == 1024
    # transformers' Gemma3ForConditionalGeneration on the meta device: 27,432,406,640 parameters, of which the SigLIP
    # tower 416,866,032 and the projector 1152 × 5376 + 1152 = 6,194,304; vLLM loads all of them.
    assert spec.num_params == 27_432_406_640
    assert sum(w.numel for w in spec.weights if w.path.startswith(("vision_tower", "multi_modal"))) == 423_060_336


def test_llama4_scout_vision_tower_and_nope_layers():
    # Llama-4-Scout's config has "no_rope_layers": []: transformers then makes every 4th layer NoPE (global), the
    # rest chunked-local (8192). Llama4VisionModel on the meta device: 850,960,896 parameters; + the projector
    # 5120 × 4096 = 20,971,520; text 107,769,861,120 (transformers Llama4ForCausalLM, meta device).
    spec = load_model("meta-llama/Llama-4-Scout-17B-16E-Instruct")
    assert dict(spec.layer_counts()) == {"chunked_local": 36, "full": 12}
    assert spec.num_params == 107_769_861_120 + 850_960_896 + 20_971_520


def test_starcoder2_and_gpt_bigcode():
    # bigcode/starcoder2-15b: 40 layers, 4 KV heads of 6144/48 = 128, sliding window 4096 on every layer (vLLM's
    # CacheConfig.sliding_window): 40 × 2 × 4 × 128 × 2 B = 81,920 B/token.
    sc2 = dict(architectures=["Starcoder2ForCausalLM"], model_type="starcoder2", hidden_size=6144,
               intermediate_size=24576,
               max_position_embeddings=16384, num_attention_heads=48, num_hidden_layers=40, num_key_value_heads=4,
               sliding_window=4096, use_bias=True, vocab_size=49152, torch_dtype="bfloat16")
    s = parse_config(sc2, source="starcoder2-15b")
    assert _kv_bytes(s) == 81_920 and dict(s.layer_counts()) == {"sliding_window": 40}
    # bigcode/starcoder (GPT-BigCode): n_embd 6144, n_head 48, n_layer 40, multi_query: one KV head of 128:
    # 40 × 2 × 128 × 2 B = 20,480 B/token; learned positions (n_positions 8192), so no RoPE buffer. The StarCoder
    # paper's 15.5B parameters: wte 49152×6144 + wpe 8192×6144 + 40 × (c_attn 6144×6400 + c_proj 6144² + MLP
    # 2×6144×24576
    # + biases and LayerNorms) = 15,517,456,384.
    big = dict(architectures=["GPTBigCodeForCausalLM"], model_type="gpt_bigcode", n_embd=6144, n_head=48, n_layer=40,
               n_positions=8192, n_inner=24576, multi_query=True, vocab_size=49152, torch_dtype="float32")
    b = parse_config(big, source="starcoder")
    assert (b.num_kv_heads, b.head_dim, _kv_bytes(b), b.rope_cache_bytes, b.derived_max_model_len) == (1, 128, 20_480,
        0, 8192)
    assert b.num_params == 15_517_456_384


def test_lfm2_conv_layers_keep_state_not_kv():
    # LiquidAI/LFM2-1.2B: 16 layers, 6 full attention (8 KV heads of 2048/32 = 64), 10 short-convolution layers whose
    # state does not grow with the context: KV 6 × 2 × 8 × 64 × 2 B = 12,288 B/token. The MLP width follows vLLM's
    # Lfm2MLP: block_ff_dim 12288 → int(2 × 12288 / 3) = 8192, ×1.0, rounded to 256 → 8192; 1,170,340,608 parameters
    # (the model card's 1.17B).
    lt = ["conv", "conv", "full_attention", "conv", "conv", "full_attention", "conv", "conv", "full_attention", "conv",
          "full_attention", "conv", "full_attention", "conv", "full_attention", "conv"]
    raw = dict(architectures=["Lfm2ForCausalLM"], model_type="lfm2", hidden_size=2048, num_hidden_layers=16,
               num_attention_heads=32,
               num_key_value_heads=8, vocab_size=65536, max_position_embeddings=128000, conv_L_cache=3,
                   block_ff_dim=12288,
               block_auto_adjust_ff_dim=True, block_ffn_dim_multiplier=1.0, block_multiple_of=256, layer_types=lt,
               torch_dtype="bfloat16")
    s = parse_config(raw, source="lfm2-1.2b")
    assert dict(s.layer_counts()) == {"state": 10, "full": 6} and _kv_bytes(s) == 12_288
    assert s.num_params == 1_170_340_608


def test_unknown_model_type_with_standard_fields_plans_with_a_note():
    raw = dict(model_type="acme_lm", architectures=["AcmeForCausalLM"], hidden_size=2048, num_hidden_layers=24,
               n_head_kv=4,
               num_attention_heads=16, vocab_size=32000, intermediate_size=8192, max_position_embeddings=4096)
    s = parse_config(raw, source="acme")
    # n_head_kv is the first of vLLM's KV-head keys: 24 × 2 × 4 × 128 × 2 B = 49,152 B/token
    assert _kv_bytes(s) == 49_152
    assert any("read as a standard decoder" in n for n in s.notes)


@pytest.mark.parametrize("aliases,kv", [
    (dict(n_embd=1024, n_head=16, n_layer=4), 4 * 2 * 16 * 64 * 2),           # GPT-2 names, MHA
    (dict(d_model=1024, n_heads=16, n_layers=4, num_kv_heads=2), 4 * 2 * 2 * 64 * 2),
    (dict(hidden_size=1024, num_attention_heads=16, num_hidden_layers=4, multi_query_group_num=2, kv_channels=128),
     4 * 2 * 2 * 128 * 2),                                                    # ChatGLM names
])
def test_attribute_aliases(aliases, kv):
    raw = dict(model_type="acme_lm", vocab_size=1000, max_position_embeddings=2048, **aliases)
    assert _kv_bytes(parse_config(raw, source="t")) == kv


@pytest.mark.parametrize("mt", ["mamba2", "falcon_mamba", "granitemoehybrid", "kimi_linear", "qwen3_5_text",
                                "gemma3n_text"])
def test_plan_runs_on_new_layouts(mt):
    # Layouts the reader now accepts must go through the whole plan: pure Mamba (each page one layer's state, vLLM
    # MambaSpec), Mamba-2/attention and KDA/MLA hybrids, Gated DeltaNet, KV sharing. (An encoder-decoder such as BART
    # is read, but the plan refuses it: tests/accounting/test_vllm_archs.py.)
    from typer.testing import CliRunner

    from kvledger.cli.main import app

    cfg = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "oracle_configs" / f"{mt}.json"
    r = CliRunner().invoke(app, ["plan", str(cfg), "--gpu", "H100", "--json"], catch_exceptions=False)
    assert r.exit_code in (0, 3)
    d = json.loads(r.stdout)
    assert d["memory"]["num_gpu_blocks"] >= 0


def test_other_engines_refuse_pure_state_models_clearly():
    from kvledger.accounting.plan_other import _require_per_token_kv
    from kvledger.errors import InputError

    spec = parse_config(
        json.loads(
            (Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "oracle_configs" / "mamba.json").read_text()
        ),
        source="mamba",
    )
    assert all(layer.kind == "state" for layer in spec.layers)

    class _KV:
        bytes_per_token = 0

    with pytest.raises(InputError, match="SGLang's separate state pool is not modelled"):
        _require_per_token_kv(spec, _KV(), "SGLang")


@pytest.mark.parametrize("rope,expected", [
    ({"rope_type": "linear", "factor": 4.0}, 16384),        # vLLM _get_and_verify_max_len: × factor
    ({"type": "dynamic", "factor": 2.0}, 8192),
    ({"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 2048}, 8192),  # from the original length
    ({"rope_type": "llama3", "factor": 8.0}, 4096),          # llama3/longrope/su: no factor
    ({"full_attention": {"rope_type": "linear", "factor": 2.0}, "sliding_attention": {"rope_type": "default"}}, 8192),
])
def test_rope_scaling_stretches_the_default_length_as_vllm_does(rope, expected):
    raw = dict(model_type="acme_lm", hidden_size=256, num_hidden_layers=2, num_attention_heads=4, vocab_size=1000,
               intermediate_size=512, max_position_embeddings=4096, rope_scaling=rope)
    assert parse_config(raw, source="t").derived_max_model_len == expected


def test_rope_scaled_length_carries_its_derivation_as_a_note():
    # meta-llama/Llama-2-7b-hf's published fields with the linear factor 2 a user set (a trial's config):
    # 4,096 × 2 = 8,192 (vLLM _get_and_verify_max_len, 0.19 and 0.33).
    llama2 = dict(model_type="llama", architectures=["LlamaForCausalLM"], hidden_size=4096, num_hidden_layers=32,
                  num_attention_heads=32, num_key_value_heads=32, intermediate_size=11008, vocab_size=32000,
                  max_position_embeddings=4096, rope_scaling={"type": "linear", "factor": 2.0})
    spec = parse_config(llama2, source="llama-2-7b-linear2")
    assert spec.derived_max_model_len == 8_192
    assert [n for n in spec.notes if n.startswith("max_model_len 8,192 = max_position_embeddings 4,096 × rope_scaling "
                                                  "factor 2 (linear)")]
    # Qwen/Qwen3-8B's published fields with the YaRN block its model card gives (factor 4 from 32,768): vLLM 0.19
    # derives 32,768 × 4 = 131,072; the note says 0.33 leaves max_position_embeddings 40,960 as it is.
    qwen3 = dict(model_type="qwen3", architectures=["Qwen3ForCausalLM"], hidden_size=4096, num_hidden_layers=36,
                 num_attention_heads=32, num_key_value_heads=8, head_dim=128, intermediate_size=12288,
                 vocab_size=151936, max_position_embeddings=40960,
                 rope_scaling={"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 32768})
    spec = parse_config(qwen3, source="qwen3-8b-yarn")
    assert spec.derived_max_model_len == 131_072
    note = next(n for n in spec.notes if n.startswith("max_model_len 131,072 = original_max_position_embeddings "
                                                        "32,768 × rope_scaling factor 4 (yarn)"))
    assert "derives 40,960" in note
    # Gemma-3: the linear factor 8 is not applied (vLLM skips it for gemma3): 131,072 stays, and the note says why
    spec = parse_config(json.loads((FIXTURES / "google--gemma-3-27b-it.json").read_text()), source="gemma-3-27b-it")
    assert spec.derived_max_model_len == 131_072
    assert [n for n in spec.notes if n.startswith("max_model_len 131,072 = max_position_embeddings, rope_scaling "
                                                  "factor 8 not applied")]
    # no RoPE factor, no note
    assert not [n for n in parse_config({**llama2, "rope_scaling": None}, source="l").notes if "max_model_len" in n]


@pytest.mark.parametrize("fixture", ["Qwen2.5-VL-7B-Instruct.json", "Qwen2.5-VL-7B-Instruct-nested.json"])
def test_qwen2_5_vl_counts_its_vision_tower_and_the_text_models_qkv_biases(fixture):
    # Text model: Qwen2.5-7B's layout, q/k/v biased: 7,615,616,512 (the bundled Qwen2.5-7B's count), of which the
    # biases 28 × (3584 + 2 × 4 × 128) = 28 × 4,608 = 129,024.
    # Vision tower (vLLM qwen2_5_vl.py, width 1280, depth 32, MLP 3420, out 3584): patch embed 1280 × 3 × 2 × 14 × 14
    # = 1,505,280 (no bias); per block norms 2 × 1280 = 2,560, qkv 3 × 1280 × 1280 + 3,840 = 4,919,040, proj
    # 1280² + 1280 = 1,639,680, gate_up 2 × 3420 × 1280 + 6,840 = 8,762,040, down 1280 × 3420 + 1280 = 4,378,880
    # → 19,702,200 × 32 = 630,470,400; merger ln_q 1280, 5120 × 5120 + 5120 = 26,219,520, 3584 × 5120 + 3584 =
    # 18,353,664 → 44,574,464. Tower 676,550,144; in all 8,292,166,656.
    spec = parse_config(json.loads((FIXTURES / fixture).read_text()), source=fixture)
    tower = sum(w.numel for w in spec.weights if w.path.startswith("visual."))
    assert tower == 676_550_144
    assert spec.num_params - tower == 7_615_616_512
    assert spec.num_params == 8_292_166_656
    assert any(n.startswith("vision tower (Qwen2.5-VL, 32 blocks of width 1280)") for n in spec.notes)


def test_a_vision_tower_not_read_is_a_warning_for_any_layout():
    # Qwen2-VL's vision_config (depth, embed_dim; no num_hidden_layers) has no layout here, flat or nested: the note
    # that the weights leave the tower out is a WARNING, whichever layout the config has.
    flat = json.loads((FIXTURES / "Qwen2.5-VL-7B-Instruct.json").read_text())
    flat["model_type"] = "qwen2_vl"
    spec = parse_config(flat, source="qwen2-vl-like")
    assert [n for n in spec.notes if n.startswith("WARNING: vision tower not counted")]
    assert not [w for w in spec.weights if w.path.startswith("visual.")]


def test_deepseek_v32_counts_its_indexer_keys():
    # vLLM DeepseekV32IndexerCache: per layer per token index_head_dim (128) FP8 values + 128/128 × 4 B of fp32 scale
    # = 132 B, whatever the KV dtype, beside the 576-element MLA latent: 61 × (576 × 2 + 132) = 78,324 B/token in bf16.
    raw = json.loads(
        (
            Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "oracle_configs" / "deepseek_v32.json"
        ).read_text()
    )
    spec = parse_config(raw, source="deepseek_v32")
    assert sum(layer.kv_bytes_per_token(2) for layer in spec.layers) == 61 * (576 * 2 + 132) == 78_324
    # the latent, as transformers caches it
    assert sum(layer.kv_elements_per_token() for layer in spec.layers) == 61 * 576
    # + the indexer's projections per layer (64 × 128 × 1536 + 128 × 7168 + 2 × 128 + 64 × 7168): 671,877,929,216
    # parameters,
    # as transformers' DeepseekV32ForCausalLM on the meta device (benchmarks/data/transformers_oracle.csv).
    assert spec.num_params == 671_877_929_216
