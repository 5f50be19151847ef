"""What SGLang's "Load weight end. ... mem usage" holds beyond the parameters' bytes, from code: the rotary cos/sin
buffer and the caching allocator's segment tails around each per-rank parameter tensor.

``model_runner.py::load_model`` (0.4.1.post7–0.5.5 read) prints the drop in ``torch.cuda.mem_get_info`` free memory
across ``get_model``, after ``torch.cuda.empty_cache``; so what it counts is device segments, not tensor bytes:

  * **the RoPE buffer**: ``layers/rotary_embedding.py::RotaryEmbedding`` registers ``cos_sin_cache``
    (max_position × rotary_dim values, one per model: ``get_rope`` caches it) on the GPU. Up to 0.4.2 it is cast to the
    model dtype; from 0.4.2.post1 it stays float32 on CUDA ("cache needs to be in FP32 for numerical stability";
    read in 0.4.1.post7, 0.4.2: cast; 0.4.2.post1, 0.4.3.post4, 0.4.4.post1, 0.4.6.post4, 0.4.9.post2, 0.5.3, 0.5.5:
    float32). Not on ROCm: the same releases cast it when not ``is_cuda()`` (``torch.version.cuda`` set), and a ROCm
    build of PyTorch has ``torch.version.hip`` instead, so on an AMD GPU it is in the model dtype in every release.
  * **segment tails**: each parameter is one ``torch.empty`` on the device, in the fused layout SGLang's layers build
    (``QKVParallelLinear`` q/k/v in one tensor, ``MergedColumnParallelLinear`` gate/up in one, ``FusedMoE`` all of a
    layer's experts in ``w13_weight`` and ``w2_weight``), each rank's shard its own allocation; the allocator
    (``cuda_segments.py``) rounds a tensor of 10 MiB or more up to 2 MiB, and the tail is held while the tensor lives.
    QwQ-32B at TP 4: o_proj 5,120 × 1,280 × 2 B = 12.5 MiB takes a 14 MiB segment; q/k/v 17.5 → 18, gate/up 135 → 136,
    down 67.5 → 68; 3.5 MiB a layer, 224 MiB over 64 layers (tests/accounting/test_sglang_load.py).

Not modelled: the rope computation's float32 temporaries (freed; later tensors may reuse their segments), vocab
padding to 64 rows (the planned vocabularies are multiples of 64 × TP), expert parallelism.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from kvledger.accounting.cuda_segments import segment_bytes
from kvledger.catalog.layers import kv_heads_per_gpu
from kvledger.catalog.modelspec import ModelSpec

__all__ = ["SglangLoadBuffers", "SGLANG_ROPE_FP32_FROM", "sglang_load_buffers", "sglang_rank_tensors"]

SGLANG_ROPE_FP32_FROM = (0, 4, 2, 1)
"""First SGLang release whose ``RotaryEmbedding`` keeps ``cos_sin_cache`` in float32 on CUDA (0.4.2 casts it)."""

_FUSED = {"q_proj": "qkv_proj", "k_proj": "qkv_proj", "v_proj": "qkv_proj",
          "gate_proj": "gate_up_proj", "up_proj": "gate_up_proj", "w1": "w13", "w3": "w13"}
"""Hugging Face module names SGLang loads into one tensor (``packed_modules_mapping`` / ``stacked_params_mapping``)."""
_LEAF = re.compile(r"^(?P<mod>.*)\.(?P<leaf>[^.]+)\.(?P<param>weight|bias)$")


@dataclass(frozen=True)
class SglangLoadBuffers:
    """The computed part of SGLang's load: the RoPE buffer and the segment tails, B, with the arithmetic."""

    rope_bytes: int
    tail_bytes: int
    rope_how: str
    tail_how: str


def _group_key(path: str) -> str:
    m = _LEAF.match(path)
    if not m:
        return path
    leaf = m["leaf"]
    if ".experts." in path and leaf in ("gate_proj", "up_proj"):
        leaf = "w13"
    return f"{m['mod']}.{_FUSED.get(leaf, leaf)}.{m['param']}"


def sglang_rank_tensors(model: ModelSpec, tp: int, shared_copies: int = 0) -> list[int]:
    """One rank's parameter tensors in build order, fused as SGLang's layers fuse them: values, scales, zero points
    and group indices of a quantized weight are separate tensors; B each. ``shared_copies``: copies of the shared
    expert SGLang clones into the fused MoE (sglang_shared_fusion.py), each 1/tp, in the experts' tensors."""
    kv_share = kv_heads_per_gpu(model.num_kv_heads, tp) / model.num_kv_heads if model.num_kv_heads else 1 / tp
    groups: dict[tuple[str, int], float] = {}
    for w in model.weights:
        share = 1 / tp if w.tp == "shard" else (kv_share if w.tp == "kv" else 1.0)
        fused = shared_copies and ".shared_experts." in w.path and not w.expert
        key = _group_key(w.path.replace(".shared_experts.", ".experts.*.") if fused else w.path)
        share *= shared_copies if fused else 1
        for part, b in enumerate(model.quant.tensor_bytes(w, model.dtype_bytes)):
            if b:
                groups[(key, part)] = groups.get((key, part), 0.0) + b * share
    return [int(round(b)) for b in groups.values()]


@lru_cache(maxsize=64)
def _rank_tensors(model: ModelSpec, tp: int, shared_copies: int = 0) -> tuple[int, ...]:
    """``sglang_rank_tensors`` kept per (model, TP): a search or a replay plans one model many times, and matching
    each weight against a checkpoint's modules_to_not_convert list dominates the cost."""
    return tuple(sglang_rank_tensors(model, tp, shared_copies))


def sglang_load_buffers(model: ModelSpec, tp: int, version: tuple[int, ...], rocm: bool = False,
                        shared_copies: int = 0) -> SglangLoadBuffers:
    """The RoPE buffer (float32 from 0.4.2.post1 on CUDA, else the model dtype) and the segment tails of one rank's
    parameters and that buffer, B. ``rocm``: an AMD GPU (SGLang casts the buffer to the model dtype there);
    ``shared_copies``: the shared expert's copies in the fused MoE (sglang_shared_fusion.py)."""
    positions_x_dims = model.rope_cache_bytes // model.dtype_bytes if model.dtype_bytes else 0
    elem = 4 if version >= SGLANG_ROPE_FP32_FROM and not rocm else model.dtype_bytes
    rope = int(positions_x_dims * elem)
    tensors = _rank_tensors(model, tp, shared_copies)
    sizes = [*tensors[:1], rope, *tensors[1:]]  # the embedding, then the first layer (whose attention builds the rope)
    tail = segment_bytes(sizes) - sum(s for s in sizes if s > 0)
    why = "cast on ROCm, " if rocm and elem != 4 else ""
    rope_how = (f"{positions_x_dims:,} values (max positions × rotary dims) × {elem} B "
                f"({'float32' if elem == 4 else model.dtype}, {why}layers/rotary_embedding.py)")
    tail_how = (f"{len(tensors):,} per-rank tensors in SGLang's fused layout, each in PyTorch caching-allocator "
                "segments (≥ 10 MiB rounded up to 2 MiB, 1–10 MiB packed in 20 MiB, ≤ 1 MiB in 2 MiB; "
                "cuda_segments.py)")
    return SglangLoadBuffers(rope, max(tail, 0), rope_how, tail_how)
