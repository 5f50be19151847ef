"""B300 / GB300 are compute capability 10.3 (NVIDIA's "CUDA GPU Compute Capability" table; B200 / GB200 10.0): the
catalog keeps them in the sm100 family (``GpuSpec.arch``) and records the exact capability (``GpuSpec.capability``)
for the vLLM rules that test one capability exactly.

* MXFP4 MoE (``vllm/model_executor/layers/quantization/mxfp4.py``): 0.10.1's ``_should_use_marlin`` and 0.10.2–0.12.0's
  ``get_mxfp4_backend`` send ``is_device_capability(100)`` — SM 10.0 exactly — to FlashInfer; 0.13.0 (and 0.14.0,
  0.18.0) test ``is_device_capability_family(100)``, so 10.3 goes to FlashInfer from 0.13.0 only.
* Custom all-reduce's size cap (``distributed/device_communicators/all_reduce_utils.py CUSTOM_ALL_REDUCE_MAX_SIZES``,
  looked up by ``get_device_capability().as_version_str()``): "9.0" and "10.0" rows in 0.11.0–0.18.0, a "10.3" row
  (2: 4 MiB, 4: 4 MiB, 6: 8 MiB, 8: 4 MiB) from 0.19.0; a capability with no row keeps the 8 MiB default.
"""

from __future__ import annotations

import pytest

from kvledger.accounting.vllm_custom_ar import ca_max_size, custom_all_reduce_max_bytes
from kvledger.accounting.vllm_mxfp4_backend import mxfp4_backend, mxfp4_note
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model

MiB = 1 << 20


def test_the_catalog_records_103_for_b300_and_gb300_only():
    got = {g: (get_gpu(g).arch, get_gpu(g).capability, get_gpu(g).exact_arch) for g in ("b200", "gb200", "b300",
                                                                                        "gb300", "h100")}
    assert got == {"b200": ("sm100", 100, "sm100"), "gb200": ("sm100", 100, "sm100"),
                   "b300": ("sm100", 103, "sm103"), "gb300": ("sm100", 103, "sm103"), "h100": ("sm90", 90, "sm90")}


@pytest.mark.parametrize(("version", "b200", "b300"), [
    # 0.10.1: _should_use_marlin skips Marlin on SM 10.0 only; 10.3 without triton_kernels (none in the wheel) → Marlin
    ((0, 10, 1), "triton", "marlin"),
    # 0.11.1: flashinfer-python a dependency, FlashInfer on SM 10.0 only; 10.3 falls to the Triton/Marlin choice, and
    # the 0.11.1 wheel has no triton_kernels → Marlin (Triton once it is installed)
    ((0, 11, 1), "flashinfer_trtllm", "marlin"),
    # 0.12.0 vendors triton_kernels and Triton takes 9.0 <= capability < 11.0 → Triton on 10.3
    ((0, 12, 0), "flashinfer_trtllm", "triton"),
    # 0.13.0 on: the SM 10.x family → FlashInfer TRT-LLM on both
    ((0, 13, 0), "flashinfer_trtllm", "flashinfer_trtllm"), ((0, 18, 0), "flashinfer_trtllm", "flashinfer_trtllm"),
    ((0, 19, 0), "flashinfer_trtllm", "flashinfer_trtllm"),
])
def test_mxfp4_backend_b200_against_b300(version, b200, b300):
    assert mxfp4_backend(version, get_gpu("b200").exact_arch).backend == b200
    assert mxfp4_backend(version, get_gpu("b300").exact_arch).backend == b300


def test_a_b300_with_triton_kernels_on_0_11_1_runs_triton_and_the_plan_says_so():
    assert mxfp4_backend((0, 11, 1), "sm103", triton_kernels=True).backend == "triton"
    note = mxfp4_note(load_model("openai/gpt-oss-20b"), get_gpu("b300").exact_arch, (0, 11, 1))
    assert note.startswith("MXFP4 experts: marlin — vLLM 0.11.1 on sm103")
    assert "--mxfp4-backend triton where triton_kernels is installed" in note


@pytest.mark.parametrize(("version", "tp", "b200", "b300"), [
    ((0, 18, 0), 2, 2 * MiB, 8 * MiB),  # no "10.3" row: B300 keeps 8 MiB
    ((0, 19, 0), 2, 2 * MiB, 4 * MiB), ((0, 19, 0), 6, 1 * MiB, 8 * MiB), ((0, 19, 0), 8, 1 * MiB, 4 * MiB),
])
def test_custom_all_reduce_cap_by_exact_capability(version, tp, b200, b300):
    assert ca_max_size(version, tp, "sm100") == b200 and ca_max_size(version, tp, "sm103") == b300
    # through the GPU: TP 2 in one node, custom all-reduce on (NVLink peer access)
    if tp == 2:
        assert custom_all_reduce_max_bytes(version, 2, 1, get_gpu("b300"), False) == b300
