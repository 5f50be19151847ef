"""What a trtllm-build engine holds per GPU beyond the checkpoint's tensors, and what the TensorRT-engine executor
allocates per rank at TP > 1 before it sizes the KV cache, each read from TensorRT-LLM's code.

* The rotary table: the build registers the RoPE constants as float32 buffers of the model
  (``tensorrt_llm/layers/attention.py::Attention.create_attention_const_params``, the 0.12–0.13-era copy of the stored
  index that also carries ``reduce_fusion_params``): ``embed_positions`` (the non-plugin path's table),
  ``rotary_inv_freq`` (rotary_dim / 2 floats) and ``embed_positions_for_gpt_attention``, which the GPT attention
  plugin takes as its ``rotary_cos_sin`` input. ``RopeEmbeddingUtils.create_sinusoidal_positions_for_attention_plugin``
  builds it as cos/sin pairs of shape [max_position_embeddings, rotary_dim / 2, 2], reshaped to one row, float32:
  max_position_embeddings × rotary_dim × 4 B, every rank whole (it is not split by TP). The other table feeds no
  output once the plugin does the rotation, so TensorRT drops it from the engine; the plan counts one table.
  ``max_position_embeddings`` is the checkpoint config's (the Hugging Face value: 131,072 for Llama-3.1, 8,192 for
  Llama-3), not trtllm-build's max_seq_len, which the build scales by the RoPE factor when it is not given
  (``commands/build.py``: 131,072 × 8 = 1,048,576 for Llama-3.1's "llama3" scaling). Long-RoPE models (Phi-3) register
  two such tables and MLA models their YaRN table; neither is read here, so one table of rotary_dim is counted.
* The vocabulary embedding at TP > 1: ``examples/*/convert_checkpoint.py`` leaves ``--use_parallel_embedding`` off by
  default (every rank holds the whole table), while ModelOpt's export, which ``examples/quantization/quantize.py``
  calls, writes ``"use_parallel_embedding": True`` (split by vocabulary, ``convert_to_tensorrt_llm_config`` in
  NVIDIA/TensorRT-Model-Optimizer ``modelopt/torch/export/tensorrt_llm_utils.py``). The plan's point keeps the split
  table (as vLLM and the quantized engines hold it); the high end holds it whole.
* The custom all-reduce workspace: at TP > 1 ``TrtGptModelInflightBatching`` calls ``createCustomAllReduceWorkspace``
  before ``createBuffers`` (so the "runtime buffers" line does not count it) and before the KV sizing.
  ``AllReduceBuffers`` (``runtime/ipcUtils.cpp``) makes four IPC buffers with ``cudaMalloc``
  (``BufferManager::gpuSync``), each rounded up to 2 MiB: two of tp × min(B × beam × max_seq_len × hidden × 4 B, W)
  and two flag buffers of ``FLAGS_SIZE`` × tp × 2 B (a few KiB, so 2 MiB each); W =
  ``customAllReduceUtils::getMaxRequiredWorkspaceSize``: 16,000,000 B at TP ≤ 2, 8,000,000 B above. ``IpcMemory``
  allocates nothing when the ranks cannot reach each other by P2P or span nodes (the low end, 0). Later copies add
  three Lamport buffers (a seven-buffer layout, and a 64 MiB W) whose token threshold was not read: not modelled.
"""

from __future__ import annotations

import math

from kvledger.accounting.memory import Deduction
from kvledger.catalog.modelspec import ModelSpec
from kvledger.units import MiB

__all__ = ["ALLREDUCE_ALIGN", "allreduce_max_workspace", "trtllm_allreduce_term", "trtllm_allreduce_workspace_bytes",
           "trtllm_embedding_replica_bytes", "trtllm_rope_table_bytes", "trtllm_rotary_dim"]

ALLREDUCE_ALIGN = 2 * MiB
"""``IpcMemory::allocateIpcMemory`` rounds every IPC buffer up to 1 << 21 B (``common::alignSize``)."""


def trtllm_rotary_dim(model: ModelSpec) -> int:
    """Rotary dimensions per head (head_dim × partial_rotary_factor; MLA's qk_rope_head_dim), 0 without RoPE: read
    back from the model's RoPE cache size (``rope_cache_bytes`` = positions × rotary_dim × dtype bytes)."""
    per_dim = model.derived_max_model_len * model.dtype_bytes
    return model.rope_cache_bytes // per_dim if per_dim and model.rope_cache_bytes else 0


def trtllm_rope_table_bytes(model: ModelSpec) -> int:
    """The engine's ``embed_positions_for_gpt_attention`` constant: max_position_embeddings × rotary_dim × 4 B
    (float32), whole on every rank (module doc); 0 for a model without RoPE."""
    return model.max_position_embeddings * trtllm_rotary_dim(model) * 4


def trtllm_embedding_replica_bytes(model: ModelSpec, tp: int) -> float:
    """What a rank holds beyond its share when the vocabulary embedding is not split (convert_checkpoint.py's default,
    module doc): the input embedding's bytes × (1 − 1/tp), B; 0 at TP 1."""
    if tp <= 1:
        return 0.0
    emb = sum(model.quant.bytes_of(w, model.dtype_bytes) for w in model.weights
              if "embed" in w.path.split(".")[-2] and w.tp == "shard")
    return emb * (1 - 1 / tp)


def allreduce_max_workspace(tp: int) -> int:
    """``customAllReduceUtils::getMaxRequiredWorkspaceSize``: 16,000,000 B at TP ≤ 2, 8,000,000 B above."""
    return 16_000_000 if tp <= 2 else 8_000_000


def _align(n: int) -> int:
    return math.ceil(n / ALLREDUCE_ALIGN) * ALLREDUCE_ALIGN


def trtllm_allreduce_workspace_bytes(tp: int, max_batch: int, max_seq_len: int, hidden_size: int,
                                     beam: int = 1) -> int:
    """Per-rank IPC memory of ``AllReduceBuffers`` (module doc), B: 2 × align(tp × min(B·beam·S·H·4, W)) + 2 × 2 MiB
    of flags; 0 at TP 1."""
    if tp <= 1:
        return 0
    data = tp * min(max_batch * beam * max_seq_len * hidden_size * 4, allreduce_max_workspace(tp))
    return 2 * _align(data) + 2 * ALLREDUCE_ALIGN


def trtllm_allreduce_term(model: ModelSpec, tp: int, max_batch: int, max_seq_len: int) -> Deduction:
    """The custom all-reduce workspace as a ledger deduction (low 0: no P2P between the ranks, or ranks on several
    nodes)."""
    b = trtllm_allreduce_workspace_bytes(tp, max_batch, max_seq_len, model.hidden_size)
    return Deduction(f"custom all-reduce workspace (TP {tp}, IPC buffers)", b,
                     "code: runtime/ipcUtils.cpp AllReduceBuffers, 2 × tp × min(batch × max_seq_len × hidden × 4 B, "
                     f"{allreduce_max_workspace(tp):,} B) + 2 flag buffers, each rounded up to 2 MiB",
                     0.0, b, "low: 0 (IpcMemory allocates nothing without P2P between the ranks or across nodes)")
