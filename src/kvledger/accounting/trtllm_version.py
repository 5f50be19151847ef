"""TensorRT-LLM's release text, read whole: the one reader of ``--engine-version`` (and a start-up row's release) for
every TensorRT-LLM rule that depends on the release (the runtime, the block rounding, the Llama-4 length, the
engine's float16 logits before 0.13, the newest release checked).

The text is taken only when the whole of it is one release as PEP 440 writes it (``vllm_releases.RELEASE_STRING``,
anchored at both ends): the releases TensorRT-LLM prints ("TensorRT-LLM version: 0.19.0", "Engine version 0.16.0
found in the config file", nightlies such as 0.13.0.dev2024082000, rc builds such as 1.0.0rc4; the start-ups of
benchmarks/data/trtllm_public_startups.csv). A prefix match (``^v?(\\d+)\\.(\\d+)``) also reads text that is no
release: the Triton image tag "25.05-trtllm" that TR03's log names beside its release as TensorRT-LLM 25.5 (PyTorch
backend, chunked attention for Llama-4), "0.20.0,1.2.1" as 0.20 (the TensorRT-engine executor).

A Triton/NGC container release (YY.MM: "24.07", "25.05-trtllm-python-py3") is PEP 440 too, and was read as
TensorRT-LLM 24.7; TensorRT-LLM's own releases are 0.x and 1.x. Such text is refused, naming the TensorRT-LLM release
NVIDIA lists inside that container where it is known (``NGC_TRTLLM_RELEASES``).
"""

from __future__ import annotations

import re

from kvledger.accounting.vllm_releases import RELEASE_STRING
from kvledger.errors import InputError

__all__ = ["NGC_TRTLLM_RELEASES", "trtllm_release", "trtllm_before"]

_PARTS = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?")
_CONTAINER = re.compile(r"v?(1[7-9]|[2-9]\d)\.(0?[1-9]|1[0-2])(?:-[\w.-]+)?")  # YY.MM[-tag]: NGC tags since 17.xx

NGC_TRTLLM_RELEASES = {
    "24.05": "0.9.0", "24.06": "0.10.0", "24.07": "0.11.0", "24.08": "0.12.0", "24.09": "0.13.0", "24.10": "0.14.0",
    "24.11": "0.15.0", "25.01": "0.17.0", "25.06": "0.20.0", "25.07": "0.20.0", "25.08": "0.21.0", "25.09": "1.0.0",
    "25.10": "1.0.0", "25.12": "1.1.0",
}
"""The TensorRT-LLM release inside NGC's ``nvcr.io/nvidia/tritonserver:YY.MM-trtllm-python-py3`` container, from the
"TensorRT-LLM version" column of NVIDIA's Triton "Release Compatibility Matrix" (container trtllm-python-py3): the
current page for 25.06–25.12 and the Triton 2.53.0 / 2.54.0 archived pages for 24.05–25.01. Left out: 24.12 (the
2.54.0 matrix lists 0.16.0, Triton's 24.12 release notes "release/0.15.0"), 25.11 (listed as "1.0.3.2510", no published
release), and 25.02–25.05, which those pages as read do not show."""


def trtllm_release(version: str) -> tuple[int, int, int]:
    """(major, minor, patch) of a TensorRT-LLM release text ("0.13.0.dev2024082000" → (0, 13, 0); "v99.0rc1" →
    (99, 0, 0)).

    Raises:
        InputError: text that is not, as a whole, one release.
    """
    text = str(version).strip()
    if (tag := _CONTAINER.fullmatch(text)) is not None:
        raise InputError(_container_words(version, f"{tag.group(1)}.{int(tag.group(2)):02d}"))  # 24.7: 24.07
    if not RELEASE_STRING.match(text):  # "1.2.1,0.21.0": no version, not 1.2.1 (one run each); "25.05-trtllm"
        raise InputError(f"--engine-version {version!r} is not one TensorRT-LLM version like 0.13.0 or 1.2.1")
    m = _PARTS.match(text)  # the whole text is a release (checked above): its leading numbers
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def _container_words(version: str, yy_mm: str) -> str:
    """The refusal of a container release given as the TensorRT-LLM version, with the release inside it where known."""
    known = NGC_TRTLLM_RELEASES.get(yy_mm)
    inside = (f"NVIDIA's Triton release compatibility matrix lists TensorRT-LLM {known} in "
              f"tritonserver:{yy_mm}-trtllm-python-py3, so --engine-version {known} if that is your container" if known
              else "its start-up log prints it (\"TensorRT-LLM version: …\")")
    return (f"--engine-version {version!r} is not one TensorRT-LLM version like 0.13.0 or 1.2.1: {yy_mm} looks like a "
            f"Triton/NGC container release (YY.MM), and TensorRT-LLM's own releases are 0.x and 1.x; give the "
            f"TensorRT-LLM version inside the container ({inside})")


def trtllm_before(version: str | None, first: tuple[int, ...]) -> bool:
    """Whether ``version`` is a release before ``first`` (compared on ``first``'s parts: (1, 0) reads 1.0.0rc4 as
    1.0); False with no version (the newest rules).

    Raises:
        InputError: text that is not, as a whole, one release (``trtllm_release``).
    """
    return bool(version) and trtllm_release(version)[:len(first)] < first
