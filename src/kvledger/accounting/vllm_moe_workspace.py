"""The routed experts' fused-MoE workspaces in vLLM's profile forward, per GPU, with and without expert parallelism.

Two eras, read in the code:

* from 0.15 (``fused_moe/modular_kernel.py::_allocate_buffers``, ``fused_moe.py::TritonExperts.workspace_shapes``;
  read in 0.15–0.33) the workspaces come from the workspace manager and stay allocated after the forward:
  workspace1 (M, top_k, max(N/2, K)) and workspace2 (M, top_k, max(N, K)) in the activations' dtype, kept through
  the sampler (``kept_workspace_bytes``; ``vllm_moe_backend`` picks the FP8 kernel where it differs). Up to 0.17
  M is the chunk, min(rows, VLLM_FUSED_MOE_CHUNK_SIZE: 16,384 from 0.12) (``_chunk_info``: Triton and DeepGEMM
  experts' ``supports_chunking``, VLLM_ENABLE_FUSED_MOE_ACTIVATION_CHUNKING on by default), and past one chunk the
  output (rows, K) is a buffer of its own beside them (``_allocate_buffers``: reused from workspace13 only at one
  chunk); 0.18 has no chunking (M = the rows);
* up to 0.14 the plain Triton path (read in 0.11.0: ``fused_moe/fused_moe.py::fused_experts_impl``) allocates its
  caches on each call and frees them with it: ``cache13`` = M·top_k·max(N, K) elements (``intermediate_cache1``, (M,
  top_k, N), and ``intermediate_cache3``, (M, top_k, K), share it: cache3 is written after cache1 is read) and
  ``intermediate_cache2`` = (M·top_k, N/2), with M = min(tokens, VLLM_FUSED_MOE_CHUNK_SIZE) (``envs.py``: 32,768 by
  default in 0.9.2–0.11.0, 16 × 1024 = 16,384 in 0.12.0–0.14.0; longer batches run in chunks over the same caches).
  The output is written in place (``fused_moe/layer.py::UnquantizedFusedMoEMethod.forward_cuda`` passes
  ``inplace=True``). A transient of the forward only (``transient_workspace_bytes``): it raises the forward's peak,
  not the sampler's.

Both take N = 2·I_local (w13's rows: gate and up) and K = hidden. I_local is the layer's
``intermediate_size_per_partition`` = I // tp_size (``fused_moe/layer.py::FusedMoE.__init__``): I/TP without expert
parallelism, but under ``--enable-expert-parallel`` ``fused_moe/config.py::FusedMoEParallelConfig.make`` sets the MoE
layers' tp_size to 1 (EP size TP × DP), so each rank's experts are whole, I_local = I, and every token-expert pair
holds the whole expert's intermediate: the same M·top_k pairs (with DP 1 every rank sees every token and the
expert map routes the pairs of other ranks' experts to no work, ``fused_experts_impl``'s ``expert_map``).
"""

from __future__ import annotations

from kvledger.accounting.vllm_moe_backend import moe_workspace_term
from kvledger.catalog.modelspec import ModelSpec

__all__ = ["FUSED_MOE_CHUNK_SIZE", "fused_moe_chunk_size", "moe_dims", "moe_local_intermediate",
           "kept_workspace_bytes", "MODULAR_CHUNKED", "DP_EP_FULL_CHUNK", "profile_full_chunk", "flashinfer_kept_bytes",
           "moe_workspace_bytes", "moe_workspace", "transient_workspace_bytes", "transient_workspace"]

FUSED_MOE_CHUNK_SIZE = 32768
"""``VLLM_FUSED_MOE_CHUNK_SIZE``'s default in vLLM 0.11.0 (``envs.py``: ``os.getenv(..., "32768")``; its type stub
says 64 × 1024, but the default read is 32,768): the tokens one ``fused_experts_impl`` chunk sizes its caches for."""
FUSED_MOE_CHUNK_SIZE_16K_FROM = (0, 12, 0)
"""The first release read whose default is ``str(16 * 1024)`` (``envs.py`` in 0.12.0, 0.13.0, 0.14.0; 0.9.2–0.11.0:
"32768")."""


def fused_moe_chunk_size(ver: tuple[int, int, int]) -> int:
    """``VLLM_FUSED_MOE_CHUNK_SIZE``'s default in vLLM ``ver``: 32,768 up to 0.11, 16,384 from 0.12 (``envs.py``,
    read in 0.12.0–0.17.0; gone from 0.18.0)."""
    return 16 * 1024 if tuple(ver) >= FUSED_MOE_CHUNK_SIZE_16K_FROM else FUSED_MOE_CHUNK_SIZE


def moe_dims(model: ModelSpec) -> tuple[int, int]:
    """(routed expert intermediate size, shared-expert intermediate size per layer) of a MoE model, elements."""
    inter = max((w.rows for w in model.weights if w.expert and w.path.endswith("up_proj.weight")),
                default=model.intermediate_size)
    shared = sum(w.rows for w in model.weights if "shared_expert" in w.path and w.path.endswith("up_proj.weight"))
    return inter, shared // max(1, model.num_layers)


def moe_local_intermediate(model: ModelSpec, tp: int, ep: int = 1) -> float:
    """A rank's routed-expert intermediate size, elements: I/TP, or the whole I under expert parallelism (``ep`` > 1;
    ``fused_moe/layer.py::FusedMoE.__init__``: I // tp_size, tp_size 1 under EP, vLLM 0.11.0)."""
    return moe_dims(model)[0] / (1 if ep > 1 else tp)


MODULAR_CHUNKED = ((0, 11, 0), (0, 17, 99))
"""The releases whose modular kernel sizes its kept workspaces for one chunk of VLLM_FUSED_MOE_CHUNK_SIZE rows
(``fused_moe_chunk_size``; ``modular_kernel.py::_chunk_info`` and ``_allocate_buffers``, read in 0.11.2–0.17.0; 0.11.0's
``_maybe_chunk_fused_experts`` alike, the output in its own ``SharedResizableBuffer``; 0.18.0 has neither the variable
nor the chunking; every 0.17.x patch release taken as 0.17.0). Before 0.15 it matters only where a modular kernel runs
(``vllm_moe_backend``: FP8 on Hopper)."""


DP_EP_FULL_CHUNK = ((0, 12, 0), MODULAR_CHUNKED[1])
"""The releases whose profile run reserves a whole chunk when the modular kernel carries a DP × EP parallel config
(``modular_kernel.py::FusedMoEModularKernel._allocate_buffers``, read in 0.12.0, 0.13.0, 0.14.0, 0.15.0, 0.16.0 and
0.17.0; absent from 0.11.2. 0.12.0 tests the global ``parallel_config`` (data_parallel_size > 1 and
enable_expert_parallel) and grows its three ``SharedResizableBuffer`` s, the same bytes; 0.13.0 on, the kernel's own
``moe_parallel_config``, which ``FusedMoEModularMethod.make`` passes from 0.13.0. With no
attention metadata (the profile's dummy run), ``fused_experts.enable_chunking()`` and ``is_dp_ep`` (dp_size > 1 and
use_ep), it first asks the workspace manager for ``workspace_shapes(VLLM_FUSED_MOE_CHUNK_SIZE, …)``'s workspace13,
workspace2 and output at once, "worst-case" since the routed rows may not reach a rank in the profile; the chunk is
VLLM_FUSED_MOE_CHUNK_SIZE, 16,384, not VLLM_MOE_DP_CHUNK_SIZE, 256, which sizes only the batched formats'
max_num_tokens). ``v1/worker/workspace.py::WorkspaceManager`` keeps one buffer grown to the largest request, so the
kept bytes are the larger of that and the regular call's. 0.18.0 has no chunking."""


def profile_full_chunk(model: ModelSpec, ver: tuple[int, int, int], dp: int, ep: int, backend: str | None) -> bool:
    """Whether vLLM ``ver``'s profile run reserves the whole-chunk workspace (``DP_EP_FULL_CHUNK``) on a GPU of a
    DP × EP deployment (``dp`` > 1, ``ep`` > 1) with all2all ``backend`` (None: the default, gathering one).

    The kernel carries the parallel config (``is_dp_ep``) where it is built with it: ``fused_moe_modular_method.py::
    FusedMoEModularMethod.make`` for an all2all-kernel backend (0.13.0–0.17.0; 0.12.0 reads the global config, so every
    modular kernel there: of its gathering-backend ones, the FP8 DeepGEMM kernel when deep_gemm is installed, not
    modelled here), of which deepep_high_throughput runs
    the standard-format Triton/DeepGEMM experts (``supports_chunking`` True; pplx's and deepep_low_latency's batched
    experts return False), and the FP8 and NVFP4 oracles (``oracle/fp8.py::make_fp8_moe_kernel``,
    ``oracle/nvfp4.py``, 0.15.0–0.17.0; 0.14.0's build theirs without it) for the gathering backends: fp8.py's and
    modelopt.py's checkpoints ("fp8", "nvfp4" here). compressed_tensors_moe.py's FP8/NVFP4 MoE take the oracles too,
    but a compressed-tensors scheme here does not tell float from int weights: left out. The unquantized oracle
    passes none (0.15.0–0.17.0)."""
    if not (model.is_moe and dp > 1 and ep > 1 and DP_EP_FULL_CHUNK[0] <= tuple(ver) <= DP_EP_FULL_CHUNK[1]):
        return False
    if backend == "deepep_high_throughput":
        return model.quant.method != "mxfp4"
    oracle = model.quant.method in ("fp8", "nvfp4") and tuple(ver) >= (0, 15, 0)
    return oracle and backend in (None, "allgather_reducescatter", "naive")


def kept_workspace_bytes(model: ModelSpec, num_tokens: int, tp: int, ep: int = 1,
                         ver: tuple[int, int, int] | None = None, full_chunk: bool = False) -> float:
    """The modular kernel's workspaces, B: M × top_k × (max(I_local, h) + max(2·I_local, h)) × d; with ``ver`` in
    ``MODULAR_CHUNKED`` and more rows than a chunk C (``fused_moe_chunk_size``), C × top_k × (…) × d + rows × h × d
    (module doc). ``full_chunk`` (``profile_full_chunk``): the profile's whole-chunk reservation, C × top_k × (…) × d
    + C × h × d, when larger."""
    i, h = moe_local_intermediate(model, tp, ep), model.hidden_size
    per_row = model.experts_per_token * (max(i, h) + max(2 * i, h)) * model.dtype_bytes
    chunk = fused_moe_chunk_size(ver) if ver is not None else num_tokens
    if ver is None or not MODULAR_CHUNKED[0] <= tuple(ver) <= MODULAR_CHUNKED[1]:
        return num_tokens * per_row
    if full_chunk:
        return chunk * per_row + max(num_tokens, chunk) * h * model.dtype_bytes
    if num_tokens <= chunk:
        return num_tokens * per_row
    return chunk * per_row + num_tokens * h * model.dtype_bytes


def flashinfer_kept_bytes(model: ModelSpec, num_tokens: int, ver: tuple[int, int, int],
                          full_chunk: bool = False) -> float:
    """FlashInfer CUTLASS's kept workspace, B: ``workspace_shapes`` (M, K), (0,) and output (M, K)
    (``flashinfer_cutlass_moe.py::FlashInferExperts``, 0.16.0, 0.17.0; ``supports_chunking`` True in 0.14.0–0.17.0).
    In ``MODULAR_CHUNKED`` releases past one chunk C, workspace13 (C, K) and the output (M, K) are apart (C + M) ×
    h × d; within one, the output reuses workspace13: M × h × d; ``full_chunk``: at least 2·C × h × d (the
    profile's whole chunk, ``DP_EP_FULL_CHUNK``). 0.18 on: M × h × d."""
    hd = model.hidden_size * model.dtype_bytes
    if not MODULAR_CHUNKED[0] <= tuple(ver) <= MODULAR_CHUNKED[1]:
        return num_tokens * hd
    chunk = fused_moe_chunk_size(ver)
    if full_chunk:
        return (chunk + max(num_tokens, chunk)) * hd
    return (num_tokens + (chunk if num_tokens > chunk else 0)) * hd


def moe_workspace_bytes(model: ModelSpec, ver: tuple[int, int, int], num_tokens: int, tp: int = 1,
                        ep: int = 1, full_chunk: bool = False) -> float:
    """The fused-MoE workspaces kept by vLLM's workspace manager after the forward (so still held during the sampler),
    B: ``kept_workspace_bytes`` with M = the profiled tokens. 0 for dense models, before 0.15 (the per-call caches
    are freed: ``transient_workspace_bytes``) unless ``full_chunk`` (0.14's modular kernel under deepep_high_throughput
    keeps its workspace-manager buffer) and for MXFP4 experts (gpt-oss's own MoE kernels; its pre-0.17 H100
    log, 7.38 GiB, is reproduced within 0.01 GiB without this term)."""
    if not model.is_moe or (ver < (0, 15, 0) and not full_chunk) or model.quant.method == "mxfp4":
        return 0.0
    return kept_workspace_bytes(model, num_tokens, tp, ep, ver, full_chunk)


def moe_workspace(model: ModelSpec, ver: tuple[int, int, int], num_tokens: int, tp: int, arch: str,
                  ep: int = 1, dp: int = 1, backend: str | None = None) -> tuple[float, float, float, str]:
    """(point, low, high) B of fused-MoE workspace held after the forward, and why: the FP8 MoE backend each release
    picks for block FP8 on Hopper (``vllm_moe_backend``), else ``moe_workspace_bytes``; ``dp`` and the all2all
    ``backend``: the profile's whole-chunk reservation under DP × EP (``profile_full_chunk``)."""
    full = profile_full_chunk(model, ver, dp, ep, backend)
    kept = kept_workspace_bytes(model, num_tokens, tp, ep, ver, full) if model.is_moe else 0.0
    fi = flashinfer_kept_bytes(model, num_tokens, ver, full)
    pt, lo, hi, why = moe_workspace_term(model, ver, arch, tp, num_tokens, kept,
                                         moe_workspace_bytes(model, ver, num_tokens, tp, ep, full), ep, fi)
    if full and pt:
        c = fused_moe_chunk_size(ver)
        why = (why + "; " if why else "") + (
            f"DP × EP profile run: the modular kernel reserves a whole {c:,}-row chunk (VLLM_FUSED_MOE_CHUNK_SIZE, "
            f"fused_moe/modular_kernel.py::_allocate_buffers, vLLM {'.'.join(map(str, ver))})")
    return pt, lo, hi, why


def transient_workspace_bytes(model: ModelSpec, ver: tuple[int, int, int], num_tokens: int, tp: int = 1,
                              ep: int = 1) -> float:
    """The Triton ``fused_experts_impl`` caches of one MoE layer's call (vLLM 0.11.0, module docstring), B:
    min(M, chunk) × top_k × (max(2·I_local, h) + I_local) × d; 0 for dense models, MXFP4 experts and from 0.15
    (the modular kernel's kept workspaces instead, ``moe_workspace_bytes``)."""
    if not model.is_moe or ver >= (0, 15, 0) or model.quant.method == "mxfp4":
        return 0.0
    i, h = moe_local_intermediate(model, tp, ep), model.hidden_size
    m = min(num_tokens, fused_moe_chunk_size(ver))
    return m * model.experts_per_token * (max(2 * i, h) + i) * model.dtype_bytes


def transient_workspace(model: ModelSpec, ver: tuple[int, int, int], num_tokens: int, tp: int = 1,
                        ep: int = 1) -> tuple[float, str]:
    """``transient_workspace_bytes`` and the words the activation term prints for it ("" when 0)."""
    b = transient_workspace_bytes(model, ver, num_tokens, tp, ep)
    if not b:
        return 0.0, ""
    i = moe_local_intermediate(model, tp, ep)
    m = min(num_tokens, fused_moe_chunk_size(ver))
    per = (f"whole experts, I {i:,.0f} (expert parallel: the MoE layers' tp_size 1, fused_moe/config.py::"
           f"FusedMoEParallelConfig.make)" if ep > 1 else f"I/TP {i:,.0f}")
    return b, (f"+ fused-MoE caches {m:,} tokens × top-{model.experts_per_token} × (max(2·{i:,.0f}, "
               f"{model.hidden_size:,}) + {i:,.0f}) × {model.dtype_bytes} B ({per}; freed after each call: "
               f"fused_moe/fused_moe.py::fused_experts_impl, chunked by VLLM_FUSED_MOE_CHUNK_SIZE "
               f"{fused_moe_chunk_size(ver):,}, envs.py of vLLM {'.'.join(map(str, ver))})")
