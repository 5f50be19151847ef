"""The vendor's words for a GPU: its management tool (nvidia-smi, rocm-smi), its runtime (CUDA, HIP) and its
architecture name (NVIDIA's compute-capability family, AMD's LLVM target), so that no AMD row speaks NVIDIA."""

from __future__ import annotations

from typing import Any

__all__ = ["is_amd", "smi_tool", "device_runtime", "device_arch", "gpu_json"]

_AMD_ARCH = {"amd_mi300x": "gfx942", "amd_mi325x": "gfx942", "amd_mi355x": "gfx950", "amd_mi250x": "gfx90a",
             "amd_mi250": "gfx90a", "amd_mi210": "gfx90a"}
"""AMD Instinct LLVM target names: ROCm documentation, AMD GPU specifications (rocm.docs.amd.com
reference/gpu-specs): MI355X/MI350X gfx950 (CDNA 4), MI325X/MI300X gfx942 (CDNA 3), MI250X/MI250/MI210 gfx90a
(CDNA 2)."""

AMD_ARCH_SOURCE = "ROCm documentation, AMD GPU specifications (LLVM target name)"
NVIDIA_ARCH_SOURCE = "CUDA compute capability family (catalog.gpus)"


def is_amd(gpu: Any) -> bool:
    """Whether the GPU runs vLLM's ROCm build (an AMD Instinct row)."""
    return gpu.gpu_id.startswith("amd_")


def smi_tool(gpu: Any) -> str:
    """The tool whose total the catalog's ``nvidia_smi_mib`` holds: rocm-smi on AMD, nvidia-smi elsewhere."""
    return "rocm-smi" if is_amd(gpu) else "nvidia-smi"


def device_runtime(gpu: Any) -> str:
    """The runtime that reports the device total torch and the engines see: HIP on AMD, CUDA on NVIDIA (and on a GPU
    file's GPU, as the catalog has always read one); "" on another platform (TPU, Gaudi)."""
    return "HIP" if is_amd(gpu) else "" if gpu.gpu_id.startswith(("google_", "intel_")) else "CUDA"


def device_arch(gpu: Any) -> tuple[str, str]:
    """(architecture name, its source): AMD's LLVM target (gfx942…), NVIDIA's compute-capability family (sm90…);
    ("", "") when neither is known."""
    if gpu.gpu_id in _AMD_ARCH:
        return _AMD_ARCH[gpu.gpu_id], AMD_ARCH_SOURCE
    return (gpu.arch, NVIDIA_ARCH_SOURCE) if gpu.arch else ("", "")


def gpu_json(gpu: Any) -> dict[str, Any]:
    """A catalog GPU's ``--json`` row: its fields (``nvidia_smi_mib`` and ``arch`` kept as they were, for scripts) and
    the vendor-neutral ones: ``smi_mib`` and ``smi_tool`` (whose total it is), ``device_runtime`` (CUDA, HIP),
    ``device_arch`` and ``device_arch_source`` (sm90, gfx942…)."""
    arch, src = device_arch(gpu)
    return {**gpu.to_dict(), "smi_mib": gpu.nvidia_smi_mib, "smi_tool": smi_tool(gpu),
            "device_runtime": device_runtime(gpu), "device_arch": arch, "device_arch_source": src}
