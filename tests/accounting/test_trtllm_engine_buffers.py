"""The TensorRT-engine executor's runtime buffers, decoder and uncounted rest (accounting/trtllm_engine_buffers.py),
worked by hand from its C++ code and checked against the public logs that print them."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.accounting.trtllm_engine_buffers import (
    TRTLLM_ENGINE_OTHER_GIB,
    engine_activation_range,
    trtllm_decoder_bytes,
    trtllm_engine_buffer_terms,
    trtllm_logits_bytes,
    trtllm_runtime_buffer_bytes,
    vocab_padded,
)
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model

ROOT = Path(__file__).resolve().parents[2]
QWEN05 = load_model(str(ROOT / "benchmarks" / "data" / "configs" / "Qwen2.5-Coder-0.5B-Instruct.json"))
LLAMA2 = load_model("meta-llama/Llama-2-7b-hf")
GiB, MiB = 2**30, 2**20


def test_vocab_padded_to_the_world_size():
    # ModelConfig::getVocabSizePadded(worldSize) = ceil(vocab / world) × world: 151,936 is a multiple of 1, 2 and 4;
    # Llama-2's 32,000 at TP 3 → ceil(32,000 / 3) × 3 = 10,667 × 3 = 32,001.
    assert vocab_padded(QWEN05, 1) == vocab_padded(QWEN05, 4) == 151_936 and vocab_padded(LLAMA2, 3) == 32_001


def test_runtime_buffers_as_issue_1188_prints_them():
    # runtimeBuffers.cpp (setMaxBufferSizes + reshape): logits [max_batch × beam, vocab padded] float32
    # (PretrainedConfig.logits_dtype 'float32') = 2,048 × 151,936 × 4 B = 1,244,659,712 B; the per-sequence outputs of
    # createBuffers (decoderBuffers.cpp: device DecoderBuffers + one SlotDecoderBuffers per slot), 24 B × 2,048 ×
    # 32,768 (max_seq_len = Qwen2.5's max_position_embeddings, trtllm-build's default) = 1,610,612,736 B; sum
    # 2,855,272,448 B = 2.6592 GiB. NVIDIA/TensorRT-LLM#1188 (Qwen2.5-Coder-0.5B int8, every default): "Allocated
    # 2.66 GB GPU memory for runtime buffers" (MemoryCounters prints GiB as "GB").
    assert trtllm_logits_bytes(QWEN05, 1, 2048) == 1_244_659_712
    b = trtllm_runtime_buffer_bytes(QWEN05, 1, 2048, 32_768)
    assert b == 2_855_272_448 and round(b / GiB, 2) == 2.66
    # low end, the newest copy read (only the per-slot ids and log-probs on the device, 8 B): 1,244,659,712 +
    # 8 × 2,048 × 32,768 = 1,781,530,624 B
    assert trtllm_runtime_buffer_bytes(QWEN05, 1, 2048, 32_768, per_seq_token=8) == 1_781_530_624


def test_decoder_as_issue_1188_prints_it():
    # decodingLayerWorkspace.cpp runtime logits (4 B) + its scratch = top-K's workspace (samplingTopKKernels.h:
    # 4 B temporary log-probs per entry + 1,024 × 8 × (4 + 4) = 65,536 B per slot) + penaltyLayer.cpp's int32
    # occurrence workspace (4 B) + decoderState.cpp's embedding bias (4 B) = 16 B × 2,048 × 151,936 = 4,978,638,848 B;
    # + 65,536 × 2,048 = 134,217,728 B; + decoderState.cpp's ids, parent ids, log-probs, tiled log-probs 16 B × 2,048
    # × 32,768 = 1,073,741,824 B; sum 6,186,598,400 B = 5.7617 GiB; #1188 prints "Allocated 5.76 GB GPU memory for
    # decoder".
    d = trtllm_decoder_bytes(QWEN05, 1, 2048, 32_768)
    assert d == 6_186_598_400 and round(d / GiB, 2) == 5.76


def test_memory_faq_older_executor_at_max_batch_256():
    # NVIDIA/TensorRT-LLM docs/source/reference/memory.md's log (H100, 64 tokens a block, "Max KV cache pages per
    # sequence: 32" → max_seq_len 2,048): "Allocated 43.29 MB GPU memory for runtime buffers" and "Allocated 180.30 MB
    # GPU memory for decoder". A 32,000-entry vocabulary at max batch 256: runtime 4 × 256 × 32,000 + 24 × 256 × 2,048
    # = 32,768,000 + 12,582,912 = 45,350,912 B = 43.25 MiB; decoder with that era's 20 B per entry (its penalty layer
    # kept its own runtime logits): 20 × 256 × 32,000 + 65,536 × 256 + 16 × 256 × 2,048 = 163,840,000 + 16,777,216
    # + 8,388,608 = 189,005,824 B = 180.25 MiB. (The model is not stated, so the row is not in the corpus.)
    assert trtllm_runtime_buffer_bytes(LLAMA2, 1, 256, 2048) == 45_350_912
    assert trtllm_decoder_bytes(LLAMA2, 1, 256, 2048, per_logit=20) == 189_005_824
    assert (round(45_350_912 / MiB, 2), round(189_005_824 / MiB, 2)) == (43.25, 180.25)


def test_uncounted_rest_is_the_memory_faq_log_and_its_range():
    # total − available − TensorRT's engine ("GPU 6678 (MiB)") − execution context − runtime buffers − decoder:
    # 79.10 − 70.48 − (6,678 + 1,134.01 + 43.29 + 180.30) / 1,024 = 8.62 − 7.84727 = 0.773 GiB (the point); the
    # 0.12.0.dev trtllm-bench walkthrough (NVIDIA/TensorRT-LLM benchmarks/Suite.md): 79.10 − 63.62 − (6,166 + 928.77)
    # / 1,024 − 1.14 − 4.35 = 3.0615 GiB (the high end, 3.1); leave-one-out |3.0615 − 0.773| = 2.29 GiB.
    faq = 79.10 - 70.48 - (6678 + 1134.01 + 43.29 + 180.30) / 1024
    suite = 79.10 - 63.62 - (6166 + 928.77) / 1024 - 1.14 - 4.35
    assert round(faq, 3) == TRTLLM_ENGINE_OTHER_GIB[1] and suite < TRTLLM_ENGINE_OTHER_GIB[2]
    assert round(suite - faq, 2) == 2.29


def test_terms_and_their_ranges():
    # Llama-2-7B, max batch 256, max_seq_len 2,048: runtime 45,350,912 B (low 32,768,000 + 8 × 524,288 =
    # 36,962,304 B, high = point); decoder 16 × 8,192,000 + 16,777,216 + 8,388,608 = 156,237,824 B (low 12 B per entry:
    # 98,304,000 + 25,165,824 = 123,469,824 B; high 20 B: 189,005,824 B); before 0.13 the high ends × 1.48.
    run, dec, rest = trtllm_engine_buffer_terms(LLAMA2, 1, 256, 2048)
    assert (run.bytes, run.low_bytes, run.high_bytes) == (45_350_912, 36_962_304, 45_350_912)
    assert (dec.bytes, dec.low_bytes, dec.high_bytes) == (156_237_824, 123_469_824, 189_005_824)
    assert (rest.low_bytes, rest.bytes, rest.high_bytes) == pytest.approx((0.3 * GiB, 0.773 * GiB, 3.1 * GiB))
    old_run, old_dec, _ = trtllm_engine_buffer_terms(LLAMA2, 1, 256, 2048, old_release=True)
    assert (old_run.high_bytes, old_dec.high_bytes) == pytest.approx((1.48 * 45_350_912, 1.48 * 189_005_824))
    # the engine's activations: the modelled forward to 1.5 × it (Suite.md printed +11% for Llama-2-7B FP8)
    assert engine_activation_range(100.0) == (100.0, 150.0)


def test_plan_takes_the_runtime_max_batch_and_a_given_rest():
    # --max-num-seqs is the executor's max batch size (the engine's, 2,048 by default): at 256 the decoder shrinks 8×
    # in its per-slot parts; a given --non-torch-memory replaces the fitted rest.
    h100 = get_gpu("h100")
    kw = dict(engine="trtllm", engine_version="0.19.0", max_model_len=2048)
    p = build_plan(LLAMA2, h100, make_settings(max_num_seqs=256, **kw), with_roofline=False, with_advice=False).memory
    dec = next(d for d in p.deductions if d.name.startswith("decoder buffers"))
    assert dec.bytes == 156_237_824
    q = build_plan(LLAMA2, h100, make_settings(non_torch_bytes=2**29, **kw), with_roofline=False,
                   with_advice=False).memory
    assert not any("(fitted)" in d.name for d in q.deductions)
    assert next(d for d in q.deductions if d.name == "non-torch memory").bytes == 2**29


LLAMA31_FP8 = load_model(str(ROOT / "benchmarks" / "data" / "configs" / "Llama-3.1-8B-Instruct-FP8.json"))


def test_float16_logits_of_a_modelopt_exported_engine():
    # ModelOpt's export (quantize.py → export_tensorrt_llm_checkpoint → convert_to_tensorrt_llm_config) writes
    # logits_dtype "float16" for a bfloat16 model; runtimeBuffers.cpp and createDecoder take the engine's "logits"
    # tensor type, so T = 2 B. Llama-3.1-8B (V 128,256), max batch 2,048, max_seq_len 2,048 (TR03's engine):
    # runtime 2 × 2,048 × 128,256 = 525,336,576 + 24 × 2,048 × 2,048 = 100,663,296 → 625,999,872 B;
    # decoder (3 × 2 + 4) = 10 B × 262,668,288 = 2,626,682,880 + top-K candidates 1,024 × 8 × (4 + 2) = 49,152 B ×
    # 2,048 = 100,663,296 + 16 × 2,048 × 2,048 = 67,108,864 → 2,794,455,040 B (low 8 B, high 12 B per entry).
    run, dec, _ = trtllm_engine_buffer_terms(LLAMA31_FP8, 1, 2048, 2048, logits_dtype="float16")
    assert run.bytes == 625_999_872 and dec.bytes == 2_794_455_040
    assert (dec.low_bytes, dec.high_bytes) == (2_794_455_040 - 2 * 262_668_288, 2_794_455_040 + 2 * 262_668_288)
    # float32 (convert_checkpoint.py's default): runtime 1,050,673,152 + 100,663,296 = 1,151,336,448 B; decoder
    # 16 × 262,668,288 + 65,536 × 2,048 + 67,108,864 = 4,404,019,200 B; float16 saves 2,134,900,736 B = 1.988 GiB.
    run32, dec32, _ = trtllm_engine_buffer_terms(LLAMA31_FP8, 1, 2048, 2048)
    assert (run32.bytes, dec32.bytes) == (1_151_336_448, 4_404_019_200)
    assert round((run32.bytes + dec32.bytes - run.bytes - dec.bytes) / GiB, 3) == 1.988
