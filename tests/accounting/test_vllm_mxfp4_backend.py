"""vLLM's MXFP4 MoE backend by release × GPU × environment (accounting/vllm_mxfp4_backend.py), the experts' layout it
sets in the memory plan and the MoE step cost it prices."""

from __future__ import annotations

import pytest

from kvledger.accounting.plan_roofline import mxfp4_moe_kernel
from kvledger.accounting.roofline import RooflineStepCost
from kvledger.accounting.settings import PlanSettings
from kvledger.accounting.vllm_mxfp4_backend import mxfp4_backend, mxfp4_note, mxfp4_plan
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.loading import loaded_weights
from kvledger.catalog.models import load_model
from kvledger.errors import InputError

GiB = 1 << 30


@pytest.mark.parametrize(("version", "arch", "backend"), [
    # 0.10.1.x: _should_use_marlin → Marlin off SM 10.0 while the pinned torch 2.7.1 fails is_torch_equal_or_newer
    ((0, 10, 1), "sm90", "marlin"),
    # SM 10.0 is not Marlin there; flashinfer-python only an extra, so no FlashInfer: the Triton path
    ((0, 10, 1), "sm100", "triton"),
    # 0.10.2 / 0.11.0 get_mxfp4_backend: no triton_kernels in a stock install → Marlin on Hopper and (no flashinfer
    # either) on Blackwell
    ((0, 10, 2), "sm90", "marlin"), ((0, 11, 0), "sm90", "marlin"), ((0, 11, 0), "sm100", "marlin"),
    # 0.11.1: flashinfer-python a dependency → FlashInfer TRT-LLM BF16 on SM 10.0; Hopper still Marlin (no
    # triton_kernels until the 0.12.0 wheel vendors it)
    ((0, 11, 1), "sm100", "flashinfer_trtllm"), ((0, 11, 2), "sm90", "marlin"),
    # 0.12.0 vendors vllm/third_party/triton_kernels → Triton on Hopper; Triton only below SM 11.0 → Marlin on SM 12.0
    ((0, 12, 0), "sm90", "triton"), ((0, 12, 0), "sm120", "marlin"),
    # 0.19.0 oracle: FlashInfer TRT-LLM first on SM 10.x, Triton first on SM 9.0, Marlin below SM 9.0 / on SM 12.0
    ((0, 19, 0), "sm100", "flashinfer_trtllm"), ((0, 19, 0), "sm90", "triton"), ((0, 19, 0), "sm120", "marlin"),
    ((0, 34, 0), "sm90", "triton"), ((0, 34, 0), "sm86", "marlin"),
    # Ampere and Ada: below SM 9.0, Marlin in every release
    ((0, 10, 1), "sm80", "marlin"), ((0, 11, 0), "sm89", "marlin"), ((0, 19, 0), "sm80", "marlin"),
])
def test_stock_install_backend(version, arch, backend):
    assert mxfp4_backend(version, arch).backend == backend


@pytest.mark.parametrize(("version", "arch", "env", "tk", "backend"), [
    # triton_kernels installed by hand on 0.10.2–0.11.x: get_mxfp4_backend takes Triton on Hopper
    ((0, 11, 0), "sm90", {}, True, "triton"),
    # … but not on 0.10.1.x, whose torch 2.7.1 still sends Hopper to Marlin
    ((0, 10, 1), "sm90", {}, True, "marlin"),
    # 0.10.1's VLLM_MXFP4_USE_MARLIN decides either way; 0.10.2/0.11.0 do not read it; 0.11.1+ it forces Marlin
    ((0, 10, 1), "sm90", {"VLLM_MXFP4_USE_MARLIN": False}, True, "triton"),
    ((0, 11, 0), "sm90", {"VLLM_MXFP4_USE_MARLIN": True}, True, "triton"),
    ((0, 12, 0), "sm90", {"VLLM_MXFP4_USE_MARLIN": True}, None, "marlin"),
    # VLLM_USE_FLASHINFER_MOE_MXFP4_BF16=1 on SM 9.0 with flashinfer (a dependency from 0.11.1): FlashInfer CUTLASS
    ((0, 12, 0), "sm90", {"VLLM_USE_FLASHINFER_MOE_MXFP4_BF16": True}, None, "flashinfer_cutlass"),
    # … ignored on 0.11.0, where a stock install has no flashinfer
    ((0, 11, 0), "sm90", {"VLLM_USE_FLASHINFER_MOE_MXFP4_BF16": True}, None, "marlin"),
    ((0, 19, 0), "sm90", {"VLLM_USE_FLASHINFER_MOE_MXFP4_BF16": True}, None, "flashinfer_cutlass"),
    # 0.19: =0 removes both FlashInfer BF16 backends, so SM 10.0 falls to Triton
    ((0, 19, 0), "sm100", {"VLLM_USE_FLASHINFER_MOE_MXFP4_BF16": False}, None, "triton"),
    ((0, 13, 0), "sm100", {"VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8_CUTLASS": True}, None, "flashinfer_cutlass"),
    # 0.19 without triton_kernels on Hopper: still Triton, as OAITritonExperts._supports_current_device checks the
    # capability only (gpt_oss_triton_kernels_moe.py; has_triton_kernels gates the LoRA path alone)
    ((0, 19, 0), "sm90", {}, False, "triton"),
    # 0.10.1: VLLM_MXFP4_USE_MARLIN=0 skips _should_use_marlin's checks, and the layer's next branch,
    # should_use_flashinfer_mxfp4() (VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1), takes FlashInfer TRT-LLM
    ((0, 10, 1), "sm100", {"VLLM_MXFP4_USE_MARLIN": False, "VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8": True}, None,
     "flashinfer_trtllm"),
    # 0.23.0 still reads the (deprecated) variables; 0.24.0 and 0.34.0 have none of them in envs.py or
    # oracle/mxfp4.py: =0 no longer removes FlashInfer TRT-LLM on SM 10.0, =1 on SM 8.0 is no refusal (Marlin)
    ((0, 23, 0), "sm100", {"VLLM_USE_FLASHINFER_MOE_MXFP4_BF16": False}, None, "triton"),
    ((0, 24, 0), "sm100", {"VLLM_USE_FLASHINFER_MOE_MXFP4_BF16": False}, None, "flashinfer_trtllm"),
    ((0, 34, 0), "sm80", {"VLLM_USE_FLASHINFER_MOE_MXFP4_BF16": True}, None, "marlin"),
    ((0, 34, 0), "sm90", {"VLLM_MXFP4_USE_MARLIN": True}, None, "triton"),
    # 0.19: the MXFP8 CUTLASS variable on SM 12.0: FlashInferExperts takes MXFP4 × MXFP8 from has_device_capability(100)
    ((0, 19, 0), "sm120", {"VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8_CUTLASS": True}, None, "flashinfer_cutlass"),
])
def test_environment_and_installed_packages(version, arch, env, tk, backend):
    assert mxfp4_backend(version, arch, env, tk).backend == backend


def test_refusals_and_given():
    with pytest.raises(InputError, match="VLLM_USE_FLASHINFER_MOE_MXFP4_BF16"):  # vLLM raises ValueError below SM 9.0
        mxfp4_backend((0, 19, 0), "sm80", {"VLLM_USE_FLASHINFER_MOE_MXFP4_BF16": True})
    # 0.19's _return_or_raise: TrtLlmMxfp4Experts needs the SM 10.x family, FlashInferExperts' MXFP4 × MXFP8 SM 10.0+
    with pytest.raises(InputError, match="VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8=1 on SM 9.0"):
        mxfp4_backend((0, 19, 0), "sm90", {"VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8": True})
    with pytest.raises(InputError, match="MXFP8_CUTLASS=1 on SM 9.0.*SM 10.0 or later"):
        mxfp4_backend((0, 19, 0), "sm90", {"VLLM_USE_FLASHINFER_MOE_MXFP4_MXFP8_CUTLASS": True})
    with pytest.raises(InputError, match="--mxfp4-backend"):
        mxfp4_backend((0, 19, 0), "sm90", given="cutlass")
    assert mxfp4_backend((0, 11, 0), "sm90", given="triton").backend == "triton"
    assert mxfp4_backend((0, 11, 0), "", given="triton") is None  # not NVIDIA: the loading rules' own ROCm path


def test_plan_names_the_backend_and_the_other_end():
    m = load_model("openai/gpt-oss-120b")
    # 0.11.0 on Hopper: Marlin, and Triton once triton_kernels is installed (the weights' other end)
    assert mxfp4_plan(m, "sm90", (0, 11, 0))[:2] == ("marlin", "triton")
    # 0.12.0 bundles triton_kernels: Triton, no other end; a backend given: no other end
    assert mxfp4_plan(m, "sm90", (0, 12, 0))[:2] == ("triton", "")
    assert mxfp4_plan(m, "sm90", (0, 11, 0), "triton")[:2] == ("triton", "")
    assert mxfp4_plan(load_model("Qwen/Qwen3-30B-A3B"), "sm90", (0, 11, 0)) is None
    note = mxfp4_note(m, "sm90", (0, 11, 0))
    assert note == ("MXFP4 experts: marlin — vLLM 0.11.0 on sm90, no triton_kernels (no dependency of the wheel), "
                    "flashinfer-python an extra: Marlin, as Triton needs triton_kernels; --mxfp4-backend triton where "
                    "triton_kernels is installed")


def test_marlin_layout_in_the_weights():
    # gpt-oss-120b, TP 1: hidden 2,880 → 3,072 (Marlin rounds to 256), intermediate 2,880 → 2,944 (to 128); Triton
    # rounds the intermediate to 64: 2,880 already is (45 × 64). MXFP4 holds 4.25 bits a weight (0.53125 B):
    #   gate_up: (2·2,944 · 3,072 − 5,760 · 2,880) · 0.53125 = (18,087,936 − 16,588,800) · 0.53125 = 796,416 B
    #   down:    (3,072 · 2,944 − 2,880 · 2,880) · 0.53125 = (9,043,968 − 8,294,400) · 0.53125 = 398,208 B
    # per expert 1,194,624 B × 128 experts × 36 layers = 5,504,827,392 B (the biases are loaded unpadded)
    m = load_model("openai/gpt-oss-120b")
    marlin = loaded_weights(m, gpu_arch="sm90", engine_version=(0, 11, 0), mxfp4=("marlin", "triton"))
    triton = loaded_weights(m, gpu_arch="sm90", engine_version=(0, 11, 0), mxfp4=("triton", ""))
    assert "+5,504,827,392 B of padding per GPU" in marlin.how
    assert "Triton layout on sm90 (intermediate 2,880 → 2,880): no padding" in triton.how
    # the 72 fused expert tensors each round to the allocator's 2 MiB segments: within 72 × 2 MiB of the padding
    assert marlin.bytes - triton.bytes == pytest.approx(5_504_827_392, abs=72 * 2 * 2**20)
    assert marlin.marlin_bytes == triton.bytes  # the other end: the Triton layout's bytes
    # vLLM 0.10.1 (Marlin on Hopper) logged 'Model loading took 65.9651 GiB' for it (vllm#23278): the same layout
    assert marlin.bytes / GiB == pytest.approx(65.97, abs=0.03)


def test_step_cost_prices_the_chosen_kernel():
    m, g = load_model("openai/gpt-oss-120b"), get_gpu("h100-sxm")
    # a stock 0.11.0 on Hopper: Marlin (no triton_kernels); 0.12.0 vendors it: matmul_ogs, whose block rule is
    # triton v3.5's there ("ogs"), the later one in 0.17-0.21 ("ogs_ragged", moe_rows.OGS_RAGGED_VLLM)
    assert mxfp4_moe_kernel(m, g, PlanSettings(engine_version="0.11.0")) == "marlin"
    assert mxfp4_moe_kernel(m, g, PlanSettings(engine_version="0.12.0")) == "ogs"
    assert mxfp4_moe_kernel(m, g, PlanSettings(engine_version="0.19.0")) == "ogs_ragged"
    assert mxfp4_moe_kernel(m, g, PlanSettings(engine_version="0.11.0", mxfp4_backend="triton")) == "ogs"
    assert mxfp4_moe_kernel(m, g, PlanSettings(engine="sglang")) == ""
    from kvledger.accounting.kvcache import kv_ledger

    kv = kv_ledger(m, "auto", 1)
    mar = RooflineStepCost(m, g, kv, 1, mxfp4_moe="marlin")
    tri = RooflineStepCost(m, g, kv, 1, mxfp4_moe="ogs")
    assert (mar.marlin_moe, mar.ogs_moe, tri.marlin_moe, tri.ogs_moe) == (True, False, False, True)
    # Marlin runs the padded shapes: (3,072 · 2,944) / (2,880 · 2,880) = 9,043,968 / 8,294,400 = 1.090370…
    assert mar.expert_pad == pytest.approx(9_043_968 / 8_294_400, rel=1e-12)
    assert tri.expert_pad == 1.0
    # TP 2: each rank's 1,440 → 1,536: (3,072 · 1,536) / (2,880 · 1,440) = 4,718,592 / 4,147,200 = 1.137778
    assert RooflineStepCost(m, g, kv_ledger(m, "auto", 2), 2, mxfp4_moe="marlin").expert_pad == \
        pytest.approx(4_718_592 / 4_147_200, rel=1e-12)
    # the default ("" : by GPU, SGLang's path) keeps matmul_ogs on Hopper
    assert RooflineStepCost(m, g, kv, 1).ogs_moe
