"""FP8 block-quantized linear layers (``weight_block_size`` 128×128 weight scales, 1×128 activation scales, the
DeepSeek-V3/R1 and Qwen3-FP8 format): the kernel vLLM 0.33 picks per compute capability, the precision its MMA runs
in, and the block-scaled GEMM's efficiency as a stated range.

vLLM 0.33 ``model_executor/kernels/linear/__init__.py``: ``init_fp8_linear_kernel`` sends per-group activation scales
to ``choose_scaled_mm_linear_kernel``, which takes the first of ``_POSSIBLE_FP8_BLOCK_KERNELS[CUDA]`` whose
``is_supported`` and ``can_implement`` pass:

 1. FlashInfer swap-AB below 32 rows / DeepGEMM from 32 (``scaled_mm/flashinfer.py``), 2. DeepGEMM alone
    (``scaled_mm/deep_gemm.py``) — both need sm90, the sm100 or the sm120 family (``platforms/cuda.py ::
    support_deep_gemm``), ``VLLM_USE_DEEP_GEMM`` (default 1, ``envs.py``) and the deep_gemm package;
 3. CUTLASS block-scaled (``scaled_mm/cutlass.py``; ``cutlass_scaled_mm_supports_block_fp8``: sm90+ only);
 4. B12X (sm120 family); 5. Marlin FP8 (``scaled_mm/marlin.py``; ``is_fp8_marlin_supported``: sm75+);
 6. Humming; 7. Triton; 8. torch.

So Hopper and Blackwell run FP8 × FP8 MMAs with per-block scales; Ada (sm89), Ampere (sm80/86) and Turing pass
3–4 by and land on Marlin, a weight-only kernel: the FP8 weights are read as 1 B and dequantized in registers, the
MMA runs on BF16 activations — the step's weight bytes are unchanged, its matmul FLOPs run at the BF16 peak. ROCm
lists AITER block-scaled and Triton (FP8 × FP8). An MoE's routed experts follow the FP8 MoE oracle instead
(``expert_mma_dtype``): on Ada its Triton fused MoE multiplies in FP8.

The block-scaled kernel's rate relative to a per-tensor FP8 GEMM at the same achievable fraction (the partial sums
are scaled and promoted every 128 of K on the CUDA cores) is not read from code: ``FP8_BLOCK_EFFICIENCY`` states it
with a range; it multiplies the matmul peak only when given (default 1: defaults unchanged).
"""

from __future__ import annotations

from dataclasses import dataclass

from kvledger.catalog.gpus import GpuSpec
from kvledger.catalog.modelspec import ModelSpec

__all__ = ["FP8_BLOCK_EFFICIENCY", "FP8_BLOCK_EFFICIENCY_RANGE", "Fp8BlockKernel", "fp8_block_kernel",
           "sglang_fp8_block_kernel", "compute_dtype", "expert_mma_dtype", "fp8_block_gemm_s"]

FP8_BLOCK_EFFICIENCY = 0.9
"""Block-scaled FP8 GEMM rate ÷ per-tensor FP8 GEMM rate at the same achievable fraction, 0–1: an assumption (the
per-128-K scale-and-promote step costs CUDA-core cycles beside the MMAs); not applied unless given."""
FP8_BLOCK_EFFICIENCY_RANGE = (0.75, 1.0)
"""Low and high ends of ``FP8_BLOCK_EFFICIENCY`` (assumption; no measurement in this repository)."""

_MARLIN_ARCHS = ("sm75", "sm80", "sm86", "sm89")
_BLOCK_SCALED_ARCHS = ("sm90", "sm100", "sm120")


@dataclass(frozen=True)
class Fp8BlockKernel:
    """vLLM 0.33's FP8 block-quantized linear kernel on one GPU.

    Attributes:
        name: the kernel class family, in words. mma_dtype: "fp8" (FP8 × FP8 MMAs) or "bf16" (weight-only Marlin).
        source: engine file + version and the rule that picked it.
    """

    name: str
    mma_dtype: str
    source: str


def fp8_block_kernel(model: ModelSpec, gpu: GpuSpec) -> Fp8BlockKernel | None:
    """The FP8 block-scaled linear kernel vLLM 0.33 runs for ``model`` on ``gpu``; None when the checkpoint is not
    FP8 block-quantized (no ``weight_block_size``) or the GPU's architecture is not known."""
    if model.quant.method != "fp8" or model.quant.block is None:
        return None
    src = "vLLM 0.33 model_executor/kernels/linear/__init__.py _POSSIBLE_FP8_BLOCK_KERNELS, first supported"
    if gpu.arch in _BLOCK_SCALED_ARCHS:
        return Fp8BlockKernel("DeepGEMM (FlashInfer swap-AB below 32 rows), else CUTLASS block-scaled", "fp8",
                              f"{src}: {gpu.arch} passes support_deep_gemm / cutlass_scaled_mm_supports_block_fp8")
    if gpu.arch in _MARLIN_ARCHS:
        return Fp8BlockKernel("Marlin FP8 (weight-only: FP8 weights, BF16 activations and MMAs)", "bf16",
                              f"{src}: {gpu.arch} < sm90 fails DeepGEMM and CUTLASS block FP8; Marlin needs sm75+")
    if gpu.gpu_id.startswith("amd_"):
        return Fp8BlockKernel("AITER block-scaled or Triton", "fp8", f"{src} (ROCm list: AITER, Triton)")
    return None


def sglang_fp8_block_kernel(model: ModelSpec, gpu: GpuSpec) -> Fp8BlockKernel | None:
    """The FP8 block-scaled linear kernel SGLang 0.5.23 runs for ``model`` on ``gpu`` (128-wide blocks); None as
    ``fp8_block_kernel``, and on an architecture whose path was not read.

    ``layers/quantization/fp8.py``: sm80–sm88 take Marlin FP8 (``fp8_utils.py :: can_auto_enable_marlin_fp8``);
    else ``fp8_utils.py :: dispatch_w8a8_block_fp8_linear`` → ``_dispatch_auto_backend``: DeepGEMM when enabled
    (``deep_gemm_wrapper/configurer.py``: CUDA sm90+, ``SGLANG_ENABLE_JIT_DEEPGEMM``, the deep_gemm package), else
    FlashInfer TRT-LLM on Blackwell, CUTLASS on sm120, AITER on ROCm, else Triton's w8a8 block FP8 GEMM — on Ada
    (sm89) FP8 × FP8 MMAs, where vLLM 0.33 runs Marlin's BF16 ones."""
    if model.quant.method != "fp8" or model.quant.block is None:
        return None
    src = "SGLang 0.5.23 layers/quantization/fp8_utils.py dispatch_w8a8_block_fp8_linear, auto backend"
    if gpu.arch in ("sm80", "sm86"):
        return Fp8BlockKernel("Marlin FP8 (weight-only: FP8 weights, BF16 activations and MMAs)", "bf16",
                              f"{src}: {gpu.arch} is within can_auto_enable_marlin_fp8's sm80–sm88")
    names = {"sm90": "DeepGEMM (with deep_gemm installed; else Triton block FP8)",
             "sm100": "DeepGEMM (with deep_gemm installed; else FlashInfer TRT-LLM block FP8)",
             "sm120": "CUTLASS block-scaled (DeepGEMM with its sm120 kernels installed)",
             "sm89": "Triton w8a8 block FP8 (FP8 × FP8 MMAs: DeepGEMM needs sm90)"}
    if gpu.arch in names:
        return Fp8BlockKernel(names[gpu.arch], "fp8", src)
    if gpu.gpu_id.startswith("amd_"):
        return Fp8BlockKernel("AITER block-scaled (SGLANG_USE_AITER) or Triton", "fp8", src)
    return None


def compute_dtype(model: ModelSpec, gpu: GpuSpec) -> str:
    """Matmul precision: fp8 when the weights are fp8 and the GPU has fp8 tensor cores, else bf16; block-quantized
    fp8 runs the MMA of the kernel vLLM 0.33 picks for the GPU (Marlin, BF16 MMAs, below sm90)."""
    blk = fp8_block_kernel(model, gpu)
    if blk is not None and blk.mma_dtype == "bf16":
        return "bf16"
    return "fp8" if model.quant.method == "fp8" and gpu.fp8_flops_per_s else "bf16"


def expert_mma_dtype(model: ModelSpec, gpu: GpuSpec) -> str | None:
    """The MMA dtype of an FP8 block-quantized MoE's routed experts where it differs from the linears': "fp8" on Ada
    (sm89), where vLLM 0.33's FP8 MoE oracle (``fused_moe/oracle/fp8.py :: _get_priority_backends``: DeepGEMM and
    CUTLASS need sm90+) reaches Triton, whose fused MoE takes 128-block FP8 weights and activations wherever
    ``supports_fp8`` (sm89+; ``experts/triton_moe.py``), while the linears run Marlin; None otherwise (the experts
    run at the linears' dtype: FP8 from sm90, Marlin's BF16 below sm89)."""
    k = fp8_block_kernel(model, gpu)
    return "fp8" if k is not None and model.is_moe and gpu.arch == "sm89" and gpu.fp8_flops_per_s else None


def fp8_block_gemm_s(m: int, n: int, k: int, gpu: GpuSpec, mma_dtype: str, flops_fraction: float,
                     bandwidth_fraction: float, efficiency: float = 1.0) -> float:
    """Roofline time of one block-quantized ``[m × k] · [k × n]`` GEMM, s: max(2·m·n·k FLOPs ÷ (peak × fraction ×
    efficiency), bytes ÷ (bandwidth × fraction)), the bytes being the FP8 weight (n·k B), its fp32 scales
    (⌈n/128⌉·⌈k/128⌉ × 4 B), the activations (m·k B in FP8, 2 B in BF16 for Marlin) and the BF16 output (2·m·n B)."""
    peak = gpu.fp8_flops_per_s if mma_dtype == "fp8" and gpu.fp8_flops_per_s else gpu.bf16_flops_per_s
    act = 1 if mma_dtype == "fp8" else 2
    nbytes = n * k + -(-n // 128) * -(-k // 128) * 4 + m * k * act + 2 * m * n
    return max(2 * m * n * k / (peak * flops_fraction * efficiency),
               nbytes / (gpu.hbm_bandwidth_bytes_per_s * bandwidth_fraction))
