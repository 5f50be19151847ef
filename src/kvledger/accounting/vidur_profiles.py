"""Which GPUs Vidur's bundled operator profiles measured, which GPUs share a profiled GPU's die, and where the files
are: what the measured GEMM curve (``gemm_efficiency.py``) and the layer kernels' floors (``layer_kernels.py``) read
(``op_profiles.py`` adds LLMServingSim's profiles of other GPUs)."""

from __future__ import annotations

from importlib import resources
from pathlib import Path

__all__ = ["VIDUR_GPU", "SAME_DIE", "vidur_profile_dir", "bundled_fit"]

#: catalog GPU id → Vidur's profile folder (Vidur profiled DGX A100 80GB and DGX H100 SXM nodes)
VIDUR_GPU = {"nvidia_h100_sxm": "h100", "nvidia_a100_80gb_sxm": "a100"}
#: catalog GPU id → the profiled GPU whose fits it takes: the same die, SM count and BF16 peak (an SXM-class module, or
#: the same board with another cooler: the RTX PRO 6000 Workstation and Server Editions)
#: (tests/accounting/test_gemm_efficiency.py checks the catalog's peaks agree). The GEMM curve is the compute side of
#: the GEMMs (points bound by the weight read are left out) and the layer kernels' floors are launch and row latency,
#: both set by the die; each GPU's own bandwidth prices every byte.
SAME_DIE = {"nvidia_h200_sxm": "nvidia_h100_sxm", "nvidia_gh200_96gb": "nvidia_h100_sxm",
            "nvidia_gh200_144gb": "nvidia_h100_sxm", "nvidia_a100_40gb_sxm": "nvidia_a100_80gb_sxm",
            "nvidia_rtx_pro_6000_workstation": "nvidia_rtx_pro_6000_server"}


def vidur_profile_dir(folder: str) -> Path:
    """The bundled Vidur compute-profile folder of one profiled GPU (``VIDUR_GPU``'s value)."""
    return Path(str(resources.files("kvledger.accounting") / "data" / "profiling" / "vidur" / "compute" / folder))


def bundled_fit(file: str, section: str, gpu_id: str) -> dict | None:
    """One profiled GPU's entry of a fit bundled under ``accounting/data`` (``gemm_curves.json`` "curves",
    ``layer_kernels.json`` "fits", written by benchmarks/build_gemm_curves.py); None for a GPU no operator profile
    measured (``op_profiles.PROFILED_GPU``; a ``SAME_DIE`` twin asks for its twin's id)."""
    import json

    path = Path(str(resources.files("kvledger.accounting"))) / "data" / file
    return json.loads(path.read_text(encoding="utf-8"))[section].get(gpu_id)
