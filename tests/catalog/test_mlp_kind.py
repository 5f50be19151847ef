"""Plain (fc1 → act → fc2) MLPs counted without a gate, by the model file vLLM runs: BLOOM and MPT, whose configs
carry no ``hidden_act`` (derivations in the comments; transformers counts from
``benchmarks/data/transformers_oracle.csv``)."""

from __future__ import annotations

import csv
import json
from pathlib import Path

from kvledger.accounting.vllm_mlp import mlp_peak
from kvledger.catalog.mlp_kind import plain_mlp_file
from kvledger.catalog.modelspec import parse_config

DATA = Path(__file__).resolve().parents[2] / "benchmarks" / "data"
ROWS = {r["model_type"]: r for r in csv.DictReader((DATA / "transformers_oracle.csv").open(encoding="utf-8"))}

# MPT-7B's and BLOOM-7B1's config.json fields that shape the parameters (mosaicml/mpt-7b, bigscience/bloom-7b1)
MPT_7B = {"architectures": ["MPTForCausalLM"], "model_type": "mpt", "d_model": 4096, "n_heads": 32, "n_layers": 32,
          "expansion_ratio": 4, "vocab_size": 50432, "max_seq_len": 2048, "no_bias": True, "torch_dtype": "bfloat16",
          "attn_config": {"alibi": True, "attn_impl": "torch"}, "learned_pos_emb": True}
BLOOM_7B1 = {"architectures": ["BloomForCausalLM"], "model_type": "bloom", "hidden_size": 4096, "n_head": 32,
             "n_layer": 30, "vocab_size": 250880, "torch_dtype": "bfloat16", "layer_norm_epsilon": 1e-05}


def _oracle(mt):
    return parse_config(json.loads((DATA / "oracle_configs" / f"{mt}.json").read_text()), source=mt)


def test_mpt_default_config_counts_what_transformers_builds():
    # MptConfig defaults: d_model 2,048, 24 layers, vocab 50,368, expansion_ratio 4, no_bias, tied head. transformers:
    # wte 50,368 × 2,048 = 103,153,664; per block norm_1 + norm_2 (2 × 2,048, no bias), Wqkv 3 × 2,048² = 12,582,912,
    # out_proj 2,048² = 4,194,304, up_proj and down_proj 2 × 8,192 × 2,048 = 33,554,432: 50,335,744 × 24 =
    # 1,208,057,856; norm_f 2,048. Total 1,311,213,568 (the oracle). With a gate the count was 24 × 8,192 × 2,048 =
    # 402,653,184 higher.
    spec = _oracle("mpt")
    assert spec.num_params == int(ROWS["mpt"]["num_params"]) == 1_311_213_568
    assert spec.intermediate_size == 8_192


def test_bloom_default_config_mlp_is_plain_and_biased_the_rest_is_the_llama_layout():
    # BloomConfig defaults: hidden 64, 2 layers, 8 heads, vocab 250,880. transformers: per layer query_key_value
    # 192 × 64 + 192, dense 64 × 64 + 64, dense_h_to_4h 256 × 64 + 256, dense_4h_to_h 64 × 256 + 64, two LayerNorms
    # 2 × 128: 49,984; embeddings 16,056,320 + their LayerNorm 128, ln_f 128: 16,156,544 (the oracle). Counted here:
    # the MLP with its biases (bloom.py's BloomMLP), the rest the Llama layout without the attention biases (2 × 256),
    # the LayerNorm biases (2 × 2 × 64 + 64) or the embedding LayerNorm (128): 960 short.
    spec = _oracle("bloom")
    assert int(ROWS["bloom"]["num_params"]) - spec.num_params == 2 * 256 + 2 * 2 * 64 + 64 + 128 == 960
    assert spec.intermediate_size == 256


def test_mpt_7b_reads_expansion_ratio_and_has_no_gate():
    # MPT-7B: 4,096 hidden, 32 layers, vocab 50,432. wte 50,432 × 4,096 = 206,569,472; per block 2 × 4,096 norms +
    # Wqkv 3 × 4,096² = 50,331,648 + out_proj 16,777,216 + up/down 2 × 16,384 × 4,096 = 134,217,728: 201,334,784,
    # × 32 = 6,442,713,088; norm_f 4,096. Total 6,649,286,656 (the gated count was 8,796,770,304, 32 × 16,384 × 4,096
    # higher).
    spec = parse_config(MPT_7B, source="mpt-7b")
    assert (spec.num_params, spec.intermediate_size) == (6_649_286_656, 16_384)
    # expansion_ratio 2 (mpt.py: expansion_ratio × d_model): up/down shrink to 2 × 8,192 × 4,096 per layer, 32 ×
    # 67,108,864 = 2,147,483,648 fewer; vLLM's forward holds fc1's 8,192 and its GELU's 8,192 per token
    spec2 = parse_config({**MPT_7B, "expansion_ratio": 2}, source="mpt-7b ratio 2")
    assert spec.num_params - spec2.num_params == 2_147_483_648
    assert (mlp_peak(spec2).width, mlp_peak(spec2).copies) == (8_192, 2)


def test_bloom_7b1_mlp_is_four_hidden_with_biases():
    # BLOOM-7B1: 4,096 hidden, 30 layers, vocab 250,880. transformers counts 7,069,016,064: embeddings 1,027,604,480
    # + LayerNorm 8,192; per layer qkv 12,288 × 4,096 + 12,288 = 50,343,936, dense 4,096² + 4,096 = 16,781,312, MLP
    # 2 × 16,384 × 4,096 + 16,384 + 4,096 = 134,238,208, 2 LayerNorms 16,384: 201,379,840 × 30 = 6,041,395,200; ln_f
    # 8,192. 1,027,604,480 + 8,192 + 6,041,395,200 + 8,192 = 7,069,016,064.
    # Here the MLP is exact; the Llama layout leaves out the embedding LayerNorm (8,192), ln_f's bias (4,096) and per
    # layer the qkv/dense biases (16,384) and the LayerNorm biases (8,192): 12,288 + 30 × 24,576 = 749,568 short.
    spec = parse_config(BLOOM_7B1, source="bloom-7b1")
    assert spec.num_params == 7_069_016_064 - 749_568 == 7_068_266_496
    assert spec.intermediate_size == 16_384 and mlp_peak(spec).copies == 2


def test_architectures_decide_before_model_type():
    # vLLM's registry matches architectures first; the model_type only for a config without them
    assert plain_mlp_file(["BloomForCausalLM"], "bloom") == "bloom.py"
    assert plain_mlp_file(None, "mpt") == "mpt.py" and plain_mlp_file([], "gpt2") == "gpt2.py"
    assert plain_mlp_file(["LlamaForCausalLM"], "mpt") is None and plain_mlp_file(None, "llama") is None
    assert plain_mlp_file("MPTForCausalLM", 3) is None  # not a list of names, not a name: no plain file
