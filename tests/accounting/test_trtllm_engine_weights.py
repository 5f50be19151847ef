"""What a trtllm-build engine holds beyond the checkpoint's tensors and the TensorRT-engine executor's per-rank TP
workspace (accounting/trtllm_engine_weights.py), worked by hand from TensorRT-LLM's code and checked against the
engine sizes public logs print."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.accounting.trtllm_engine_weights import (
    trtllm_allreduce_workspace_bytes,
    trtllm_embedding_replica_bytes,
    trtllm_rope_table_bytes,
    trtllm_rotary_dim,
)
from kvledger.accounting.weightmem import weight_bytes_per_gpu
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model

ROOT = Path(__file__).resolve().parents[2]
CONFIGS = ROOT / "benchmarks" / "data" / "configs"
LLAMA31 = load_model("meta-llama/Llama-3.1-8B-Instruct")
LLAMA3_AWQ = load_model(str(CONFIGS / "Meta-Llama-3-8B-Instruct-int4-AWQ.json"))
QWEN05 = load_model(str(CONFIGS / "Qwen2.5-Coder-0.5B-Instruct.json"))
MiB = 2**20


def test_rotary_table_is_max_position_embeddings_by_rotary_dim_float32():
    # create_sinusoidal_positions_for_attention_plugin: cos/sin pairs [positions, rotary_dim / 2, 2] float32, one row:
    # Llama-3.1 131,072 × 128 × 4 B = 64 MiB; Llama-3 8,192 × 128 × 4 = 4 MiB; Qwen2.5-0.5B 32,768 × 64 × 4 = 8 MiB
    assert trtllm_rotary_dim(LLAMA31) == 128 and trtllm_rotary_dim(QWEN05) == 64
    assert trtllm_rope_table_bytes(LLAMA31) == 64 * MiB
    assert trtllm_rope_table_bytes(LLAMA3_AWQ) == 4 * MiB and trtllm_rope_table_bytes(QWEN05) == 8 * MiB


def test_embedding_held_whole_at_tp2_is_half_the_table_more():
    # 128,256 × 4,096 × 2 B = 1,050,673,152 B; a rank holds half when split, so whole is 525,336,576 B (501 MiB) more
    assert trtllm_embedding_replica_bytes(LLAMA31, 2) == 525_336_576
    assert trtllm_embedding_replica_bytes(LLAMA31, 1) == 0


def test_custom_allreduce_workspace_by_tp():
    # AllReduceBuffers (runtime/ipcUtils.cpp): 2 × align2MiB(tp × min(B × S × H × 4, W)) + 2 flag buffers of 2 MiB;
    # B 8, S 8,000, H 4,096: B·S·H·4 = 1,048,576,000 > W. TP 2: W 16,000,000 → 32,000,000 → 16 × 2 MiB = 32 MiB,
    # × 2 + 4 = 68 MiB; TP 4: 4 × 8,000,000, the same 68 MiB; TP 8: 64,000,000 → 31 × 2 MiB = 62 MiB, × 2 + 4 =
    # 128 MiB; TP 1: none. A short engine, B 1, S 256 at TP 2: 2 × 4,194,304 = 8 MiB, × 2 + 4 = 20 MiB.
    assert [trtllm_allreduce_workspace_bytes(t, 8, 8000, 4096) for t in (1, 2, 4, 8)] == [
        0, 68 * MiB, 68 * MiB, 128 * MiB]
    assert trtllm_allreduce_workspace_bytes(2, 1, 256, 4096) == 20 * MiB


def test_engine_sizes_printed_at_tp2():
    # tensorrtllm_backend#577, first post (#576 the same log): a Meta-Llama-3-8B-Instruct int4 AWQ engine by
    # quantize.py at TP 2 prints "TensorRT-managed allocation … now: CPU 0, GPU 2723 (MiB)" per rank. By ModelOpt's
    # layout: int4 layers 3,489,660,928 params / 2 × 0.5 B = 1,664 MiB, float16 scales per 128 = 52 MiB, lm_head and
    # the split embedding 501 MiB each, rotary table 4 MiB → 2,722.5 MiB. The plan counts vLLM's AWQ layout, whose 4-bit
    # zero points add 13 MiB: 2,731.5 + 4 = 2,735.5 MiB (+0.46%).
    w, _ = weight_bytes_per_gpu(LLAMA3_AWQ, 2, include_rope_cache=False)
    assert (w + trtllm_rope_table_bytes(LLAMA3_AWQ)) / MiB == pytest.approx(2735.5078)
    # A later comment of #577 (the library's turn 2; its config.pbtxt's gpt_model_path names meta_llama_3_1_8B_instruct)
    # logs an engine with maxSequenceLen 1,048,576 = 131,072 × the "llama3" factor 8 (build.py's max_seq_len when none
    # is given) and "Loaded engine size: 8231 MiB" per rank; as a Llama-3.1-8B-Instruct engine: 16-bit
    # tensors split over 2 ranks 7,658.5 MiB + the 64 MiB table = 7,722.5 (the split embedding, the point) to
    # 8,223.5 MiB (convert_checkpoint.py's whole embedding, 501 MiB more) — 7.5 MiB (0.09%) under the printed 8,231 —
    # and the weights' transferred spread on top (+0.25%, transferred_ranges.weights_range: 7,722.5 × 1.0025 + 501 =
    # 8,242.8 MiB), which holds it; a table of 1,048,576 positions (512 MiB) would not fit either end.
    s = make_settings(engine="trtllm", engine_version="0.13.0", tp=2, max_model_len=8192)
    m = build_plan(LLAMA31, get_gpu("H100"), s, with_roofline=False, with_advice=False).memory
    wt = next(d for d in m.deductions if d.name == "weights")
    assert (wt.bytes / MiB, wt.high_bytes / MiB) == pytest.approx((7722.5078, 7722.5078 * 1.0025 + 501))
    assert wt.low_bytes / MiB < 8231 < wt.high_bytes / MiB
    ar = next(d for d in m.deductions if d.name.startswith("custom all-reduce"))
    assert (ar.bytes, ar.low_bytes) == (68 * MiB, 0)  # B 2,048 (trtllm-build's default) × 8,192 × 4,096 × 4 > W


def test_no_engine_constants_on_the_pytorch_backend():
    # the PyTorch backend (1.x) holds no TensorRT engine: weights as the checkpoint's tensors, no all-reduce term here
    s = make_settings(engine="trtllm", engine_version="1.2.1", tp=2, max_model_len=8192)
    m = build_plan(LLAMA31, get_gpu("H100"), s, with_roofline=False, with_advice=False).memory
    wt = next(d for d in m.deductions if d.name == "weights")
    assert wt.bytes == 8_030_527_488 and not any(d.name.startswith("custom all-reduce") for d in m.deductions)
