"""The configs bundled for the vLLM 0.19 corpus start-ups that had none: KV per token, parameters and weights by
hand."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.catalog.gpu_file import resolve_gpu
from kvledger.catalog.loading import loaded_weights
from kvledger.catalog.models import load_model
from kvledger.catalog.modelspec import parse_config
from kvledger.errors import KvLedgerError
from kvledger.units import GiB


def _kv_per_token(spec) -> float:
    return sum(layer.kv_bytes_per_token(spec.dtype_bytes) for layer in spec.layers if layer is not None)


def test_codellama_7b_kv_params_and_logged_weights():
    m = load_model("codellama/CodeLlama-7b-hf")
    # MHA, head_dim 4096 / 32 = 128: 2 (K,V) × 32 layers × 32 KV heads × 128 × 2 B (served bf16) = 524,288 B.
    assert _kv_per_token(m) == 524_288
    # Embedding and untied head 2 × 32016 × 4096 = 262,275,072; per layer q/k/v/o 4 × 4096² = 67,108,864, SwiGLU
    # 3 × 4096 × 11008 = 135,266,304, two RMSNorms 8,192 → 202,383,360 × 32 = 6,476,267,520; final norm 4,096.
    # Total 6,738,546,688 = the mirror's pytorch_model.bin.index.json total_size 26,954,186,752 B / 4 (float32).
    assert m.num_params == 262_275_072 + 32 * 202_383_360 + 4_096 == 6_738_546_688
    # The config says float32; vLLM's --dtype auto serves float32 configs in bfloat16 (the log: dtype=torch.bfloat16).
    assert m.dtype == "bfloat16"
    # vLLM 0.19 log: "Model loading took 12.56 GiB". 6,738,546,688 × 2 B = 12.552 GiB, plus the allocator's 2 MiB
    # segment rounding of each fused tensor and the 16,384 × 128 × 2 B RoPE buffer (4 MiB) → 12.555 GiB.
    assert round(loaded_weights(m).bytes / GiB, 2) == 12.56


def test_phi_2_kv_params_and_logged_weights():
    m = load_model("microsoft/phi-2")
    # head_dim 2560 / 32 = 80 (partial rotary 0.4 rotates 32 of them; the cache keeps all 80):
    # 2 × 32 layers × 32 KV heads × 80 × 2 B (float16) = 327,680 B; the log's 69.00 GiB / 226,112 tokens agrees.
    assert _kv_per_token(m) == 327_680
    # Embedding 51200 × 2560 = 131,072,000; lm_head with bias 131,072,000 + 51,200. Per layer: q/k/v/dense with bias
    # 4 × (2560² + 2560) = 26,224,640; fc1 2560 × 10240 + 10240 = 26,224,640; fc2 10240 × 2560 + 2560 =
    # 26,216,960; one LayerNorm 2 × 2560 → 78,671,360 × 32 = 2,517,483,520. Final LayerNorm 5,120.
    # Total 2,779,683,840 = model.safetensors.index.json total_size 5,559,367,680 B / 2 (float16).
    assert m.num_params == 131_072_000 + 131_123_200 + 32 * 78_671_360 + 5_120 == 2_779_683_840
    # max_position_embeddings 2048: vLLM refused the corpus's --max-model-len 8192 start-up of phi-2 for exceeding it.
    assert m.dtype == "float16" and m.derived_max_model_len == 2048
    # vLLM 0.19 log: "Model loading took 5.19 GiB" (5,559,367,680 B = 5.178 GiB before allocator rounding).
    assert round(loaded_weights(m).bytes / GiB, 2) == 5.19



def test_phi_2_refuses_the_corpus_8192_token_start_up():
    # The corpus's phi-2 start-up at --max-model-len 8192 failed in vLLM 0.19.0: "User-specified max_model_len (8192)
    # is greater than the derived max_model_len (max_position_embeddings=2048.0 ...)". The plan refuses it too.
    s = make_settings(engine="vllm", engine_version="0.19.0", max_model_len=8192, gpu_memory_utilization=0.95)
    with pytest.raises(KvLedgerError, match="2,048"):
        build_plan(load_model("microsoft/phi-2"), resolve_gpu("H100-SXM"), s, with_roofline=False, with_advice=False)


ORACLE = Path(__file__).parents[2] / "benchmarks" / "data" / "oracle_configs"


def _default_config_plan(model_type: str):
    """transformers' default config of the class (benchmarks/data/oracle_configs, written by transformers_oracle.py)."""
    m = parse_config(json.loads((ORACLE / f"{model_type}.json").read_text()), source=f"transformers default "
        f"{model_type}")
    s = make_settings(engine="vllm", engine_version="0.19.0", max_model_len=8192, gpu_memory_utilization=0.95,
                      dtype="bfloat16", max_num_batched_tokens=8192, max_num_seqs=1024)
    return m, build_plan(m, resolve_gpu("H100-SXM", memory_bytes=int(79.19 * GiB)), s, with_roofline=False,
                         with_advice=False)


# google/gemma-7b's and Qwen/Qwen1.5-MoE-A2.7B's config.json are not bundled (no verbatim copy found). transformers'
# GemmaConfig and Qwen2MoeConfig defaults are documented as "similar to" these two models and carry their
# architectures, so they check the catalog's rules for both families against the corpus start-ups (vLLM 0.19.0, H100,
# L 8192, utilization 0.95).
#
# gemma: tied embedding 256000 × 3072 = 786,432,000; per layer q/k/v/o 4 × 4096 × 3072 = 50,331,648, GeGLU
# 3 × 3072 × 24576 = 226,492,416, two norms 6,144 → 276,830,208 × 28; final norm 3,072. KV: 2 × 28 × 16 × 256 × 2 B
# = 458,752 B/token (head_dim 256 ≠ 3072/16); the log: 55.44 GiB / 129,760 tokens = 458,757 B. Weights:
# 8,537,680,896 × 2 B = 15.903 GiB + the 8192 × 256 × 2 B RoPE buffer; logged 15.91 GiB.
#
# qwen2_moe: untied embedding + head 2 × 151936 × 2048 = 622,329,856. Per layer: q/k/v with bias 3 × (2048² + 2048)
# + o 2048² = 16,783,360; router 60 × 2048 = 122,880; experts 60 × 3 × 2048 × 1408 = 519,045,120; shared expert
# 3 × 2048 × 5632 = 34,603,008 and its sigmoid gate 2,048; two norms 4,096 → 570,560,512 × 24; final norm 2,048.
# KV: 2 × 24 × 16 × 128 × 2 B = 196,608 B/token; the log: 45.83 GiB / 250,304 tokens = 196,599 B. Weights:
# 14,315,784,192 × 2 B = 26.666 GiB + RoPE buffer; logged 26.67 GiB.
@pytest.mark.parametrize("model_type, params, kv_per_token, logged_weights_gib, logged_available_gib", [
    ("gemma", 786_432_000 + 28 * 276_830_208 + 3_072, 458_752, 15.91, 55.44),
    ("qwen2_moe", 622_329_856 + 24 * 570_560_512 + 2_048, 196_608, 26.67, 45.83),
])
def test_family_rules_on_transformers_default_configs(model_type, params, kv_per_token, logged_weights_gib,
                                                      logged_available_gib):
    m, p = _default_config_plan(model_type)
    assert m.num_params == params
    assert _kv_per_token(m) == kv_per_token
    assert round(loaded_weights(m).bytes / GiB, 2) == logged_weights_gib
    assert p.memory.available_kv_bytes / GiB == pytest.approx(logged_available_gib, rel=0.002)
