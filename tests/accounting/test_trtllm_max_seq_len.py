"""TensorRT-LLM's own max_seq_len rule, read in NVIDIA/TensorRT-LLM's source (stored snapshots, not pinned to one
release):

- with none given, the PyTorch backend infers max_position_embeddings × ceil(rope factor), no factor for su, longrope,
  llama3 and yarn (``tensorrt_llm/_torch/models/modeling_utils.py`` ``DecoderModelForCausalLM.infer_max_seq_len``,
  ``_torch/pyexecutor/model_engine.py`` ``_infer_max_seq_len_from_config``); trtllm-build deduces the same but keeps
  YaRN's factor (``tensorrt_llm/builder.py`` ``_init_max_seq_len``: no factor for su, longrope, llama3);
- a larger given length: the PyTorch backend lowers it to the model's with a warning
  (``model_engine.py`` ``_init_max_seq_len``), unless TLLM_ALLOW_LONG_MAX_MODEL_LEN=1; trtllm-build keeps it and warns;
- a KV pool that cannot hold one max_seq_len request: max_seq_len and the attention window are lowered to
  blocks × tokens_per_block (``_torch/pyexecutor/resource_manager.py``
  ``KVCacheManager.get_max_atten_window_upper_bound`` at beam width 1, no sink tokens), not refused as vLLM refuses."""

from __future__ import annotations

from kvledger.accounting.max_model_len import engine_config_len, resolve_max_model_len
from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model
from kvledger.catalog.modelspec import parse_config

# Qwen/Qwen3-8B's published fields (max_position_embeddings 40,960)
QWEN3 = dict(model_type="qwen3", architectures=["Qwen3ForCausalLM"], hidden_size=4096, num_hidden_layers=36,
             num_attention_heads=32, num_key_value_heads=8, head_dim=128, intermediate_size=12288, vocab_size=151936,
             max_position_embeddings=40960, torch_dtype="bfloat16")


def _qwen3(**rope):
    return parse_config({**QWEN3, "rope_scaling": rope} if rope else QWEN3, source="qwen3-8b-rope")


def test_default_length_by_runtime():
    # YaRN factor 4 from 32,768: PyTorch backend 40,960 (no YaRN factor); trtllm-build 40,960 × 4 = 163,840 (it
    # multiplies max_position_embeddings, not the original length); vLLM 0.26's rule 32,768 × 4 = 131,072
    yarn = _qwen3(rope_type="yarn", factor=4.0, original_max_position_embeddings=32768)
    assert yarn.trtllm_max_seq_len == (40_960, 163_840) and yarn.derived_max_model_len == 131_072
    n, note = engine_config_len(yarn, "trtllm", "1.2.1")
    assert n == 40_960 and "infer_max_seq_len" in note and "131,072" in note
    assert engine_config_len(yarn, "trtllm", "0.17.0")[0] == 163_840  # before 1.0: trtllm-build engines
    assert engine_config_len(yarn, "trtllm", "0.20.0", "pytorch")[0] == 40_960  # the PyTorch backend asked for
    # linear factor 2: every rule multiplies, 81,920, and no note; llama3: no factor anywhere
    assert _qwen3(rope_type="linear", factor=2.0).trtllm_max_seq_len == (81_920, 81_920)
    assert engine_config_len(_qwen3(rope_type="linear", factor=2.0), "trtllm", "1.2.1") == (81_920, None)
    assert _qwen3(rope_type="llama3", factor=8.0).trtllm_max_seq_len == (40_960, 40_960)


def test_a_longer_given_length_is_lowered_by_the_pytorch_backend_and_kept_by_trtllm_build():
    spec = _qwen3()
    n, why = resolve_max_model_len(spec, make_settings(engine="trtllm", engine_version="1.2.1", max_model_len=65536))
    assert n == 40_960 and "lowers max_seq_len to 40,960" in why
    kept = make_settings(engine="trtllm", engine_version="1.2.1", max_model_len=65536, allow_long_max_model_len=True)
    assert resolve_max_model_len(spec, kept)[0] == 65_536
    n, why = resolve_max_model_len(spec, make_settings(engine="trtllm", engine_version="0.17.0", max_model_len=65536))
    assert n == 65_536 and "model accuracy might be affected" in why


def test_a_pool_short_of_one_request_lowers_max_seq_len_instead_of_refusing():
    # a pool of exactly 1,000 blocks of 32 tokens at 147,456 B a token (Qwen3-8B: 2 × 36 layers × 8 KV heads × 128 ×
    # 2 B); a 40,960-token request needs 40,960 / 32 = 1,280 blocks, so max_seq_len is lowered to 1,000 × 32 = 32,000
    s = make_settings(engine="trtllm", engine_version="1.2.1", max_model_len=40960, max_num_seqs=8,
                      available_kv_memory_bytes=1000 * 32 * 147_456)
    p = build_plan(load_model("Qwen/Qwen3-8B"), get_gpu("l4"), s, with_roofline=False)
    assert p.memory.num_gpu_blocks == 1000
    # it starts (resource_manager.py lowers, asserts only at zero blocks): its own verdict, not "does not fit"
    assert p.advice.verdict == "served_at_lower_len" and p.advice.estimated_max_model_len == 32_000
    assert p.advice.message.startswith("served at a lower length: TensorRT-LLM starts")
    assert "so it lowers max_seq_len" in p.advice.message
    assert "1,000 × 32 = 32,000 tokens" in p.advice.message and "estimated maximum model length" not in p.advice.message
    assert p.advice.shortfall_bytes == (1280 - 1000) * 32 * 147_456
    assert any(o.action == "--max-model-len 32000" for o in p.advice.options)


def test_llama4_on_the_pytorch_backend_follows_its_infer_max_seq_len_override():
    # NVIDIA/TensorRT-LLM tensorrt_llm/_torch/models/modeling_llama.py, Llama4ForConditionalGeneration (stored source,
    # not pinned to a release): earlier copies (stored from forks) of infer_max_seq_len return 8192 ("TODO: implement
    # chunked attention to support 10M context length"); the current one returns 8192 only where attn_backend is not
    # TRTLLM (the default), else super().infer_max_seq_len(): Scout's max_position_embeddings 10,485,760, llama3 rope
    # so no factor. The maintainers' 0.21 known-issue note says 0.21 added the chunked attention that runs Llama-4
    # past 8K.
    scout = load_model("meta-llama/Llama-4-Scout-17B-16E-Instruct")
    n, note = engine_config_len(scout, "trtllm", "0.20.0", "pytorch")
    assert n == 8192 and "before 0.21" in note and "Llama4ForConditionalGeneration.infer_max_seq_len" in note
    n, note = engine_config_len(scout, "trtllm", "1.2.1")
    assert n == 10_485_760 and "default TRTLLM attention backend" in note and "it is 8,192" in note
    assert engine_config_len(scout, "trtllm", "0.21.0", "pytorch")[0] == 10_485_760
    # a longer length given before 0.21 is lowered to 8,192, as model_engine.py _init_max_seq_len does
    s = make_settings(engine="trtllm", engine_version="0.20.0", max_model_len=131072, trtllm_backend="pytorch")
    assert resolve_max_model_len(scout, s)[0] == 8192
    # another model keeps the base rule: Qwen3-8B 40,960 with no note
    assert engine_config_len(_qwen3(), "trtllm", "0.20.0", "pytorch") == (40_960, None)
