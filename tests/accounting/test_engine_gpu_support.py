"""SGLang and TensorRT-LLM releases without kernels for Blackwell (``engine_gpu_support``)."""

from __future__ import annotations

import pytest

from kvledger.accounting.engine_gpu_support import NO_KERNELS, engine_gpu_note
from kvledger.catalog.gpu_file import resolve_gpu


@pytest.mark.parametrize("engine,version,gpu,warned", [
    # SGLang: 0.5.2 pins sgl-kernel 0.3.9.post2, the first PyPI wheel with sm100/sm120 SASS (0.3.7, pinned by
    # 0.5.1.post3, holds sm80/89/90 only); the post release counts: 0.5.1.post3 < 0.5.2.
    ("sglang", "0.4.1", "rtx-5090", True), ("sglang", "0.5.1.post3", "b200", True),
    ("sglang", "0.5.2", "rtx-5090", False), ("sglang", "0.5.2", "b200", False),
    ("sglang", "0.4.1", "h100", False),  # sm90 is in every sgl-kernel wheel read
    # TensorRT-LLM: B200 and RTX 50 (WSL) from 0.17.0 (release notes); 0.16.0 is on CUDA 12.6.3.
    ("trtllm", "0.13", "b200", True), ("trtllm", "0.16.0", "rtx-5090", True),
    ("trtllm", "0.17.0", "b200", False), ("trtllm", "1.2.0rc6", "rtx-5090", False),
    ("trtllm", "0.13", "h100", False),
    ("sglang", None, "b200", False),  # no version: the plan assumes a current release
])
def test_releases_before_the_first_with_kernels_are_warned(engine, version, gpu, warned):
    note = engine_gpu_note(engine, version, resolve_gpu(gpu))
    assert (note is not None) is warned
    if warned:
        assert NO_KERNELS in note and version in note


def test_note_names_the_first_release():
    note = engine_gpu_note("trtllm", "0.13", resolve_gpu("b200"))
    assert note.startswith("TensorRT-LLM 0.13 ships no kernels for sm100") and "0.17.0" in note
    note = engine_gpu_note("sglang", "0.4.1", resolve_gpu("rtx-5090"))
    assert note.startswith("SGLang 0.4.1 ships no kernels for sm120") and "0.5.2" in note
