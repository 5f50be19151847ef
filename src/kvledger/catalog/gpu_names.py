"""The names a catalog GPU answers to: its aliases, its compute-capability family, and the spellings
``nvidia-smi --query-gpu=name`` prints ("Tesla A10G", "NVIDIA A10G", "L40S-48GB", "NVIDIA RTX 6000 Ada Generation")."""

from __future__ import annotations

import re

__all__ = ["GPU_ALIASES", "GPU_ARCH", "GPU_CAPABILITY", "smi_forms"]

GPU_ALIASES = {
    "nvidia_h100_sxm": ["h100", "h100-sxm", "h100-sxm5", "h100-80gb", "h100-sxm-80gb", "h100 80gb hbm3"],
    "nvidia_h100_pcie": ["h100-pcie", "h100-pcie-80gb"], "nvidia_h100_nvl": ["h100-nvl", "h100-94gb"],
    "nvidia_h200_sxm": ["h200", "h200-sxm", "h200-141gb"], "nvidia_h200_nvl": ["h200-nvl"],
    "nvidia_a100_80gb_sxm": ["a100", "a100-80gb", "a100-sxm", "a100-sxm4-80gb", "a100-80gb-sxm"],
    "nvidia_a100_80gb_pcie": ["a100-pcie", "a100-80gb-pcie"], "nvidia_a100_40gb_sxm": ["a100-40gb", "a100-sxm4-40gb"],
    "nvidia_b200": ["b200"], "nvidia_gb200": ["gb200"], "nvidia_b300": ["b300"], "nvidia_gb300": ["gb300"],
    "nvidia_gh200_96gb": ["gh200", "gh200-96gb", "gh200-120gb"], "nvidia_gh200_144gb": ["gh200-144gb"],
    "nvidia_l4": ["l4"], "nvidia_l40s": ["l40s"], "nvidia_a10": ["a10"], "nvidia_a10g": ["a10g"],
    "nvidia_rtx_3090": ["rtx3090", "rtx-3090", "3090"], "nvidia_rtx_4090": ["rtx4090", "rtx-4090", "4090"],
    "nvidia_rtx_4070_super": ["rtx4070super", "rtx-4070-super", "4070super", "4070-super", "rtx 4070 super"],
    "nvidia_rtx_5090": ["rtx5090", "rtx-5090", "5090"],
    "nvidia_rtx_pro_6000_server": ["rtx-pro-6000", "rtx-pro-6000-server", "rtx pro 6000", "rtxpro6000",
                                   "nvidia_rtx_pro_6000"],
    "nvidia_rtx_pro_6000_workstation": ["rtx-pro-6000-workstation", "rtx-pro-6000-ws"],
    "nvidia_t4": ["t4", "tesla-t4"], "nvidia_a40": ["a40"], "nvidia_l40": ["l40"], "nvidia_h20": ["h20"],
    "nvidia_rtx_a4000": ["rtx-a4000", "a4000"], "nvidia_rtx_a5000": ["rtx-a5000", "a5000"],
    "nvidia_rtx_a6000": ["rtx-a6000", "a6000"],
    "nvidia_rtx_6000_ada": ["rtx-6000-ada", "rtx6000-ada", "rtx6000ada", "6000-ada"],
    "nvidia_a100_40gb_pcie": ["a100-40gb-pcie", "a100-pcie-40gb"],
    "amd_mi210": ["mi210"], "amd_mi300x": ["mi300x"], "amd_mi325x": ["mi325x"], "amd_mi355x": ["mi355x"],
    "amd_mi250x": ["mi250x", "mi250x-gcd"], "amd_mi250": ["mi250", "mi250-gcd"], "google_tpu_v5e": ["tpu-v5e", "v5e"],
    "google_tpu_v6e": ["tpu-v6e", "v6e", "trillium"], "intel_gaudi3": ["gaudi3"],
}
"""Catalog id → the other --gpu names it answers to (matched after ``gpus._norm``: lower case, hyphens)."""

GPU_ARCH = {"h100": "sm90", "h200": "sm90", "gh200": "sm90", "h20": "sm90", "b200": "sm100", "gb200": "sm100",
         "b300": "sm100", "gb300": "sm100", "a100": "sm80", "a10": "sm86", "a40": "sm86", "rtx_a": "sm86",
         "rtx_4090": "sm89", "rtx_4070": "sm89", "rtx_3090": "sm86", "l4": "sm89", "l40": "sm89", "rtx_5090": "sm120",
         "rtx_pro_6000": "sm120", "rtx_6000_ada": "sm89", "t4": "sm75"}
"""A catalog id's substring → its compute capability family (the longest substring of an id wins)."""

GPU_CAPABILITY = {"b300": 103, "gb300": 103}
"""A catalog id's substring → its exact compute capability (major × 10 + minor, vLLM's ``DeviceCapability.to_int``)
where it is not the family's: NVIDIA's "CUDA GPU Compute Capability" table (developer.nvidia.com) lists B300 and GB300
at 10.3, B200 and GB200 at 10.0. The family (``GPU_ARCH``, "sm100") stays what the rules that take the SM 10.x family
read; a rule that tests one exact capability reads ``GpuSpec.capability``."""

_SMI_PREFIXES = ("tesla-", "geforce-", "quadro-")
"""Brand words nvidia-smi puts before a model name ("Tesla T4", "Tesla A10G", "Tesla V100-SXM2-16GB"); "NVIDIA " is
dropped by every name match already."""


def smi_forms(key: str) -> list[tuple[str, int | None]]:
    """The forms of a normalised name (``gpus._norm``) to try when it names no row as written: the brand word dropped,
    and a trailing memory size ("l40s-48gb") dropped with the size kept, GB, for the caller to check against the row's
    marketed memory (so "gh200-480gb" does not silently pick the 96 GB row); [] when neither applies."""
    out: list[tuple[str, int | None]] = []
    bare = next((key.removeprefix(p) for p in _SMI_PREFIXES if key.startswith(p)), key)
    if bare != key:
        out.append((bare, None))
    m = re.fullmatch(r"(.+?)-(\d+)gb", bare)
    if m:
        out.append((m.group(1), int(m.group(2))))
    return out
