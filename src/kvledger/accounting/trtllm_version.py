"""TensorRT-LLM's release text, read whole: the one reader of ``--engine-version`` (and a start-up row's release) for
every TensorRT-LLM rule that depends on the release (the runtime, the block rounding, the Llama-4 length, the
engine's float16 logits before 0.13, the newest release checked).

The text is taken only when the whole of it is one release as PEP 440 writes it (``vllm_releases.RELEASE_STRING``,
anchored at both ends): the releases TensorRT-LLM prints ("TensorRT-LLM version: 0.19.0", "Engine version 0.16.0
found in the config file", nightlies such as 0.13.0.dev2024082000, rc builds such as 1.0.0rc4; the start-ups of
benchmarks/data/trtllm_public_startups.csv). A prefix match (``^v?(\\d+)\\.(\\d+)``) also reads text that is no
release: the Triton image tag "25.05-trtllm" that TR03's log names beside its release as TensorRT-LLM 25.5 (PyTorch
backend, chunked attention for Llama-4), "0.20.0,1.2.1" as 0.20 (the TensorRT-engine executor).
"""

from __future__ import annotations

import re

from kvledger.accounting.vllm_releases import RELEASE_STRING
from kvledger.errors import InputError

__all__ = ["trtllm_release", "trtllm_before"]

_PARTS = re.compile(r"v?(\d+)\.(\d+)(?:\.(\d+))?")


def trtllm_release(version: str) -> tuple[int, int, int]:
    """(major, minor, patch) of a TensorRT-LLM release text ("0.13.0.dev2024082000" → (0, 13, 0); "v99.0rc1" →
    (99, 0, 0)).

    Raises:
        InputError: text that is not, as a whole, one release.
    """
    text = str(version).strip()
    if not RELEASE_STRING.match(text):  # "1.2.1,0.21.0": no version, not 1.2.1 (one run each); "25.05-trtllm"
        raise InputError(f"--engine-version {version!r} is not one TensorRT-LLM version like 0.13.0 or 1.2.1")
    m = _PARTS.match(text)  # the whole text is a release (checked above): its leading numbers
    return int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)


def trtllm_before(version: str | None, first: tuple[int, ...]) -> bool:
    """Whether ``version`` is a release before ``first`` (compared on ``first``'s parts: (1, 0) reads 1.0.0rc4 as
    1.0); False with no version (the newest rules).

    Raises:
        InputError: text that is not, as a whole, one release (``trtllm_release``).
    """
    return bool(version) and trtllm_release(version)[:len(first)] < first
