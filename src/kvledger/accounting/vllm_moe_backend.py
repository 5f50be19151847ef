"""Which FP8 MoE kernel vLLM picks for a block-quantized (128×128) FP8 checkpoint on Hopper, release by release, and so
whether the fused-MoE workspace is still held after the profile forward (the "kept" workspace of
``vllm_profile.moe_workspace_bytes``) or freed with the forward.

Read in each release's code (``quantization/fp8.py::get_fp8_moe_backend`` up to 0.13,
``fused_moe/oracle/fp8.py::select_fp8_moe_backend`` from 0.14), TP only (no expert parallelism), default env:

* 0.11.2: DeepGEMM first when ``deep_gemm`` is installed (VLLM_USE_DEEP_GEMM and VLLM_MOE_USE_DEEP_GEMM default 1);
  ``deep_gemm_moe_fp8`` runs a ``FusedMoEModularKernel``, whose ``SharedResizableBuffer`` workspaces stay allocated.
  Without ``deep_gemm`` (not a vLLM dependency), Triton's ``fused_experts`` allocates its caches per call and frees
  them: nothing kept. The plan cannot know what is installed: point kept, range down to 0.
* 0.13.0: "DeepGEMM MoE is disabled by default when TP size is >= 8": at TP ≥ 8 the plain Triton ``fused_experts``
  (freed: nothing kept); below, DeepGEMM when installed (kept via the workspace manager), else Triton (freed).
* 0.14.1: "Setup modular kernel for TP case": every backend runs the modular kernel, whose workspaces come from the
  workspace manager and are kept (Triton at TP ≥ 8, DeepGEMM below when installed).
* 0.16.0: the oracle tries FlashInfer CUTLASS before DeepGEMM and Triton, and FlashInfer CUTLASS supports
  (kFp8Static128BlockSym, kFp8Dynamic128Sym) on SM 9.0 (``flashinfer_cutlass_moe.py``); flashinfer-python is a vLLM
  dependency (0.16.0 pins 0.6.3). Its ``workspace_shapes`` are (M, K) and (0,): M × hidden × dtype bytes kept.
* 0.18.0, 0.19.0: "On Hopper for Block Fp8, prefer Triton for TP": Triton's modular kernel, kept.
* Expert parallelism (read in 0.19.0, 0.28.0, 0.29.0, 0.33.0): the same comment ends "and FI CUTLASS for EP": with
  ``ep_size > 1`` FlashInfer CUTLASS goes to the front, so a TP × EP rank keeps its (M, K) workspace, M × hidden × d
  (for DeepSeek-V3 at 8,192 tokens 0.109 GiB against Triton's 1.75 GiB). The same with DP ranks (EP = TP × DP > TP):
  the oracle looks at ``ep_size`` only and ``FlashInferExperts._supports_parallel_config`` accepts any (0.19.0,
  0.33.0); M is then the rows gathered from every DP rank (``vllm_dp_moe.py``): DeepSeek-V3 DP 8, 65,536 × 7,168 × 2
  B = 0.875 GiB.

Releases between the read ones (0.12, 0.15, 0.17) take the rule of the nearest read release below them, with the
range widened to cover the neighbours' choices; other GPUs, other quantizations and releases before 0.11 or after
0.19 keep ``moe_workspace_bytes``'s rule, except on Blackwell from 0.18 (``blackwell_block_fp8``): the oracle's list
(``_get_priority_backends``, 0.18.0) starts with FlashInfer TRT-LLM, which supports block FP8 on the SM 10.x family
(``experts/trtllm_fp8_moe.py``; flashinfer-python is a dependency, 0.18.0 pins 0.6.6). Its monolithic kernel comes
first and takes DeepSeek-V3 routing only (``get_routing_method_type``: an ``e_score_correction_bias`` with expert
groups and sigmoid scoring): no vLLM workspace at all. Other routings get the modular kernel, whose workspaces are
"managed by flashinfer" ((0,) and (0,)) and whose output (M, K) is kept: M × hidden × d, as FlashInfer CUTLASS.
0.19 on Blackwell is not read: the range reaches up to Triton's kept workspaces.
"""

from __future__ import annotations

from kvledger.catalog.modelspec import ModelSpec

__all__ = ["EP_FLASHINFER_READ", "fp8_block_moe_on_hopper", "blackwell_block_fp8", "moe_workspace_term"]

EP_FLASHINFER_READ = ((0, 19, 0), (0, 33, 0))
"""The releases read with the expert-parallel rule (0.19.0, 0.28.0, 0.29.0, 0.33.0, ``fused_moe/oracle/fp8.py``
``_get_priority_backends``): on SM 9.0, block FP8, ``ep_size > 1`` moves FlashInfer CUTLASS to the front (TP alone:
Triton); the releases between them are taken to keep it."""


def fp8_block_moe_on_hopper(model: ModelSpec, arch: str) -> bool:
    """A block-quantized FP8 MoE checkpoint on an SM 9.0 GPU: the case this module's rule covers."""
    return model.is_moe and model.quant.method == "fp8" and model.quant.block is not None and arch == "sm90"


def blackwell_block_fp8(model: ModelSpec, arch: str) -> bool:
    """A block-quantized FP8 MoE checkpoint on an SM 10.x GPU (``is_device_capability_family(100)``)."""
    return (model.is_moe and model.quant.method == "fp8" and model.quant.block is not None
            and arch.startswith("sm10") and len(arch) == 5)


def moe_workspace_term(model: ModelSpec, ver: tuple[int, int, int], arch: str, tp: int, num_tokens: int,
                       kept_bytes: float, default_bytes: float, ep: int = 1,
                       fi_bytes: float | None = None) -> tuple[float, float, float, str]:
    """(point, low, high) B of fused-MoE workspace held after the profile forward, and why; ``num_tokens``: the rows
    the MoE layer runs (DP × tokens under DP + EP, ``vllm_dp_moe.moe_profile_rows``).

    ``kept_bytes`` is the Triton/DeepGEMM workspace (``moe_workspace_bytes`` without its release gate) and
    ``default_bytes`` what ``moe_workspace_bytes`` gives outside this module's case; ``ep``: the expert-parallel size
    (TP × DP under --enable-expert-parallel, ``expert_parallel.ep_size``; 1 without); ``fi_bytes``: FlashInfer
    CUTLASS's kept bytes as chunked up to 0.17 (``vllm_moe_workspace.flashinfer_kept_bytes``), None: M × hidden × d."""
    # FlashInfer CUTLASS: workspace13 (M, K), workspace2 (0,), the output (M, K) sharing workspace13 within one chunk
    fi = num_tokens * model.hidden_size * model.dtype_bytes if fi_bytes is None else fi_bytes
    if fp8_block_moe_on_hopper(model, arch) and ep > 1 and EP_FLASHINFER_READ[0] <= ver <= EP_FLASHINFER_READ[1]:
        return fi, fi, fi, (f"FP8 MoE: FlashInfer CUTLASS first on Hopper block FP8 under expert parallelism "
                            f"(0.19–0.33: \"prefer Triton for TP and FI CUTLASS for EP\"): {num_tokens:,} × "
                            f"{model.hidden_size} × {model.dtype_bytes} B kept")
    if blackwell_block_fp8(model, arch) and (0, 18, 0) <= ver < (0, 20, 0):
        deepseek = any(w.path.endswith("e_score_correction_bias") for w in model.weights)
        pt = 0.0 if deepseek else fi
        hi = pt if ver[:2] == (0, 18) else kept_bytes
        kind = ("monolithic (DeepSeek-V3 routing): nothing kept" if deepseek else
                f"modular: its output {num_tokens:,} × {model.hidden_size} × {model.dtype_bytes} B kept")
        return pt, pt, hi, ("FP8 MoE: FlashInfer TRT-LLM first on Blackwell block FP8 (0.18.0), " + kind
                            + ("" if hi == pt else "; 0.19 not read on Blackwell: up to Triton's kept workspaces"))
    if not fp8_block_moe_on_hopper(model, arch) or not (0, 11, 0) <= ver < (0, 20, 0):
        return default_bytes, default_bytes, default_bytes, ""
    mm = ver[:2]
    if mm == (0, 11):
        return kept_bytes, 0.0, kept_bytes, ("FP8 MoE: DeepGEMM's modular kernel when deep_gemm is installed (kept), "
                                             "else Triton's per-call caches (freed): range down to 0")
    if mm in ((0, 12), (0, 13)):
        unread = " (0.12 not read: 0.13.0's rule, range down to 0)" if mm == (0, 12) else ""
        if tp >= 8:
            return 0.0, 0.0, kept_bytes if unread else 0.0, (
                "FP8 MoE: Triton fused_experts at TP ≥ 8 (DeepGEMM off by default), caches freed" + unread)
        return kept_bytes, 0.0, kept_bytes, ("FP8 MoE: DeepGEMM when installed (kept), else Triton (freed): range "
                                             "down to 0" + unread)
    if mm == (0, 14):
        return kept_bytes, kept_bytes, kept_bytes, "FP8 MoE: the modular kernel for TP (0.14.1), workspaces kept"
    if mm == (0, 15):
        return kept_bytes, fi, kept_bytes, ("FP8 MoE: 0.15 not read: 0.14.1's kept workspaces, range down to "
                                            "0.16.0's FlashInfer CUTLASS (M × hidden)")
    if mm == (0, 16):
        return fi, fi, fi, (f"FP8 MoE: FlashInfer CUTLASS (first supported on SM 9.0 block FP8 in 0.16.0): "
                            f"{num_tokens:,} × {model.hidden_size} × {model.dtype_bytes} B kept" + (
                                "" if fi == num_tokens * model.hidden_size * model.dtype_bytes else
                                f", {fi / (model.hidden_size * model.dtype_bytes):,.0f} rows as chunked "
                                "(VLLM_FUSED_MOE_CHUNK_SIZE: workspace13 apart from the output)"))
    if mm == (0, 17):
        return kept_bytes, fi, kept_bytes, ("FP8 MoE: 0.17 not read: 0.18.0's Triton (kept), range down to 0.16.0's "
                                            "FlashInfer CUTLASS")
    return kept_bytes, kept_bytes, kept_bytes, "FP8 MoE: Triton first on Hopper block FP8 for TP (0.18+), kept"
