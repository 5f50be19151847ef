"""Ranges for the terms SGLang's and TensorRT-LLM's plans take from vLLM's evidence (assumed or transferred, not
measured for that engine): each carries the spread the corpus shows for that term, with its data named, instead of a
point that claims to be exact.
"""

from __future__ import annotations

from kvledger.accounting.vllm_terms import WEIGHTS_LOGGED_SPREAD
from kvledger.catalog.modelspec import ModelSpec
from kvledger.units import GiB

__all__ = ["NON_TORCH_TRANSFERRED_GIB", "DRY_RUN_ACTIVATION_SPREAD", "MXFP4_LAYOUT_UP", "non_torch_range",
           "dry_run_activation_range", "weights_range"]

NON_TORCH_TRANSFERRED_GIB = (0.03, 0.25)
"""(low, high) GiB of the non-torch memory (CUDA context remainder, cuBLAS workspaces) that the TensorRT-LLM PyTorch
backend's plan assumes at vLLM's 0.13 GiB (``overheads.NON_TORCH_BYTES``, vLLM ≤0.17 on H100 at TP 1): the spread of
that term over vLLM's TP-1 logs, 0.03 GiB on an RTX 4060 (vllm#13882) to 0.25 GiB in all 40 vLLM 0.19.0 H100
start-ups (shared/data/vllm-startups-0.19; ``vllm_collectives._base`` cites both). No TensorRT-LLM log prints it."""

DRY_RUN_ACTIVATION_SPREAD = (-0.10, 0.11)
"""Relative (low, high) of the PyTorch backend's dry-run activation peak around the modelled forward
(``overheads.forward_peak_bytes``): no TensorRT-LLM PyTorch log prints its peak. Low −10%: the width vLLM's plan
gives the same forward model where no profile log of that version and GPU exists (``vllm_terms.activation_item``);
high +11%: the one TensorRT-LLM activation figure printed against the model (Llama-2-7B FP8 engine, benchmarks/Suite.md;
``notes.TRTLLM_ENGINE_ACTIVATION_RANGE``)."""

MXFP4_LAYOUT_UP = {"sm80": 0.11, "sm86": 0.11}
"""How far vLLM's logged MXFP4 weights sit above the checkpoint's tensors, by architecture (as
``vllm_terms.weights_item``): Ampere, where Marlin repacks them, up to +11% (issue 20: public gpt-oss start-ups on
Ampere log "Model loading took" 6–11% above the tensors); elsewhere up to +6% (H100: gpt-oss-20b +4.7%,
gpt-oss-120b +5.9%, vllm#33155)."""


def non_torch_range() -> tuple[float, float, str]:
    """(low, high, why) of the assumed non-torch memory, B."""
    lo, hi = NON_TORCH_TRANSFERRED_GIB
    return (lo * GiB, hi * GiB, f"the spread of vLLM's TP-1 non-torch memory over its logs ({lo} GiB in a public "
            f"RTX 4060 log; {hi} in 40 vLLM 0.19 H100 start-ups)")


def dry_run_activation_range(point: float) -> tuple[float, float, str]:
    """(low, high, why) of the PyTorch backend's dry-run peak around the modelled ``point``, B."""
    lo, hi = DRY_RUN_ACTIVATION_SPREAD
    return (point * (1 + lo), point * (1 + hi), f"{lo:+.0%} … {hi:+.0%} of the model: no TensorRT-LLM PyTorch log "
            "prints the dry run's peak (low: vLLM's width for the same forward without a profile log; high: the "
            "TensorRT engine's Llama-2-7B FP8 print, +11% over the model)".replace("-", "−", 1))


def weights_range(model: ModelSpec, point: float, arch: str, engine: str) -> tuple[float, float, str]:
    """(low, high, why) of the weights ``engine`` loads around the tensors' bytes ``point``, B: vLLM's logged spread
    of "Model loading took" around the tensors (``vllm_terms.WEIGHTS_LOGGED_SPREAD``), transferred; for an MXFP4
    checkpoint, whose layout varies by kernel, up to vLLM's MXFP4 excess on that architecture."""
    if model.quant.method == "mxfp4":
        up = MXFP4_LAYOUT_UP.get(arch, 0.06)
        where = ("Ampere, where Marlin repacks them" if arch in MXFP4_LAYOUT_UP
                 else "H100: gpt-oss-20b +4.7%, gpt-oss-120b +5.9%")
        return (point, point * (1 + up), f"no {engine} log of an MXFP4 checkpoint: up to +{up:.0%}, vLLM's logged "
                f"MXFP4 weights over the tensors ({where})")
    lo, hi = WEIGHTS_LOGGED_SPREAD
    return (point * (1 + lo), point * (1 + hi), f"{lo:+.2%} … {hi:+.2%} of the tensors: vLLM's logged weights "
            f"against the checkpoint (125 start-ups, buffers that are not checkpoint tensors), no {engine} weights "
            "log compared".replace("-", "−", 1))
