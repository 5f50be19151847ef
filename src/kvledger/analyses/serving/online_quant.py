"""vLLM's online ``--quantization fp8`` as a simulation says it. The memory plan loads an unquantized checkpoint's
linear weights as FP8 (``catalog/loading.py``, as ``kvledger plan -q fp8``) and the roofline reads those weights
(``accounting.plan.roofline_model``); every figure priced on them names the flag: the step cost's line and source,
the KV pool's note, and the sources of ``goodput``/``cost --simulate`` (``sim_provenance.PlanFigures.of``)."""

from __future__ import annotations

from typing import Any

__all__ = ["weights_words", "pool_note", "with_quantization"]

_GIB = 2**30


def weights_words(plan: Any) -> str | None:
    """``weights FP8, quantized on load (vLLM --quantization fp8)`` for a plan with ``--quantization``, the words for
    a checkpoint already in that format, or None without the flag."""
    from kvledger.accounting.plan import roofline_model

    q = plan.settings.quantization
    if q is None:
        return None
    if roofline_model(plan.model, plan.settings) is plan.model:  # an FP8 checkpoint: vLLM loads it as it is
        return f"weights as the checkpoint stores them ({plan.model.quant.method}; vLLM --quantization {q} keeps them)"
    return f"weights {q.upper()}, quantized on load (vLLM --quantization {q})"


def pool_note(plan: Any) -> str | None:
    """The KV pool's note under ``--quantization``: the weights term the memory plan took, whose bytes freed are in
    the pool (``kvledger plan -q fp8`` shows each term); None without the flag."""
    words = weights_words(plan)
    if words is None:
        return None
    w = next((d.bytes for d in plan.memory.deductions if d.name == "weights"), None)
    term = f"the memory plan's weights term is {w / _GIB:.2f} GiB per GPU, " if w is not None else ""
    pool = ("the KV pool above is --num-gpu-blocks-override's" if plan.settings.num_gpu_blocks_override else
            "the KV pool above is what is left once they are loaded")
    return f"{words}: {term}{pool} (`kvledger plan --quantization {plan.settings.quantization}` shows every term)"


def _roofline_note(plan: Any, cost: Any) -> str:
    """The roofline's sentence: the weights every step reads and the GEMMs' precision (``cost``: the roofline, or a
    wrapper that gives its attributes, ``host_overhead.HostStepCost``)."""
    gemm = ("W8A8 FP8 GEMMs at the GPU's FP8 peak" if cost.dtype == "fp8" else
            f"weight-only FP8 (no FP8 tensor cores on {plan.gpu.name}: BF16 MMAs)")
    return (f"{weights_words(plan)}: each step reads the FP8 weights ({cost.weight_read_bytes(1) / _GIB:.2f} GiB per "
            f"GPU at 1 token; vllm/model_executor/layers/quantization/fp8.py, Fp8LinearMethod) and runs {gemm}; the "
            "GPU's measured GEMM curve, of BF16 weights, does not price them (flat FLOP fraction)")


def with_quantization(plan: Any, cost: Any, info: dict[str, Any], step_cost: str) -> dict[str, Any]:
    """``info`` (``make_step_cost``'s description) with ``weights`` (the step cost's line) and its source's sentence
    under ``--quantization``, or with a warning where a ``--step-cost`` other than the roofline prices the steps (its
    measurements are of the checkpoint's own weights: the KV pool's note still names the flag); ``info`` itself
    without the flag."""
    words = weights_words(plan)
    if words is None:
        return info
    if step_cost == "roofline":
        return {**info, "weights": words, "source": f"{info['source']}; {_roofline_note(plan, cost)}"}
    info = dict(info)
    info["warnings"] = [*info.get("warnings", ()), (
        f"--quantization {plan.settings.quantization}: the KV pool is planned with the FP8 weights vLLM loads, but "
        f"--step-cost {step_cost} prices each step by its own measurements, taken of the checkpoint's weights, not of "
        "FP8 ones: the step times do not carry the halved weight reads (--step-cost roofline prices them)")]
    return info
