"""vLLM on ROCm: the MI300X non-torch residual by TP and the weights' upward range (accounting/vllm_rocm.py)."""

from __future__ import annotations

import pytest

from kvledger.accounting.vllm_collectives import non_torch_term
from kvledger.accounting.vllm_rocm import rocm_non_torch_term
from kvledger.accounting.vllm_terms import weights_item
from kvledger.catalog.gpu_file import resolve_gpu
from kvledger.catalog.models import load_model
from kvledger.units import GiB


def test_mi300x_non_torch_is_the_measured_residual_by_tp():
    # vme_startups.csv, MI300X, vLLM 0.11.2-0.18.0, budget 0.92 x 191.98 GiB (the device total HIP reports): 1.22 GiB at
    # TP 1 (1.12-1.32), 1.62 at TP 4 (1.55-1.74), 3.47 at TP 8 (3.31-5.14); the H100 NVSwitch figure (2.13 GiB at TP 4)
    # is not used on ROCm.
    mi = resolve_gpu("amd_mi300x")
    for tp, (pt, lo, hi) in ((1, (1.22, 1.12, 1.32)), (4, (1.62, 1.55, 1.74)), (8, (3.47, 3.31, 5.14))):
        t = non_torch_term((0, 14, 1), tp, 1, 1, mi, False)
        assert (t.bytes / GiB, t.low / GiB, t.high / GiB) == pytest.approx((pt, lo, hi))


def test_rocm_non_torch_outside_the_data_interpolates_and_widens():
    # TP 2 on MI300X: log2 halfway between TP 1 and TP 4 is 1/2 of the way: 1.22 + (1.62 - 1.22) / 2 = 1.42 GiB; not
    # measured, so the range is the neighbours' 1.12-1.74 widened x0.5-x1.5: 0.56-2.61 GiB. MI325X at TP 8 keeps the
    # MI300X point (3.47) with 1.655-7.71 GiB.
    b, lo, hi, _, why = rocm_non_torch_term((0, 14, 1), 2, 1, resolve_gpu("amd_mi300x"))
    assert (b / GiB, lo / GiB, hi / GiB) == pytest.approx((1.42, 0.56, 2.61))
    assert "not measured" in why
    b, lo, hi, _, _ = rocm_non_torch_term((0, 14, 1), 8, 1, resolve_gpu("amd_mi325x"))
    assert (b / GiB, lo / GiB, hi / GiB) == pytest.approx((3.47, 1.655, 7.71))


def test_rocm_weights_range_reaches_up_2_5_percent():
    # ROCm logs the weights as device-wide used memory: 100 GiB of tensors may print up to 102.5 GiB. CUDA: the
    # tensors −0.1% … +0.25% (load-time buffers seen in the public corpus) and ±0.005 GiB of the log's print:
    # 100 × 0.999 − 0.005 = 99.895 GiB, 100 × 1.0025 + 0.005 = 100.255 GiB.
    m = load_model("meta-llama/Meta-Llama-3.1-70B")
    d = weights_item(100 * GiB, "x", m, "", rocm=True)
    assert (d.low_bytes, d.high_bytes) == (100 * GiB, pytest.approx(102.5 * GiB))
    cuda = weights_item(100 * GiB, "x", m, "sm90")
    assert (cuda.low_bytes / GiB, cuda.high_bytes / GiB) == pytest.approx((99.895, 100.255))


def test_hopper_nvswitch_tp4_before_018_is_the_measured_residual():
    # vme_startups.csv, H200 TP 4, vLLM 0.11.2-0.16.0: the residual is 0.74-0.84 GiB (Llama-3.3-70B bf16/FP8, Qwen3-235B
    # bf16), 1.80-1.82 with expert parallelism; from 0.18 the H200 residual 2.304-2.354 (18 rows) → 2.34 GiB
    # (test_vllm_mechanisms.test_h200_nvswitch_tp4_non_torch_from_0_18), where the H100 2.13 GiB was applied.
    h200 = resolve_gpu("nvidia_h200_sxm")
    t = non_torch_term((0, 14, 1), 4, 1, 1, h200, False)
    assert (t.bytes / GiB, t.low / GiB, t.high / GiB) == pytest.approx((0.80, 0.74, 1.82))
    assert non_torch_term((0, 18, 0), 4, 1, 1, h200, False).bytes / GiB == pytest.approx(2.34)


def test_hopper_nvswitch_tp8_by_release_era():
    # DeepSeek-R1 FP8 on H200 at TP 8 (vme_startups.csv): residual = requested - printed weights - printed available KV
    # - code activation peak. 0.13.0 (record 57e8be60): requested 0.92 x 139.962 = 128.765 GiB; activation 1,024 x
    # 129,280 x (2 + 35.95) B + 8,192 x 7,168 x 2 B + 0.05 GiB = 4.838 GiB (Triton fused_experts at TP 8 frees its
    # caches); 128.765 - 79.739 - 43.12 - 4.838 = 1.068 GiB. Per release: 0.83, 1.07, 1.00, 1.00 (0.11.2, 0.13.0,
    # 0.14.1, 0.16.0) -> median 1.00, rows 0.82-1.08. From 0.18 (profile_cudagraph_memory inside the window,
    # gpu_worker.py 0.18.0): 2.52-2.54 -> 2.53.
    h200 = resolve_gpu("nvidia_h200_sxm")
    t = non_torch_term((0, 14, 1), 8, 1, 1, h200, False)
    assert (t.bytes / GiB, t.low / GiB, t.high / GiB) == pytest.approx((1.00, 0.82, 1.08))
    t = non_torch_term((0, 19, 0), 8, 1, 1, h200, False)
    assert (t.bytes / GiB, t.low / GiB, t.high / GiB) == pytest.approx((2.53, 2.51, 2.54))
    # Releases after 0.19 keep the point; unmeasured, the range runs down to the pre-0.18 rows' 0.82 and up 0.3 GiB.
    t = non_torch_term((0, 33, 0), 8, 1, 1, h200, False)
    assert (t.bytes / GiB, t.low / GiB, t.high / GiB) == pytest.approx((2.53, 0.82, 2.84))
    # 0.17 has no profile_cudagraph_memory call (gpu_worker.py 0.17.0): the pre-0.18 figure.
    assert non_torch_term((0, 17, 0), 8, 1, 1, h200, False).bytes / GiB == pytest.approx(1.00)
    # --disable-custom-all-reduce keeps the measured basis, less the buffers 0.14.1 counts: none (allocated before its
    # init snapshot, gpu_worker.py::init_device), so 1.00 (0.82-1.08) again. Outside the measured set-up the H100 rule
    # holds: B200 (sm100) at TP 8 before 0.18 (from 0.18 B200 has its own figure, BLACKWELL_NVSWITCH_GIB):
    # 2.07 + 0.06 x log2(8/2) = 2.19 GiB.
    off = non_torch_term((0, 14, 1), 8, 1, 1, h200, True)
    assert (off.bytes / GiB, off.low / GiB, off.high / GiB) == pytest.approx((1.00, 0.82, 1.08))
    assert non_torch_term((0, 16, 0), 8, 1, 1, resolve_gpu("nvidia_b200"), False).bytes / GiB == pytest.approx(2.19)


def test_enforce_eager_from_018_is_the_pre_018_term():
    # From 0.18 the CUDA-graph profiling runs inside the memory_profiling window unless --enforce-eager
    # (gpu_worker.py 0.18.0/0.19.0: `if not self.model_config.enforce_eager and not current_platform.is_rocm()`;
    # config/vllm.py sets compilation mode and cudagraph_mode to NONE), so an eager window holds what a pre-0.18 one
    # held: H200 TP 8 the pre-0.18 rows' 1.00 (0.82-1.08) instead of 2.53; H100 TP 1 0.13 (0.11-0.15) instead of 0.25.
    # Before 0.18 --enforce-eager changes nothing.
    h200, h100 = resolve_gpu("nvidia_h200_sxm"), resolve_gpu("h100")
    t = non_torch_term((0, 19, 0), 8, 1, 1, h200, False, enforce_eager=True)
    assert (t.bytes / GiB, t.low / GiB, t.high / GiB) == pytest.approx((1.00, 0.82, 1.08))
    assert t.source.startswith("--enforce-eager")
    t = non_torch_term((0, 19, 0), 1, 1, 1, h100, False, enforce_eager=True)
    assert (t.bytes / GiB, t.low / GiB, t.high / GiB) == pytest.approx((0.13, 0.11, 0.15))
    assert non_torch_term((0, 16, 0), 8, 1, 1, h200, False, True) == non_torch_term((0, 16, 0), 8, 1, 1, h200, False)


def test_rocm_subtracts_no_cuda_graph_estimate_before_0_26():
    # gpu_worker.py::determine_available_memory estimates CUDA graphs only `if not current_platform.is_rocm()` in 0.20.0
    # and `if current_platform.is_cuda()` in 0.21.0-0.25.0; from 0.26.0 `if current_platform.is_cuda_alike()` takes
    # ROCm in (wheels 0.20.0-0.26.0 read). Llama-3.1-8B on the V1 runner, 8,192 tokens: H100 subtracts 244 + 2 x 50 x 5
    # = 744 MiB at 0.22 and 0.26; MI300X nothing at 0.22 (0.727 GiB more KV: 158.45 vs 157.72 GiB), 744 MiB at 0.26.
    # (The sampler's Triton buffer takes min(304 CUs, 1,024 requests) rows of 128,256 × 4 B on an MI300X: 172 rows more
    # than an H100's 132, 88,240,128 B = 0.082 GiB less KV than the 158.53 / 157.80 of 132 rows.)
    from kvledger.accounting.plan import build_plan
    from kvledger.accounting.settings import make_settings
    from kvledger.units import MiB

    m = load_model("meta-llama/Meta-Llama-3.1-8B")

    def graphs(gpu: str, ver: str):
        p = build_plan(m, resolve_gpu(gpu), make_settings(engine_version=ver, model_runner="v1", max_model_len=8192),
                       with_roofline=False, with_advice=False).memory
        return next(d for d in p.deductions if d.name.startswith("CUDA graphs")), p.available_kv_bytes / GiB

    (mi22, kv22), (mi26, kv26) = graphs("amd_mi300x", "0.22.0"), graphs("amd_mi300x", "0.26.0")
    assert mi22.bytes == 0 and "on ROCm" in mi22.source and mi26.bytes == 744 * MiB
    assert (kv22, kv26) == (pytest.approx(158.45, abs=0.01), pytest.approx(157.72, abs=0.01))
    assert graphs("nvidia_h100_sxm", "0.22.0")[0].bytes == 744 * MiB
    # before 0.20 no platform subtracts: the generic note, without ROCm's words
    old = graphs("amd_mi300x", "0.19.0")[0]
    assert old.bytes == 0 and "on ROCm" not in old.source
