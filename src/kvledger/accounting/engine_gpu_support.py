"""Whether an SGLang or TensorRT-LLM release ships kernels for a Blackwell GPU's architecture: the same warning as
vLLM's (``vllm_gpu_support``), for a plan of a version older than the first release that does.

Sources, per engine and architecture:

* SGLang: ``pip install "sglang[all]"`` takes torch and sgl-kernel from PyPI at the versions the release pins.
  0.5.1.post3 pins sgl-kernel 0.3.7, whose PyPI wheel (``sgl_kernel/common_ops.abi3.so``, its ``.nv_fatbin``
  entries read with ``objcopy``) holds SASS for sm80, sm89 and sm90 only; 0.5.2 pins sgl-kernel 0.3.9.post2, whose
  wheel adds sm100, sm101 and sm120, with torch 2.8.0 (PyPI's default build is CUDA 12.8). Releases from 0.4.5.post3
  (read in its METADATA; 0.4.5 has none) declare a ``blackwell`` extra that leaves torch and sgl-kernel to a CUDA 12.8
  build the user installs from elsewhere (sgl-project's wheel index, the ``lmsysorg/sglang:blackwell`` image).
* TensorRT-LLM: its release notes (``docs/source/release-notes.md``). 0.17.0 "Added support for B200" and GeForce
  RTX 50 under WSL for limited models, on CUDA 12.8.0 (pip installs not supported on Blackwell in 0.17: a source build
  in the NGC 25.01 PyTorch container); 0.16.0 is on CUDA 12.6.3, which compiles for neither sm_100 nor sm_120. 0.19.0
  adds FP8 for SM120 and 0.20.0 "RTX Pro 6000 support on single GPU" (multi-GPU a known issue).
"""

from __future__ import annotations

import re

from kvledger.accounting.platforms import ENGINE_WORDS
from kvledger.catalog.gpus import GpuSpec

__all__ = ["FIRST_RELEASE_WITH_KERNELS", "NO_KERNELS", "engine_gpu_note"]

NO_KERNELS = "ships no kernels for"
"""The words that mark this warning (the plan's summary shows notes that carry them)."""

FIRST_RELEASE_WITH_KERNELS: dict[str, dict[str, tuple[tuple[int, ...], str]]] = {
    "sglang": {
        "sm100": ((0, 5, 2), "its PyPI install pins sgl-kernel 0.3.9.post2, the first whose wheel holds sm100 and "
                             "sm120 code (0.5.1.post3's sgl-kernel 0.3.7: sm80/89/90 only), and torch 2.8.0 on CUDA "
                             "12.8; earlier releases ran on Blackwell only through the `blackwell` extra (from "
                             "0.4.5.post3) with a CUDA 12.8 torch and sgl-kernel installed separately"),
    },
    "trtllm": {
        "sm100": ((0, 17, 0), "0.17.0's release notes add B200 (source build in the NGC 25.01 container; its pip "
                              "wheel not for Blackwell); 0.16.0 is built on CUDA 12.6.3"),
        "sm120": ((0, 17, 0), "0.17.0's release notes add GeForce RTX 50 under WSL for limited models; 0.19.0 FP8 on "
                              "SM120, 0.20.0 RTX Pro 6000 on a single GPU; 0.16.0 is built on CUDA 12.6.3"),
    },
}
"""Engine → compute architecture → (first release with kernels for it, why). SGLang's sm120 row is its sm100 row (the
same sgl-kernel wheel); the catalog files B300/GB300 (compute capability 10.3) under sm100, not checked separately."""
FIRST_RELEASE_WITH_KERNELS["sglang"]["sm120"] = FIRST_RELEASE_WITH_KERNELS["sglang"]["sm100"]


def _release(version: str) -> tuple[int, ...]:
    """``"0.4.6.post2"`` → (0, 4, 6, 2), ``"v0.13"`` → (0, 13, 0), ``"1.2.0rc6"`` → (1, 2, 0); () for other text
    (the engine's own plan reports a bad version)."""
    m = re.match(r"^v?(\d+)\.(\d+)(?:\.(\d+))?(?:\.?post(\d+))?", str(version).strip())
    if not m:
        return ()
    ver = (int(m.group(1)), int(m.group(2)), int(m.group(3) or 0))
    return ver + ((int(m.group(4)),) if m.group(4) else ())


def engine_gpu_note(engine: str, version: str | None, gpu: GpuSpec) -> str | None:
    """A warning when ``engine`` (sglang, trtllm) at ``version`` ships no kernels for ``gpu``'s architecture; None
    otherwise, and when no version is given (the plan then assumes a current release)."""
    row = FIRST_RELEASE_WITH_KERNELS.get(engine, {}).get(gpu.arch)
    ver = _release(version) if version else ()
    if row is None or not ver or ver >= row[0]:
        return None
    first, why = row
    name, f = ENGINE_WORDS[engine], ".".join(map(str, first))
    return (f"{name} {version} {NO_KERNELS} {gpu.arch} ({gpu.name}): the first release that does is {f} ({why}); "
            "this version could start on this GPU only as a build of its own, so the memory figures are those it "
            "would have if it ran")
