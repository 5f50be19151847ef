"""Weights as vLLM loads them on one GPU: the checkpoint's tensors under a dtype, a quantization, TP and a PP rank.

This is the figure vLLM logs as "Model loading took X GiB" on each worker: the bytes of the
parameters and buffers the rank allocates (``gpu_model_runner.py::load_model`` measures
``torch.cuda.max_memory_allocated`` after ``empty_cache``, so freed loading temporaries do not count).

* TP: column/row-parallel linears, experts and the vocab-parallel embedding and head divide by TP;
  norms, router gates and MLA's replicated projections are whole on each rank; K/V projections divide
  by KV heads and stop shrinking at one head per rank.
* PP: ``vllm/distributed/utils.py::get_pp_indices`` gives each rank ``layers // pp`` layers, the
  remainder going one each to the ranks before the last; the first rank holds the input embedding, the
  last the final norm and LM head (and the embedding too when it is tied to the head).
* ``--dtype``: unquantized weights, model-dtype scales and the RoPE buffer take the served dtype.
* ``--quantization``: as vLLM takes it against the checkpoint's method (quant_flag.py); ``fp8`` on an unquantized
  checkpoint puts every Linear in FP8 with a per-tensor scale, ``bitsandbytes`` in 4 bits with an fp32 absmax per 64.
  Refused as vLLM refuses them: a GPU below the method's capability or a GPTQ width (quant_rules.py), TP shards that
  do not line up with the quantization groups or blocks (quant_tp.py). FP8 block scales under Marlin: fp8_marlin.py.
* MXFP4 MoE experts are padded as the backend needs (mxfp4_layout.py): Triton rounds the intermediate size up to 64,
  FlashInfer TRT-LLM both sizes up to 256, Marlin the hidden size to 256 and the intermediate size to 128; the
  backend is the caller's (``mxfp4``: vllm_mxfp4_backend.py), else the version's point by GPU.
* Each parameter is one allocation of PyTorch's CUDA caching allocator, which vLLM's measure counts
  whole (``c10/cuda/CUDACachingAllocator.cpp``): sizes round up to 512 B; a request of 10 MiB or more gets
  a segment rounded up to 2 MiB and keeps all of it unless more than 1 MiB is left over (``should_split``).
  Parameters are vLLM's fused ones: q/k/v in one ``qkv_proj``, gate/up in one ``gate_up_proj``, a layer's
  experts in one ``w13``/``w2`` pair. This is what puts Qwen2.5-7B at 14.25 GiB rather than 14.19.
* The rotary cos/sin buffer (``rotary_embedding``: positions × rotary dim in the served dtype) is a
  buffer of every rank that holds attention layers.
* MLA models: the attention backends' module-level workspaces that choosing a backend allocates while the
  model is built (``mla_backend_workspace_bytes``), counted by the same measure.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from kvledger.catalog.expert_placement import expert_share, local_experts
from kvledger.catalog.fp8_marlin import marlin_scales_text, tensor_bytes_as_loaded
from kvledger.catalog.layers import MLAAttention
from kvledger.catalog.modelspec import ModelSpec
from kvledger.catalog.mxfp4_layout import mxfp4_layout_text, mxfp4_marlin_fallback, mxfp4_padded
from kvledger.catalog.quant import QuantScheme
from kvledger.catalog.quant_flag import scheme_for_flag
from kvledger.catalog.quant_rules import check_quant_release
from kvledger.catalog.quant_tp import check_quant_tp
from kvledger.catalog.vllm_load_extras import EVERY_STAGE_EMBED_AND_HEAD, mla_dequant_copy_bytes, rocm_moe_padding_bytes
from kvledger.errors import InputError
from kvledger.ranges import OPTION_RANGES

__all__ = ["LoadedWeights", "loaded_weights", "pp_layer_range", "cuda_allocated_bytes", "mla_backend_workspace_bytes",
           "SERVED_DTYPE_BYTES"]

SERVED_DTYPE_BYTES = {"bfloat16": 2, "float16": 2, "half": 2, "float32": 4, "float": 4}
_LAYER = re.compile(r"\.(?:layers|h)\.(\d+)\.")
_FIRST = ("embed_tokens", "wte", "wpe", "word_embeddings", "embed_positions", "embeddings", "vision_tower",
          "multi_modal_projector",
          "audio_tower", "project_in")
_LAST_ONLY = ("lm_head",)


@dataclass(frozen=True)
class LoadedWeights:
    """One rank's weight memory as vLLM allocates it.

    Attributes:
        bytes: parameters and the RoPE buffer on this rank, B.
        rope_cache_bytes: of which the rotary cos/sin buffer, B.
        dtype: the served dtype; dtype_bytes its size, B.
        quantization: the scheme's one-line description.
        layers: (first, last + 1) decoder layers on this rank.
        how: the arithmetic in words.
        backend_workspace_bytes: of which MLA attention-backend workspaces allocated during loading, B.
        marlin_bytes: the same rank's bytes in the other MXFP4 layout the range reaches (``mxfp4``'s second, or
            Marlin where vLLM takes it without ``triton_kernels``: ``mxfp4_marlin_fallback``), B; 0 elsewhere.
    """

    bytes: float
    rope_cache_bytes: int
    dtype: str
    dtype_bytes: int
    quantization: str
    layers: tuple[int, int]
    how: str
    backend_workspace_bytes: int = 0
    marlin_bytes: float = 0.0


_FUSED_NAME = {"q_proj": "qkv_proj", "k_proj": "qkv_proj", "v_proj": "qkv_proj", "gate_proj": "gate_up_proj",
               "up_proj": "gate_up_proj", "w1": "w13", "w3": "w13"}
_FUSE = re.compile(r"(?<=\.)(q_proj|k_proj|v_proj|gate_proj|up_proj|w1|w3)(?=\.)")
_MiB = 1 << 20


def cuda_allocated_bytes(n: int) -> int:
    """Bytes PyTorch's CUDA caching allocator counts as allocated for one fresh ``n``-byte tensor, B.

    Source: ``c10/cuda/CUDACachingAllocator.cpp``: ``round_size`` (512-B multiples), ``get_allocation_size``
    (requests under 10 MiB share 20 MiB segments; larger ones get a segment rounded up to 2 MiB) and
    ``should_split`` (a large block is split only when more than 1 MiB would remain).
    """
    r = max(512, -(-n // 512) * 512)
    if r < 10 * _MiB:
        return r
    seg = -(-r // (2 * _MiB)) * (2 * _MiB)
    return r if seg - r > _MiB else seg


_MLA_WORKSPACE_BYTES = 128 * _MiB
"""``flashinfer_mla.py::FLASHINFER_MLA_WORKSPACE_BUFFER_SIZE`` and ``cutlass_mla.py``'s ``SM100Workspace(128 * 1024 *
1024)``."""


def mla_backend_workspace_bytes(engine_version: tuple[int, int, int], gpu_arch: str) -> tuple[int, str]:
    """What importing vLLM's MLA attention backends allocates on each GPU while an MLA model is built, B, and why.

    Two backend modules create a uint8 CUDA tensor at import: ``flashinfer_mla.py`` its ``g_fi_workspace``
    (128 MiB) up to 0.24 (0.25 allocates it on first use), and ``cutlass_mla.py`` its ``g_sm100_workspace`` (128 MiB,
    every release read, 0.11–0.33). ``MLAAttention.__init__`` picks a backend inside ``load_model``, so what the
    import allocates is part of "Model loading took". From 0.11.1, ``platforms/cuda.py::get_valid_backends`` imports
    every backend of ``_get_backend_priorities`` to validate it (no early exit): on Blackwell (sm10x) the list holds
    both modules; on other CUDA GPUs FLASHINFER_MLA only, except sm12x from 0.24, which lists Triton and the SM120
    sparse backend. Up to 0.11.0 only the chosen backend is imported: CUTLASS MLA on Blackwell, FlashMLA/FlashAttention
    elsewhere (0.11.0 has no ``get_valid_backends``; 0.11.1 and 0.11.2 have it). DeepSeek-R1 FP8 on H200 at TP 8 prints
    79.58 GiB at 0.11.0 and 79.74 at 0.11.2–0.20 (vme_startups.csv): the 0.16 GiB step is at 0.11.1, not 0.12.
    Releases read: 0.11.0, 0.11.1, 0.11.2, 0.12, 0.13, 0.15, 0.19, 0.22, 0.23, 0.24, 0.25, 0.26, 0.28, 0.33 (earlier
    ones are taken as 0.11.0). An explicit ``--attention-backend`` imports only that backend (not modelled).
    """
    m = re.fullmatch(r"sm(\d+)", gpu_arch or "")
    if not m:
        return 0, ""
    major, v = int(m.group(1)) // 10, tuple(engine_version)
    flashinfer_eager = v < (0, 25, 0)
    if v < (0, 11, 1):
        imported = ["cutlass_mla"] if major == 10 else []
    elif major == 10:
        imported = ["flashinfer_mla", "cutlass_mla"]
    elif major == 12 and v >= (0, 24, 0):
        imported = []
    else:
        imported = ["flashinfer_mla"]
    held = [mod for mod in imported if mod == "cutlass_mla" or flashinfer_eager]
    if not held:
        return 0, ""
    vtxt = ".".join(map(str, v))
    return len(held) * _MLA_WORKSPACE_BYTES, (f"MLA backend workspace{'s' if len(held) > 1 else ''} (128 MiB each, "
                                              f"allocated when "
                                              f"vLLM {vtxt} imports {' and '.join(m + '.py' for m in held)} on "
                                              f"{gpu_arch})")


def pp_layer_range(num_layers: int, pp: int, rank: int) -> tuple[int, int]:
    """Layers [start, end) of PP rank ``rank`` (vLLM ``get_pp_indices``: the remainder goes to the ranks before the
    last)."""
    parts = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        parts[-i] += 1
    start = sum(parts[:rank])
    return start, start + parts[rank]


def _on_rank(path: str, pp: int, rank: int, lo: int, hi: int, tied: bool, every_stage: bool = False) -> bool:
    if pp == 1:
        return True
    m = _LAYER.search(path)
    if m:
        return lo <= int(m.group(1)) < hi
    first, last = rank == 0 or every_stage, rank == pp - 1 or every_stage
    head = path.split(".")
    if any(k in head for k in _LAST_ONLY):
        return last
    if any(k in head for k in _FIRST):
        return first or (tied and last and ("embed_tokens" in head or "wte" in head or "word_embeddings" in head))
    return last  # final norms


def _check_layout(model: ModelSpec, tp: int, pp: int, pp_rank: int) -> None:
    """Whole TP and PP sizes in range, a stage of the pipeline, no more stages than layers; else InputError."""
    if not (isinstance(tp, int) and isinstance(pp, int)) or isinstance(tp, bool) or isinstance(pp, bool):
        raise InputError(f"tensor/pipeline parallel sizes must be whole numbers, got tp={tp!r}, pp={pp!r}")
    OPTION_RANGES["tp"].check("tp", tp)
    OPTION_RANGES["pp"].check("pp", pp)
    if not 0 <= pp_rank < pp:
        raise InputError(f"pp_rank {pp_rank} is not a stage of pp={pp}")
    if pp > model.num_layers:
        raise InputError(f"pipeline parallel size {pp} exceeds {model.name}'s {model.num_layers} layers")


def _served_dtype(model: ModelSpec, dtype: str | None) -> tuple[str, int]:
    """(name, bytes per element) of the dtype vLLM's ``--dtype`` serves the weights in; InputError for another."""
    if dtype in (None, "", "auto"):
        return model.dtype, model.dtype_bytes
    if dtype in SERVED_DTYPE_BYTES:
        return ("float16" if dtype == "half" else "float32" if dtype == "float" else dtype), SERVED_DTYPE_BYTES[dtype]
    raise InputError(f"--dtype {dtype!r}: expected auto, bfloat16, float16 or float32")


def _fused_bytes(model: ModelSpec, weights: list, q: QuantScheme, tp: int, db: int, mx: bool,
                 target: tuple, ep: int = 1) -> tuple[dict, int, int, float]:
    """(bytes of each fused parameter's part on the rank, the quantized MLA kv_b_proj copies' allocated bytes, the
    ROCm MoE padding, the MXFP4 padding, B) of ``weights`` (those on the rank) for ``target`` (GPU arch, vLLM
    version, ROCm or not[, the MXFP4 backend named, or Marlin forced on or off])."""
    gpu_arch, engine_version, rocm, *forced = target
    kv_share = max(1, model.num_kv_heads // tp) / model.num_kv_heads if model.num_kv_heads else 1 / tp
    fused: dict[tuple[str, int], float] = {}
    fused_g_idx: set[str] = set()
    mla_copies = moe_pad = mx_pad = 0
    for w in weights:
        copy = mla_dequant_copy_bytes(w, q, tp, db, engine_version)
        mla_copies += cuda_allocated_bytes(copy) if copy else 0
        moe_pad += rocm_moe_padding_bytes(w, q, tp, db) if rocm else 0
        share = 1 / tp if w.tp == "shard" else (kv_share if w.tp == "kv" else 1.0)
        share = expert_share(model, tp, ep) if w.expert and ep > 1 else share
        if mx and q.converts(w):  # each TP rank's share of a sharded expert padded on its own (mxfp4_padded)
            parts = tp if w.tp == "shard" and not (w.expert and ep > 1) else 1
            padded = mxfp4_padded(w, model, gpu_arch, engine_version, *(forced or [None]), parts=parts)
            mx_pad += (sum(q.tensor_bytes(padded, db)) - sum(q.tensor_bytes(w, db))) * share
            w = padded
        key = _FUSE.sub(lambda m: _FUSED_NAME[m.group(1)], w.path)
        for part, b in enumerate(tensor_bytes_as_loaded(q, w, db, gpu_arch, engine_version, rocm)):
            if b:
                # one g_idx per fused parameter (its input size), not one per member
                if part == 3 and key in fused_g_idx:
                    continue
                fused[(key, part)] = fused.get((key, part), 0.0) + b * share
                if part == 3:
                    fused_g_idx.add(key)
    return fused, mla_copies, moe_pad, mx_pad


def loaded_weights(model: ModelSpec, *, tp: int = 1, pp: int = 1, pp_rank: int = 0, dtype: str | None = None,
                   quantization: str | None = None, gpu_arch: str = "sm90",
                   engine_version: tuple[int, int, int] = (0, 33, 0), rocm: bool = False, ep: int = 1,
                   mxfp4: tuple[str, str] | None = None) -> LoadedWeights:
    """The weight memory vLLM allocates on one GPU (TP rank of PP stage ``pp_rank``), B, with the arithmetic.

    Args:
        tp, pp: tensor- and pipeline-parallel sizes; pp_rank: the stage (0 … pp−1).
        dtype: vLLM's ``--dtype`` (None/"auto": the config's, float32 checkpoints served in bfloat16).
        quantization: vLLM's ``--quantization`` ("fp8" and "bitsandbytes" change an unquantized checkpoint).
        gpu_arch: "sm90" (Hopper), "sm100" (Blackwell), ...: decides MXFP4 MoE padding and MLA backend workspaces.
        engine_version: the vLLM release whose loading rules apply (default 0.33, the newest read).
        rocm: an AMD GPU (vLLM's ROCm MoE padding applies).
        ep: expert-parallel size (``--enable-expert-parallel``, expert_placement.py): routed experts whole, rank 0's.
        mxfp4: (MXFP4 MoE backend vLLM runs, the backend of the range's other end or ""); None: by version, GPU.

    Raises:
        InputError: a parallel layout the model cannot take, an unknown dtype or quantization.
    """
    _check_layout(model, tp, pp, pp_rank)
    dname, db = _served_dtype(model, dtype)
    q = scheme_for_flag(model, quantization, tuple(engine_version))  # quant_flag.py: what vLLM accepts of the flag
    check_quant_release(q, quantization, tuple(engine_version), gpu_arch)
    check_quant_tp(model, q, tp, ep, tuple(engine_version))  # quant_tp.py: shards that vLLM refuses at load
    lo, hi = pp_layer_range(model.num_layers, pp, pp_rank)
    mx = q.method == "mxfp4" or (q.method == "compressed-tensors" and q.bits == 4 and q.group_size == 32)
    every = bool(EVERY_STAGE_EMBED_AND_HEAD.intersection(model.architectures))
    on_rank = [w for w in model.weights if _on_rank(w.path, pp, pp_rank, lo, hi, model.tie_word_embeddings, every)]
    target = (gpu_arch, engine_version, rocm, *([mxfp4[0]] if mxfp4 else []))
    fused, mla_copies, moe_pad, mx_pad = _fused_bytes(model, on_rank, q, tp, db, mx, target, ep)
    total = float(sum(cuda_allocated_bytes(math.ceil(b)) for b in fused.values()))
    rope = model.rope_cache_bytes // model.dtype_bytes * db if any(model.layers[lo:hi]) else 0
    how = f"{model.num_params:,} params ({q.description}; {dname} = {db} B)"
    if tp > 1:
        how += f", split over TP {tp} by tensor (replicated norms/gates/KV heads counted whole)"
    if ep > 1 and model.num_experts:
        how += f"; routed experts whole over EP {ep}: {local_experts(e := model.num_experts, ep)} of {e} on rank 0"
    if pp > 1:
        how += (f", PP stage {pp_rank} of {pp}: layers {lo}–{hi - 1}" + (" + embedding" if every or not pp_rank else "")
                + (" + final norm and LM head" if pp_rank == pp - 1 or every else "")
                + (" (this model class builds both on every stage)" if every else ""))
    if mx and any(w.expert for w in model.weights):
        how += "; " + mxfp4_layout_text(model, gpu_arch, engine_version, mx_pad, 1 if ep > 1 else tp,
                                        mxfp4[0] if mxfp4 else None)
    how += marlin_scales_text(q, on_rank, (gpu_arch, engine_version, rocm), dname)
    if rope:
        how += f" + {rope:,} B RoPE cos/sin buffer"
    mla = any(isinstance(layer, MLAAttention) for layer in model.layers[lo:hi])
    ws, ws_src = mla_backend_workspace_bytes(engine_version, gpu_arch) if mla else (0, "")
    if ws:
        how += f" + {ws:,} B {ws_src}"
    if mla_copies:
        how += f" + {mla_copies:,} B {dname} copies of the quantized MLA kv_b_proj (W_UK/W_UV, vLLM MLA code)"
    if moe_pad:
        how += f" + {moe_pad:,} B ROCm MoE padding (VLLM_ROCM_MOE_PADDING, 256 B per row of 512-B-aligned rows)"
    point = total + rope + ws + mla_copies + moe_pad
    other = (mxfp4[1] if mxfp4 else mxfp4_marlin_fallback(gpu_arch, engine_version) and "marlin") if mx else ""
    alt = point - total + _marlin_total(model, on_rank, q, tp, db, (gpu_arch, engine_version, rocm, other), ep) \
        if other and not rocm else 0.0
    return LoadedWeights(point, rope, dname, db, q.description, (lo, hi), how, ws, alt)


def _marlin_total(model: ModelSpec, on_rank: list, q: QuantScheme, tp: int, db: int, target: tuple, ep: int) -> float:
    """The rank's fused parameters' allocated bytes with the MXFP4 experts in ``target``'s last backend's layout, B."""
    fused = _fused_bytes(model, on_rank, q, tp, db, True, target, ep)[0]
    return float(sum(cuda_allocated_bytes(math.ceil(b)) for b in fused.values()))
