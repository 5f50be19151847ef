"""Whether a vLLM release's published wheels carry kernels for a GPU's architecture: a warning, not a refusal (a source
build with a newer CUDA can still run it), for plans of a version older than the first release built for the GPU.

Sources: vLLM 0.9.0's release notes ("The default wheel has been upgraded from CUDA 12.4 to CUDA 12.8", with PyTorch
2.7 and the first optimized Blackwell kernels; quoted in NVIDIA-NeMo/Guardrails PR #1312); CUDA 12.8 is the first
toolkit that compiles for the consumer and workstation Blackwell GPUs (sm_120) and the first in a vLLM default wheel
that compiles for B100/B200 (sm_100: CUDA 12.7 or newer, vllm-project/vllm PR #12271, "NVIDIA Blackwell codegen"), and
the PyTorch builds vLLM pinned up to 0.8.5 (CUDA 12.1 and 12.4) cannot hold sm_100 or sm_120 code.
Older architectures (sm_75 to sm_90) are in every release planned here (0.6 on).
"""

from __future__ import annotations

from kvledger.accounting.engine_gpu_support import NO_KERNELS, engine_gpu_note
from kvledger.accounting.platforms import platform_note
from kvledger.accounting.vllm_rules import LATEST, parse_version
from kvledger.catalog.gpus import GpuSpec
from kvledger.errors import EngineRefusalError

__all__ = ["FIRST_RELEASE_BUILT_FOR", "NO_KERNELS", "vllm_gpu_note", "gpu_notes", "check_dtype"]

FIRST_RELEASE_BUILT_FOR: dict[str, tuple[int, int, int]] = {"sm100": (0, 9, 0), "sm120": (0, 9, 0)}
"""Compute architecture → the first vLLM release whose default wheel (CUDA 12.8, PyTorch 2.7) is built for it. The
catalog files B300/GB300 (compute capability 10.3) under sm100: their first release was not checked separately."""


def vllm_gpu_note(version: tuple[int, int, int], gpu: GpuSpec) -> str | None:
    """A warning when vLLM ``version``'s wheels were not built for ``gpu``'s architecture; None otherwise."""
    first = FIRST_RELEASE_BUILT_FOR.get(gpu.arch)
    if first is None or version >= first:
        return None
    v, f = ".".join(map(str, version)), ".".join(map(str, first))
    return (f"vLLM {v} {NO_KERNELS} {gpu.arch} ({gpu.name}): its wheels are built with a CUDA before 12.8, and the "
            f"first release built for {gpu.arch} is {f} (default wheel on CUDA 12.8, its release notes); this "
            "version could start on this GPU only as a build of its own with CUDA ≥ 12.8 (none published), so the "
            "memory figures are those it would have if it ran")


def gpu_notes(engine: str, gpu: GpuSpec, engine_version: str | None) -> tuple[str, ...]:
    """The plan's notes about running ``engine`` on ``gpu``: its version without kernels for the GPU (vLLM here;
    SGLang and TensorRT-LLM in ``engine_gpu_support``), a back-end the memory rules do not model
    (``platforms.platform_note``)."""
    arch = (vllm_gpu_note(parse_version(engine_version or LATEST), gpu) if engine == "vllm" else
            engine_gpu_note(engine, engine_version, gpu))
    return tuple(n for n in (arch, platform_note(engine, gpu)) if n is not None)


def check_dtype(engine: str, gpu: GpuSpec, dtype: str) -> None:
    """Refuse ``--dtype bfloat16`` for vLLM on a GPU below compute capability 8.0 (``GpuSpec.bf16_supported``), as vLLM
    does at start-up (its CUDA platform's dtype check: "Bfloat16 is only supported on GPUs with compute capability of
    at least 8.0"); ``auto`` there serves a bf16 checkpoint in float16, which the plan prices at the same 2 bytes.

    Raises:
        EngineRefusalError: bfloat16 asked of vLLM on such a GPU (a valid dtype vLLM refuses on that GPU: exit 3).
    """
    if engine == "vllm" and dtype.lower() in ("bfloat16", "bf16") and not gpu.bf16_supported:
        raise EngineRefusalError(f"--dtype {dtype}: {gpu.name} ({gpu.arch}) is below compute capability 8.0, where "
                                 "vLLM refuses bfloat16 at start-up (\"Bfloat16 is only supported on GPUs with compute "
                                 "capability of at least 8.0\"); pass --dtype float16 (or auto, which vLLM then serves "
                                 "in float16)")
