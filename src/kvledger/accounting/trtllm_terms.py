"""TensorRT-LLM's memory terms the config cannot give, and the low–high range of its KV plan.

What the code says (``_torch/pyexecutor/_util.py::KvCacheCreator``, 0.20 and 1.x; ``py_executor_creator.py``): the
PyTorch backend builds a first executor with a small KV pool (enough blocks for the dummy requests), warms it up
(autotuner, then CUDA graphs for every ``cuda_graph_config`` batch size, largest first), then resets torch's peak
statistics and runs dummy context requests of min(max_num_tokens, max_seq_len − 1) tokens each, max_num_tokens in
all, one output token each. peak = torch's allocated peak + (device used − torch allocated, after ``empty_cache``:
"NCCL and CUDA graphs"), kv_mem = (total − peak + the small pool's bytes) × free_gpu_memory_fraction, so the temporary
pool cancels out. The device-wide "used" makes three things part of the peak that a per-process profile would not
see: the CUDA graphs' private pool (captured before the estimate and not released by ``empty_cache``), the CUDA
context and library workspaces, and whatever other processes hold on the GPU. The TensorRT-engine executor (before
1.0) takes the fraction of the free memory after the engine, its runtime buffers and its decoder load
(``kvCacheManager.cpp``); those are sized from the code by the runtime max batch size, vocabulary and max_seq_len
(``trtllm_engine_buffers``).

Terms here: the CUDA-graph pool (PyTorch backend, from the code: the largest captured batch's decode step), the
memory the Windows display driver (WDDM, also under WSL2) holds on a GPU whose whole board CUDA reports, and one fitted
term for what remains on the PyTorch backend (CUDA context, workspaces), with its data and leave-one-out error.
Ranges: available KV = (total − Σ terms) × fraction at each end (the device total's range, each term's low/high);
blocks, tokens and concurrency follow TensorRT-LLM's own pool rules (``engine_pools.trtllm_window_pools``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from kvledger.accounting import notes as N
from kvledger.accounting.memory import Deduction
from kvledger.accounting.overheads import NON_TORCH_BYTES, forward_peak_bytes, trtllm_plain_mlp
from kvledger.accounting.settings import PlanSettings
from kvledger.accounting.transferred_ranges import dry_run_activation_range, non_torch_range, weights_range
from kvledger.accounting.trtllm_engine_buffers import (
    TRTLLM_BUILD_MAX_BATCH,
    engine_activation_range,
    trtllm_engine_buffer_terms,
)
from kvledger.accounting.trtllm_engine_weights import (
    trtllm_allreduce_term,
    trtllm_embedding_replica_bytes,
    trtllm_rope_table_bytes,
    trtllm_rotary_dim,
)
from kvledger.accounting.trtllm_version import trtllm_before
from kvledger.accounting.wddm import wddm_held_term
from kvledger.accounting.weightmem import weight_bytes_per_gpu
from kvledger.catalog.gpus import GpuSpec
from kvledger.catalog.modelspec import ModelSpec
from kvledger.errors import InputError
from kvledger.units import GiB

__all__ = ["TRTLLM_EXTRA_GIB", "TRTLLM_GRAPH_MAX_BATCH", "check_trtllm_only", "trtllm_extra_term",
           "trtllm_graph_batch", "trtllm_graph_pool_term", "trtllm_items", "trtllm_ranges"]

TRTLLM_GRAPH_MAX_BATCH = 128
"""``CudaGraphConfig.max_batch_size`` 0 → 128 (``llmapi/llm_args.py``, 0.20 to 1.2): the largest CUDA graph the
PyTorch backend captures by default. ``trtllm-bench`` sets it to its max_batch_size (with padding) instead
(``bench/benchmark/utils/general.py::get_settings``); pass ``--cuda-graph-max-batch-size`` for such a run."""

TRTLLM_EXTRA_GIB = (0.36, 0.86, 1.36)
"""(low, point, high) GiB of the memory the PyTorch backend's logs show beyond the terms the code sizes (weights,
forward peak, 0.13 GiB non-torch, the CUDA-graph pool, the WDDM hold): the CUDA context, cuBLAS/attention workspaces
and other non-torch memory of the process. Data: benchmarks/data/trtllm_public_startups.csv, residual = total −
printed KV ÷ fraction − those terms (``analyses/doctor/trtllm_startups.trtllm_residual_gib``;
tests/analyses/test_trtllm_startups.py re-fits it): TR01/TR02 (one set-up: SmolLM2-135M, RTX 4070 SUPER under WSL2,
1.2.1) 0.699 and 0.685 GiB against the WDDM hold fitted on the board size (``wddm.WDDM_HOLD_FIT``: 0.73 GiB on this
12 GiB board), TR06 (Llama-3.1-8B FP8, H100, 0.20.0) 1.033 GiB; point = mean of the two set-ups 0.86 GiB;
leave-one-out error ±0.34 GiB (each set-up predicted by the other; ±0.05 when the hold was Linux's 450 MiB reserve,
which the WDDM corpus shows too small). Range ±0.5 GiB about the point (0.36–1.36): two set-ups only, on two GPUs,
assumed for a CUDA context on other GPUs, drivers and versions (the vLLM corpus shows non-torch memory from 0.13 to
0.55 GiB on one GPU, TP 1). The TensorRT-engine executor has no such fitted remainder any more: its runtime buffers
and decoder are sized from the code (``trtllm_engine_buffers``; the 3.52 GiB this term held for it, leave-one-out
±2.70 GiB, is gone)."""


#: settings only TensorRT-LLM's plan reads: (flag, PlanSettings attribute, its value when not given)
_TRTLLM_ONLY = (("--cuda-graph-max-batch-size", "cuda_graph_max_batch_size", None),
                ("--no-cuda-graph", "no_cuda_graph", False), ("--logits-dtype", "trtllm_logits_dtype", None))
#: of those, the PyTorch backend's CUDA-graph settings (the TensorRT-engine executor has no cuda_graph_config)
_PYTORCH_ONLY = ("cuda_graph_max_batch_size", "no_cuda_graph")
#: the same two settings in SGLang's words (its decode CUDA graphs, sglang_graphs.py)
_SGLANG_NAMES = {"--cuda-graph-max-batch-size": "--cuda-graph-max-bs", "--no-cuda-graph": "--disable-cuda-graph"}


def check_trtllm_only(s: PlanSettings, gpu: GpuSpec | None = None, runtime: str | None = None) -> None:
    """Refuse the TensorRT-LLM-only settings where the plan would ignore them or count them wrongly: with another
    engine; the CUDA-graph settings on the TensorRT-engine runtime (``runtime`` "tensorrt": its graphs are the
    engine's, sized at build). --wddm, which every engine's plan reads, is checked by ``wddm_engines.check_wddm``.

    Raises:
        InputError: one of those.
    """
    given = [flag for flag, attr, off in _TRTLLM_ONLY if getattr(s, attr) != off
             and not (s.engine == "sglang" and attr in _PYTORCH_ONLY)]  # SGLang's graph flags: sglang_graphs.py
    if s.engine != "trtllm" and given:
        them = "it" if len(given) == 1 else "them"
        sglang = [_SGLANG_NAMES[f] for f in given if f in _SGLANG_NAMES]
        raise InputError(f"{', '.join(given)}: TensorRT-LLM's memory plan only reads {them}"
                         + (f" (SGLang's: {', '.join(sglang)})" if sglang else "")
                         + f"; drop {them} with --engine {s.engine}, or use --engine trtllm"
                         + (" or sglang" if sglang else ""))
    if s.engine != "trtllm":
        return
    graph = [flag for flag, attr, off in _TRTLLM_ONLY if attr in _PYTORCH_ONLY and getattr(s, attr) != off]
    if runtime == "tensorrt" and graph:
        why = ("trtllm_backend tensorrt" if s.trtllm_backend == "tensorrt"
               else f"--engine-version {s.engine_version}, before 1.0")
        raise InputError(f"{', '.join(graph)}: the PyTorch backend's cuda_graph_config; the TensorRT-engine executor "
                         f"({why}) has no such setting and the plan would ignore it: drop it, or plan the PyTorch "
                         f"backend (--engine-version 1.0 or later)")
    if runtime == "pytorch" and s.trtllm_logits_dtype is not None:
        raise InputError("--logits-dtype: the TensorRT engine's logits dtype sizes the TensorRT-engine executor's "
                         "runtime buffers and decoder; the PyTorch backend has neither: drop it, or plan the "
                         "TensorRT engine (--engine-version before 1.0)")
    if s.cuda_graph_max_batch_size is not None and s.no_cuda_graph:
        raise InputError("--cuda-graph-max-batch-size sizes the CUDA graphs that --no-cuda-graph turns off: give one")


def trtllm_graph_batch(max_batch_size: int, cuda_graph_max_batch_size: int | None) -> int:
    """The largest batch the PyTorch backend captures a CUDA graph for: ``cuda_graph_config.max_batch_size`` (128 by
    default) but no larger than the executor's max_batch_size (the capture runs real decode requests)."""
    return min(cuda_graph_max_batch_size or TRTLLM_GRAPH_MAX_BATCH, max_batch_size)


def trtllm_graph_pool_term(model: ModelSpec, tp: int, batch: int) -> Deduction:
    """The CUDA graphs' private pool at the estimate, B: graphs are captured largest first into one shared pool and
    keep only weak references to their outputs (``cuda_graph_runner.py``), so the pool holds the largest graph's decode
    step: its activations (``forward_peak_bytes`` over ``batch`` tokens) and its logits (batch × vocab in the model
    dtype; the LM head's output is gathered to the full vocabulary on every rank). Low: the logits alone (activation
    blocks reused); high: 1.5 × (workspaces captured with the graph, not measured). The plan takes it unless
    --no-cuda-graph: ``TorchLlmArgs.cuda_graph_config`` defaults to ``CudaGraphConfig()`` (graphs on) in the 1.x
    llm_args.py read, while a 0.20-era llm_args.py had ``use_cuda_graph: bool = Field(default=False)`` (LLM() and
    trtllm-serve eager unless asked; trtllm-bench turns graphs on); which 0.x releases shipped that default is not
    pinned, so the term is not gated by version."""
    logits = batch * model.vocab_size * model.dtype_bytes
    pt = forward_peak_bytes(model, batch, tp, trtllm_plain_mlp(model)) + logits
    return Deduction(f"CUDA-graph pool (largest captured batch {batch})", pt,
                     "model: a decode step of the largest graph (activations + logits), captured before the estimate;"
                     " assumes graphs on (cuda_graph_config's default from 1.0; some 0.20-era TorchLlmArgs had "
                     "use_cuda_graph False, trtllm-bench turns them on): --no-cuda-graph if the run had none",
                     logits, 1.5 * pt, "low: logits alone; high: 1.5 × (capture-time workspaces, not measured)")


def trtllm_extra_term() -> Deduction:
    """The PyTorch backend's fitted term beyond the sized ones (``TRTLLM_EXTRA_GIB``) as a ledger deduction."""
    lo, pt, hi = (g * GiB for g in TRTLLM_EXTRA_GIB)
    return Deduction("CUDA context and workspaces outside torch (fitted)", pt,
                     "fit: mean residual of 2 public set-ups' printed KV memory (public TensorRT-LLM start-up logs "
                     "TR01/TR02 0.692, TR06 1.033 GiB; leave-one-out error ±0.34 GiB)",
                     lo, hi, "0.36 to 1.36 GiB (two set-ups; ±0.5 GiB assumed for other GPUs, drivers and versions)")


def trtllm_ranges(model: ModelSpec, tp: int, elem_bytes: float, max_seq_len: int, tokens_per_block: int, runtime: str,
                  round_up: bool, fraction: float, total_low: float, total_high: float,
                  terms: Sequence[Deduction], given_available: float | None = None) -> dict[str, tuple[float, float]]:
    """Low/high of available KV (B), the full-attention pool's blocks and tokens, and concurrency at max_seq_len.

    ``terms``: the deductions taken before the fraction (not the reserve). Given the engine's printed KV memory, the
    range is its 2-decimal rounding (± 0.005 GiB)."""
    # lazy: a vLLM plan imports this module for check_trtllm_only alone (engine_pools' two dataclasses: ~1 ms to make)
    from kvledger.accounting.engine_pools import trtllm_window_pools

    if given_available is not None:
        shown = round(given_available / GiB, 2)
        ends = [max(0.0, (shown - 0.005) * GiB), (shown + 0.005) * GiB]
    else:
        ends = []
        for total, pick in ((total_low, "high_bytes"), (total_high, "low_bytes")):
            free = total - sum(getattr(t, pick) for t in terms)
            ends.append(free * fraction if free > 0 else free)
    pools = [trtllm_window_pools(model, tp, elem_bytes, max_seq_len, a, tokens_per_block, runtime, round_up)[-1]
             for a in ends]
    per_req = math.ceil(max_seq_len / tokens_per_block)
    return {"available_kv_bytes": (float(ends[0]), float(ends[1])),
            "num_gpu_blocks": (pools[0].blocks, pools[1].blocks),
            "pool_tokens": (pools[0].max_tokens, pools[1].max_tokens),
            "max_concurrency": (pools[0].blocks / per_req, pools[1].blocks / per_req)}


def _sized_terms(model: ModelSpec, s: PlanSettings, runtime: str, gpu: GpuSpec | None) -> tuple[Deduction, ...]:
    """Terms the code sizes beyond weights and the forward: the CUDA-graph pool (PyTorch backend, unless
    --no-cuda-graph) and the WDDM hold (fitted on the board size of ``gpu``)."""
    out: tuple[Deduction, ...] = ()
    if runtime == "pytorch" and not s.no_cuda_graph:
        batch = trtllm_graph_batch(s.max_num_seqs or 2048, s.cuda_graph_max_batch_size)
        out += (trtllm_graph_pool_term(model, s.tp, batch),)
    return out + ((wddm_held_term(gpu),) if s.wddm else ())


def _before_0_13(version: str | None) -> bool:
    """A release before 0.13 ("0.12.0.dev2024073000" → True; the text was checked by ``plan_other.trtllm_runtime``)."""
    return trtllm_before(version, (0, 13))


def _weights_term(model: ModelSpec, s: PlanSettings, runtime: str, arch: str = "") -> Deduction:
    """The weights as the runtime holds them: the checkpoint's tensors (``weightmem``, without vLLM's RoPE cache); a
    TensorRT engine adds its float32 rotary table and, at TP > 1, may hold the vocabulary embedding whole on every rank
    (the high end; ``trtllm_engine_weights``). A given --weights-memory replaces it."""
    if s.weights_bytes is not None:
        return Deduction("weights", s.weights_bytes, "given")
    w, how = weight_bytes_per_gpu(model, s.tp, include_rope_cache=False)
    if runtime != "tensorrt":
        return Deduction("weights", w, f"computed: {how}", *weights_range(model, w, arch, "TensorRT-LLM"))
    rope, replica = trtllm_rope_table_bytes(model), trtllm_embedding_replica_bytes(model, s.tp)
    if rope:
        how += (f" + {rope:,} B rotary table (max_position_embeddings {model.max_position_embeddings:,} × rotary dim "
                f"{trtllm_rotary_dim(model)} × 4 B float32, layers/attention.py embed_positions_for_gpt_attention)")
    lo, hi, why = weights_range(model, w + rope, arch, "TensorRT-LLM")
    return Deduction("weights", w + rope, f"computed: {how}", lo, hi + replica,
                     why if not replica else why + "; high also: the vocabulary embedding whole on every rank "
                     "(convert_checkpoint.py leaves --use_parallel_embedding off; ModelOpt's quantize.py export splits "
                     "it, the point)")


def trtllm_items(model: ModelSpec, s: PlanSettings, runtime: str, max_num_tokens: int, max_seq_len: int,
                 gpu: GpuSpec | None = None) -> tuple[Deduction, ...]:
    """The deductions before the fraction. Both runtimes: weights, the forward over max_num_tokens. PyTorch backend:
    the non-torch memory, the CUDA-graph pool, the fitted rest. TensorRT-engine executor: the engine's rotary table in
    its weights, its activations (with their range), its runtime buffers and decoder sized from the code, the custom
    all-reduce workspace at TP > 1 (``trtllm_engine_weights``), and the fitted uncounted rest
    (``trtllm_engine_buffers``); a given --non-torch-memory replaces that rest. Both: the WDDM hold on ``gpu`` under
    --wddm."""
    given_act = s.activation_peak_bytes is not None
    plain = runtime == "pytorch" and trtllm_plain_mlp(model)  # the PyTorch backend's model files (overheads)
    act = s.activation_peak_bytes if given_act else forward_peak_bytes(model, max_num_tokens, s.tp, plain)
    if given_act:
        act_range: tuple[float, float, str] = (act, act, "")
    elif runtime == "pytorch":
        act_range = dry_run_activation_range(act)
    else:
        act_range = (*engine_activation_range(act), N.TRTLLM_ENGINE_ACTIVATION_RANGE)
    items = (_weights_term(model, s, runtime, gpu.arch if gpu is not None else ""),
             Deduction(N.trtllm_activation(runtime), act,
                       "given" if given_act else f"model: forward over max_num_tokens {max_num_tokens}"
                       + ("; plain MLP, fc1's output and its activation's (2·I/TP, TensorRT-LLM _torch/modules/mlp.py)"
                          if plain else ""),
                       *act_range))
    if runtime == "tensorrt":
        batch, old = s.max_num_seqs or TRTLLM_BUILD_MAX_BATCH, _before_0_13(s.engine_version)
        runtime_buf, decoder, other = trtllm_engine_buffer_terms(model, s.tp, batch, max_seq_len, old_release=old,
                                                                 logits_dtype=s.trtllm_logits_dtype)
        if s.non_torch_bytes is not None:
            other = Deduction("non-torch memory", s.non_torch_bytes, "given")
        allreduce = (trtllm_allreduce_term(model, s.tp, batch, max_seq_len),) if s.tp > 1 else ()
        return items + (runtime_buf, decoder) + allreduce + (other,) + _sized_terms(model, s, runtime, gpu)
    nt = ((s.non_torch_bytes, s.non_torch_bytes, "") if s.non_torch_bytes is not None else non_torch_range())
    items += (Deduction("non-torch memory", s.non_torch_bytes if s.non_torch_bytes is not None else NON_TORCH_BYTES,
                        "given" if s.non_torch_bytes is not None else N.TRTLLM_NON_TORCH, *nt),)
    return items + _sized_terms(model, s, runtime, gpu) + (trtllm_extra_term(),)
