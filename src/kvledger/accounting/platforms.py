"""The platform an engine runs on for a catalog GPU, and whether the memory rules model it there.

A catalog GPU's id starts with its vendor (``catalog/data/gpus.csv``): NVIDIA GPUs run CUDA; AMD's run ROCm (vLLM's
ROCm platform is modelled from MI300X start-ups, ``vllm_rocm.py``); Google's TPUs and Intel's Gaudi run back-ends of
their own (vLLM's TPU and Gaudi plugins), which the rules here do not model: their terms are the CUDA platform's (CUDA
graphs, non-torch memory measured on H100). A GPU the user describes (``custom``) is taken as CUDA.
TensorRT-LLM is built on CUDA and runs on NVIDIA GPUs only.
"""

from __future__ import annotations

from kvledger.catalog.gpus import GpuSpec
from kvledger.errors import EngineRefusalError

__all__ = ["platform", "check_engine_platform", "platform_note", "NOT_MODELLED", "ENGINE_WORDS", "engine_release",
           "plan_release"]

_PLATFORMS = (("amd_", "ROCm"), ("google_tpu", "TPU"), ("intel_gaudi", "Gaudi"))
#: the settings' engine names as the engines spell themselves
ENGINE_WORDS = {"vllm": "vLLM", "sglang": "SGLang", "trtllm": "TensorRT-LLM"}

#: the words of every platform note (plan and simulate print the notes that hold them)
NOT_MODELLED = "is not modelled by these rules"


def platform(gpu: GpuSpec) -> str:
    """"CUDA", "ROCm", "TPU" or "Gaudi" by the catalog id's vendor prefix; a user-described GPU is "CUDA"."""
    return next((name for prefix, name in _PLATFORMS if gpu.gpu_id.startswith(prefix)), "CUDA")


def check_engine_platform(engine: str, gpu: GpuSpec) -> None:
    """Raises:
        EngineRefusalError: TensorRT-LLM on a GPU that is not NVIDIA's (it cannot start there: exit 3).
    """
    where = platform(gpu)
    if engine == "trtllm" and where != "CUDA":
        others = "--engine vllm or --engine sglang" if where == "ROCm" else "--engine vllm"
        raise EngineRefusalError(f"TensorRT-LLM runs on NVIDIA GPUs only (it is built on CUDA); {gpu.name} is a "
                                 f"{where} device: plan it with {others}, or choose an NVIDIA --gpu")


def platform_note(engine: str, gpu: GpuSpec) -> str | None:
    """A note when ``engine`` runs on a TPU or a Gaudi, whose back-ends the memory rules do not model; else None."""
    where = platform(gpu)
    if where not in ("TPU", "Gaudi") or engine not in ENGINE_WORDS:
        return None
    return (f"{ENGINE_WORDS[engine]}'s {where} back-end {NOT_MODELLED}, which are its CUDA platform's (CUDA graphs, "
            "memory measured on NVIDIA GPUs): read the figures as those of a CUDA GPU with this device's memory, not "
            "as what the engine will print")


def engine_release(engine: str | None, version: str | None) -> str | None:
    """"vLLM 0.19.0": an engine and its version in words, as a run record or a GPU profile names them; None when
    either is unknown."""
    if not engine or not version:
        return None
    return f"{ENGINE_WORDS.get(engine, engine)} {version}"


def plan_release(engine: str, memory_version: str | None, given: str | None = None) -> str | None:
    """The release a plan runs as, in ``engine_release``'s words with the version as the rules normalised it: the
    memory plan's ("0.19.0" for a typed "0.19"; SGLang's "0.5.23 rules" → 0.5.23), else the version given; None where
    neither names a number (TensorRT-LLM's "PyTorch backend rules", no --engine-version)."""
    import re

    for text in (memory_version, given):
        m = re.match(r"v?(\d+(?:\.\d+)*)", str(text or "").strip())
        if m:
            parts = m.group(1).split(".")
            if engine == "vllm":  # vLLM's rules read major.minor.patch ("0.19" is 0.19.0)
                parts = (parts + ["0", "0"])[:3]
            return engine_release(engine, ".".join(parts))
    return None
