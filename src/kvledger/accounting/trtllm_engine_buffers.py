"""What the TensorRT-engine executor (TensorRT-LLM before 1.0, trtllm-build engines) allocates before it sizes the KV
cache, term by term from its C++ code, each with its low–high range from the public logs that print it.

The order (``batch_manager/trtGptModelInflightBatching.cpp``, the ``TrtGptModelInflightBatching`` constructor, read in
the 2024–2025 copies of the stored index; the same order and log lines in the 0.12.0.dev walkthrough
``benchmarks/Suite.md`` and the memory FAQ ``docs/source/reference/memory.md``): ``TllmRuntime`` deserializes the engine
("Loaded engine size": weights and constants) and allocates its device memory ("Allocated X MiB for execution context
memory": the engine's activations, fixed at build by its max_num_tokens); ``createBuffers`` ("Allocated X GPU memory for
runtime buffers"); ``createDecoder`` ("Allocated X GPU memory for decoder"); then
``BaseKVCacheManager::calculateFreeMemBytes`` (``kvCacheManager.cpp``) synchronizes, reads cudaMemGetInfo's free memory
plus what the runtime's stream-ordered pool holds unused (``BufferManager::memoryPoolFree``), prints it ("Memory usage
when calculating max tokens in paged kv cache: total, available") and gives the KV cache free_gpu_memory_fraction of it
(``KvCacheConfig::kDefaultGpuMemFraction`` 0.9 unless set; with max_tokens also set, the smaller).
``MemoryCounters::bytesToString`` prints binary units with decimal labels ("GB" = GiB). The 0.19 source itself was not
readable here (the snapshot is too large; the index holds other versions of each file): the layouts below are the copies
read, checked against the logs that print them. Copies read (NVIDIA/TensorRT-LLM, commit as the stored index gave it):
trtGptModelInflightBatching.cpp @00825c4e, runtimeBuffers.cpp @092a5a15, decoderBuffers.cpp @000a01de,
decodingLayerWorkspace.cpp @1a43c7d6, samplingLayer.cpp @03961722, topPSamplingLayer.cpp @04a2cacb, penaltyLayer.cpp
@05316d33 (the IAllocator era, its own runtime logits) and a later BufferManager-era copy, decoderState.cpp,
samplingTopKKernels.h and the Triton backend's model_instance_state.cc (no commit given).

Terms (B = the runtime max batch size, beam the max beam width, 1 in the plan, V = vocab_size padded to a multiple of
the world size, ``ModelConfig::getVocabSizePadded``, S = max_seq_len, T = the engine's logits dtype size):

* the logits dtype: ``PretrainedConfig.logits_dtype`` ('float32' unless the checkpoint's config or trtllm-build's
  ``--logits_dtype`` says otherwise), the decoder's dtype too (``createDecoder`` takes the engine's "logits" tensor
  type). Checkpoints exported by ModelOpt, which TensorRT-LLM's ``examples/quantization/quantize.py`` calls
  (``export_tensorrt_llm_checkpoint``), carry "float16" for a bfloat16 model and the model dtype otherwise
  (NVIDIA/TensorRT-Model-Optimizer ``modelopt/torch/export/tensorrt_llm_utils.py::convert_to_tensorrt_llm_config``
  @09914046, and the same line in the NVIDIA/Model-Optimizer copy): T = 2 for such engines, 4 for
  ``convert_checkpoint.py``'s (--logits-dtype float16 in the plan).

* runtime buffers: the engine's logits output, [B × beam, V] in the engine's logits dtype, float32 unless built with
  --logits_dtype float16 (``runtimeBuffers.cpp::setMaxBufferSizes``: numLogits = B × max(1 + draft, beam); ``reshape``
  pre-allocates it at that size), and per-sequence output buffers made in the same ``createBuffers``: one
  ``SlotDecoderBuffers`` per slot (output ids int32 and log-probs float32 [beam, S], ``decoderBuffers.cpp``), plus, in
  the releases whose ``createBuffers`` also builds a device ``DecoderBuffers`` (cache indirection and its own copies,
  before the host-only ``DecoderOutputBuffers``), 16 B more: 24 B × B × beam × S. Two public logs print exactly this:
  the memory FAQ's "43.29 MB" (B 256, V 32,000, S 2,048: 256 × (4 × 32,000 + 24 × 2,048) B = 43.25 MiB) and
  NVIDIA/TensorRT-LLM#1188's "2.66 GB" (Qwen2.5-Coder-0.5B, B 2,048, V 151,936, S 32,768: 2,048 × (4 × 151,936 + 24 ×
  32,768) B = 2.660 GiB). At T = 2 the logits take 2 B per entry.
* decoder: ``DecodingLayerWorkspace`` (``runtime/decodingLayerWorkspace.cpp``: runtime logits [B, 1, beam, V] ×
  sizeof(T), T the logits dtype, and one scratch buffer the size of the largest layer workspace: top-K's, whose
  ``getTopKWorkspaceSizes`` (``kernels/samplingTopKKernels.h``) is sizeof(T) × B × V of temporary log-probs plus B ×
  1,024 (TOP_K_MAX) × 8 blocks × (4 + sizeof(T)) B of candidates; air top-P's, the default top-P, is about V/32 per
  row); the penalty layer's occurrence workspace, int32 [B, 1, beam, V] (``layers/penaltyLayer.cpp``; every sampling
  and beam-search decoding mode uses penalties, ``DecodingMode``); ``DecoderState``'s embedding bias [B, V] × sizeof(T)
  and its per-sequence outputs (``runtime/decoderState.cpp::reshapeBuffers``: ids, parent ids, log-probs [B, beam, S]
  and tiled log-probs [S, B, beam], 4 B each). At beam 1 and float32 logits: 16 B × B × V + 65,536 B × B + 16 B × B ×
  S. #1188 prints "5.76 GB": 2,048 × (16 × 151,936 + 65,536 + 16 × 32,768) B = 5.762 GiB. The memory FAQ's older
  executor prints "180.30 MB" = 256 × (20 × 32,000 + 65,536 + 16 × 2,048) B = 180.25 MiB: its penalty layer kept its
  own runtime logits (4 B more per entry, the IAllocator-era ``penaltyLayer.cpp``).
* the rest no executor counter prints (the CUDA context, TensorRT's and the GEMM libraries' workspaces, another process
  on the GPU): the one fitted term, from the two public logs that print every other line.
"""

from __future__ import annotations

import math

from kvledger.accounting.memory import Deduction
from kvledger.catalog.modelspec import ModelSpec
from kvledger.units import GiB

__all__ = ["TRTLLM_ACTIVATION_HIGH", "TRTLLM_BUILD_MAX_BATCH", "TRTLLM_ENGINE_OTHER_GIB", "engine_activation_range",
           "logits_bytes", "trtllm_decoder_bytes", "trtllm_engine_buffer_terms", "trtllm_logits_bytes",
           "trtllm_runtime_buffer_bytes", "vocab_padded"]

TRTLLM_BUILD_MAX_BATCH = 2048
"""trtllm-build's default max_batch_size (``BuildConfig.max_batch_size``, 0.11 on); the executor's max batch size is
the engine's unless the runtime sets a smaller one (the plan's --max-num-seqs)."""

_LOGITS_BYTES = {"float32": 4, "float16": 2}
"""T by logits dtype: ``PretrainedConfig.logits_dtype`` defaults to 'float32' (tensorrt_llm/models/modeling_utils.py);
ModelOpt's export writes 'float16' for bfloat16 models (module doc)."""


def logits_bytes(dtype: str | None) -> int:
    """T, B per logit: 4 (float32, the default when ``dtype`` is None) or 2 (float16)."""
    return _LOGITS_BYTES[dtype or "float32"]


def _top_k_row_bytes(t: int) -> int:
    """B per sequence slot of top-K's candidate buffers: TOP_K_MAX 1,024 × 8 blocks per beam × (int32 id + T-sized
    value) (``getTopKWorkspaceSizes``): 65,536 B at float32, 49,152 B at float16."""
    return 1024 * 8 * (4 + t)

_RUNTIME_PER_SEQ_TOKEN = (8, 24, 24)
"""(low, point, high) runtime-buffer B per B·beam·S element beside the logits: 24 as both public logs print it, 8 in
the newest copy read (only the per-slot output ids and log-probs on the device)."""

def _decoder_per_logit(t: int) -> tuple[int, int, int]:
    """(low, point, high) decoder B per B·beam·V element at T B per logit: point 3T + 4 from the code (runtime logits T,
    top-K's temporary log-probs T, the int32 occurrence-penalty workspace 4, embedding bias T), 16 at float32, checked
    exactly by #1188's print; high 4T + 4, the memory FAQ's older executor (its penalty layer's own runtime logits,
    20 at float32); low 2T + 4, one T-sized buffer fewer, for the releases whose decoder source was not read (0.19
    among them: its tag is not in the stored index)."""
    return 2 * t + 4, 3 * t + 4, 4 * t + 4

_OLD_RELEASE_HIGH = 1.48
"""Releases before 0.13: the decoder's and the runtime buffers' high ends × 1.48. The 0.12.0.dev walkthrough
(benchmarks/Suite.md, B 4,096, V 32,000, S 4,098) printed "Allocated 4.35 GB GPU memory for decoder" where the 20-B
layout gives 2.94 GiB (1.48×) and "1.14 GB … for runtime buffers" where the 24-B layout gives 0.863 GiB (1.32×): a
development build whose layout no copy read explains, and a walkthrough whose KV line does not fit Llama-2-7B
(229,376 B per token where 32 FP8 layers give 262,144; trtllm_public_startups.SOURCES.md), so a bound, not a point."""

TRTLLM_ENGINE_OTHER_GIB = (0.3, 0.773, 3.1)
"""(low, point, high) GiB in use at the KV sizing that no executor counter prints (CUDA context, TensorRT's and the
GEMM libraries' workspaces, whatever else holds the GPU), with the engine as TensorRT holds it ("TensorRT-managed
allocation … now: GPU N MiB"). Data: the two public logs that print every other line: the memory FAQ's H100 log
(NVIDIA/TensorRT-LLM docs/source/reference/memory.md, a C++ executor): 79.10 − 70.48 − (6,678 + 1,134.01 + 43.29 +
180.30) / 1,024 = 0.773 GiB, the point; the 0.12.0.dev trtllm-bench walkthrough (benchmarks/Suite.md, a Python
process with its own CUDA context, FP8 engine with 6 optimization profiles): 79.10 − 63.62 − (6,166 + 928.77) /
1,024 − 1.14 − 4.35 = 3.062 GiB, the high end (rounded up). Leave-one-out: each predicts the other to ±2.29 GiB.
Low 0.3 GiB: a CUDA context alone (assumed). Both logs are TP 1; the one TP-2 start-up of the corpus (TR08,
tensorrtllm_backend#577) leaves 1.45 GiB once the all-reduce workspace is taken (NCCL's buffers are in it): inside the
range, out of sample, not fitted."""

TRTLLM_ACTIVATION_HIGH = 1.5
"""The engine activation's high end as a multiple of the modelled forward over max_num_tokens: TensorRT sizes it at
build (``ICudaEngine.device_memory_size_v2``, the largest profile) from its own fusion and scheduling; the one public
check, Llama-2-7B FP8 at max_num_tokens 8,192, printed 928.77 MiB where the model gives 836 MiB (+11%,
benchmarks/Suite.md), and the memory FAQ warns FP8 GEMMs can need more than the optimum: 1.5× is assumed."""


def vocab_padded(model: ModelSpec, tp: int) -> int:
    """``ModelConfig::getVocabSizePadded(worldSize)``: vocab_size rounded up to a multiple of the world size."""
    return math.ceil(model.vocab_size / tp) * tp


def trtllm_logits_bytes(model: ModelSpec, tp: int, max_batch: int, beam: int = 1, t: int = 4) -> int:
    """The engine's logits buffer, [max_batch × beam, V] × T B (``runtimeBuffers.cpp``), B."""
    return max_batch * beam * vocab_padded(model, tp) * t


def trtllm_runtime_buffer_bytes(model: ModelSpec, tp: int, max_batch: int, max_seq_len: int, beam: int = 1,
                                per_seq_token: int = _RUNTIME_PER_SEQ_TOKEN[1], t: int = 4) -> int:
    """The runtime buffers (module doc), B: the logits + per_seq_token × B·beam·S."""
    return trtllm_logits_bytes(model, tp, max_batch, beam, t) + per_seq_token * max_batch * beam * max_seq_len


def trtllm_decoder_bytes(model: ModelSpec, tp: int, max_batch: int, max_seq_len: int, beam: int = 1,
                         per_logit: float | None = None, t: int = 4) -> float:
    """The decoder's buffers (module doc), B: per_logit (default 3T + 4) × B·beam·V + the top-K candidates per slot +
    16 B × B·beam·S."""
    rows = max_batch * beam
    per = _decoder_per_logit(t)[1] if per_logit is None else per_logit
    return per * rows * vocab_padded(model, tp) + _top_k_row_bytes(t) * max_batch + 16 * rows * max_seq_len


def engine_activation_range(point: float) -> tuple[float, float]:
    """(low, high) of the engine's activation memory around the modelled forward, B."""
    return point, TRTLLM_ACTIVATION_HIGH * point


def trtllm_engine_buffer_terms(model: ModelSpec, tp: int, max_batch: int, max_seq_len: int, beam: int = 1,
                               old_release: bool = False, logits_dtype: str | None = None) -> tuple[Deduction, ...]:
    """The runtime buffers, the decoder and the uncounted rest as ledger deductions with their ranges;
    ``old_release``: a release before 0.13 (wider high ends, ``_OLD_RELEASE_HIGH``); ``logits_dtype``: the engine's
    (None: float32)."""
    widen = _OLD_RELEASE_HIGH if old_release else 1.0
    old = "; × 1.48 before 0.13 (a 0.12.0.dev log, TensorRT-LLM's benchmarks/Suite.md)" if old_release else ""
    t, name = logits_bytes(logits_dtype), logits_dtype or "float32"
    r_lo, r_pt, r_hi = (trtllm_runtime_buffer_bytes(model, tp, max_batch, max_seq_len, beam, b, t)
                        for b in _RUNTIME_PER_SEQ_TOKEN)
    runtime = Deduction(
        f"executor runtime buffers (logits {max_batch:,} × {vocab_padded(model, tp):,} {name}, outputs)", r_pt,
        f"code: runtimeBuffers.cpp logits [max_batch × beam, vocab padded] {name} + 24 B per slot × max_seq_len "
        "(decoderBuffers.cpp), as the memory FAQ's log and a public TensorRT-LLM start-up log print them", r_lo,
        widen * r_hi,
        "low: 8 B per slot × max_seq_len (the newest copy's decoder outputs on the host)" + old)
    d_lo, d_pt, d_hi = (trtllm_decoder_bytes(model, tp, max_batch, max_seq_len, beam, b, t)
                        for b in _decoder_per_logit(t))
    decoder = Deduction(
        f"decoder buffers ({max_batch:,} slots, {name} logits)", d_pt,
        f"code: decodingLayerWorkspace.cpp, samplingTopKKernels.h, penaltyLayer.cpp, decoderState.cpp: {3 * t + 4} B "
        "per slot × vocab entry + top-K candidates + 16 B per slot × max_seq_len (as a public TensorRT-LLM log "
        "prints it at float32)", d_lo, widen * d_hi, f"low: {2 * t + 4} B per vocab entry (one buffer fewer, assumed "
        f"for unread releases such as 0.19); high: {4 * t + 4} B (the memory FAQ's older executor)" + old)
    o_lo, o_pt, o_hi = (g * GiB for g in TRTLLM_ENGINE_OTHER_GIB)
    other = Deduction(
        "CUDA context and memory no executor counter prints (fitted)", o_pt,
        "fit: the memory FAQ's H100 log, total − available − engine − execution context − runtime buffers − decoder "
        "= 0.773 GiB (TensorRT-LLM's docs/source/reference/memory.md); leave-one-out ±2.29 GiB against the "
        "0.12.0.dev walkthrough", o_lo, o_hi,
        "0.3 GiB (a CUDA context, assumed) to 3.1 GiB (TensorRT-LLM's benchmarks/Suite.md trtllm-bench process)")
    return runtime, decoder, other
