"""vLLM at TP ≥ 2: NCCL's start-up inside the pre-0.11 profile window (vllm_nccl_init.py) and the engine's own switches
of custom all-reduce, vLLM's --nnodes and ROCm (vllm_custom_ar.engine_disables_ca)."""

from __future__ import annotations

import pytest

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.accounting.vllm_collectives import custom_all_reduce_max_bytes, non_torch_term
from kvledger.accounting.vllm_custom_ar import custom_ar_max_bytes, engine_disables_ca
from kvledger.accounting.vllm_nccl_init import NCCL_SET_BYTES, nccl_init_in_window
from kvledger.catalog.gpu_file import resolve_gpu
from kvledger.catalog.models import load_model
from kvledger.units import GiB, MiB

SET_MIB = 9.1875  # SIMPLE 4 MiB + LL 8 × 512 × 8 × 16 B (0.5 MiB) + LL128 120 × 640 × 8 × 8 B (4.6875 MiB)


def test_nccl_buffer_set_is_the_three_protocols_defaults():
    # NCCL init.cc: DEFAULT_BUFFSIZE 1 << 22, DEFAULT_LL_BUFFSIZE 524,288 B, DEFAULT_LL128_BUFFSIZE 4,915,200 B.
    assert NCCL_SET_BYTES == 4_194_304 + 524_288 + 4_915_200 == SET_MIB * MiB


@pytest.mark.parametrize("ver, tp, sets", [
    ((0, 8, 5), 2, 2),   # NCCL 2.21 (torch 2.6): ring 1 + tree 1 (a chain of 2: each end receives once)
    ((0, 8, 5), 4, 3),   # ring 1 + tree 2 (the chain's middle ranks receive from both sides)
    ((0, 10, 2), 4, 1),  # NCCL 2.27 (torch 2.8) connects lazily: the warm-up all-reduce connects the ring only
])
def test_nccl_start_up_before_0_11_by_nccl_release(ver, tp, sets):
    # 16 channels (Hopper NVSwitch, NVIDIA/nccl#892) × sets × 9.1875 MiB; range 8 channels × the fewest sets to 32 ×
    # the most (8.5: 2–3, 0.9+: 1–2).
    h200 = resolve_gpu("nvidia_h200_sxm")
    pt, lo, hi, src = nccl_init_in_window(ver, tp, h200)
    lo_sets, hi_sets = ((2, 3) if ver < (0, 9, 0) else (1, 2))
    assert (pt, lo, hi) == (16 * sets * NCCL_SET_BYTES, 8 * lo_sets * NCCL_SET_BYTES, 32 * hi_sets * NCCL_SET_BYTES)
    assert f"{16 * sets * SET_MIB:.0f} MiB" in src


def test_no_nccl_start_up_from_0_11_at_tp_1_or_on_rocm():
    # 0.11.0 gpu_worker.py::init_device sets the TP group up before its MemorySnapshot; TP 1 builds no communicator;
    # RCCL is not sized (the ROCm term is its own measured residual).
    h200, mi = resolve_gpu("nvidia_h200_sxm"), resolve_gpu("amd_mi300x")
    assert nccl_init_in_window((0, 11, 0), 4, h200)[0] == nccl_init_in_window((0, 10, 2), 1, h200)[0] == 0
    assert nccl_init_in_window((0, 9, 2), 2, mi)[0] == 0


def test_h200_tp4_before_0_11_adds_nccl_start_up_to_the_measured_residual():
    # The H200 TP-4 residual 0.80 GiB (0.74–1.82) is measured on 0.11.2–0.16.0, whose window holds no NCCL start-up.
    # 0.10.2 adds custom all-reduce's meta + buffer (2 × 8 MiB) and the ring's 16 × 9.1875 = 147 MiB:
    # point 0.80 GiB + 163 MiB; low 0.74 GiB + 16 + 8 × 9.1875 = 73.5 MiB; high 1.82 GiB + 16 + 32 × 2 × 9.1875 MiB.
    h200 = resolve_gpu("nvidia_h200_sxm")
    t = non_torch_term((0, 10, 2), 4, 1, 1, h200, False)
    assert t.bytes == pytest.approx(0.80 * GiB + 163 * MiB)
    assert t.low == pytest.approx(0.74 * GiB + 89.5 * MiB) and t.high == pytest.approx(1.82 * GiB + 604 * MiB)
    assert non_torch_term((0, 11, 0), 4, 1, 1, h200, False).bytes == pytest.approx(0.80 * GiB)


def test_ring_assumption_branch_gets_no_nccl_start_up():
    # L40S over PCIe, TP 2, 0.10.2: the assumed NCCL 0.2 GiB already stands for all of NCCL (pre-0.11 prints of
    # 0.20–0.43 GiB hold the start-up); base 0.13 + 0.2 = 0.33 GiB + custom all-reduce's meta + buffer (on at TP 2
    # with peer access, counted by 0.10.2: 2 × 8 MiB), nothing more.
    t = non_torch_term((0, 10, 2), 2, 1, 1, resolve_gpu("nvidia_l40s"), False)
    assert t.bytes == pytest.approx(0.33 * GiB + 16 * MiB) and "NCCL start-up" not in t.source


def test_vllm_nnodes_turns_custom_all_reduce_off_from_0_11_1():
    # TP 4 × PP 2 on 2 nodes: each TP group sits in one node. Under Ray (vLLM's nnodes stays 1) custom all-reduce is
    # on, 8 MiB max_size on sm90 at TP 4 (min(8 MiB, 32 MiB)); with mp (or vLLM's default, mp across nodes from
    # 0.11.1) it is vLLM's --nnodes 2, which ParallelConfig._verify_args turns off. 0.11.0 has no --nnodes: Ray.
    h100 = resolve_gpu("h100")
    assert custom_all_reduce_max_bytes((0, 19, 0), 4, 2, h100, False, 2, "ray") == 8 * MiB
    assert custom_all_reduce_max_bytes((0, 19, 0), 4, 2, h100, False, 2, "mp") == 0
    assert custom_all_reduce_max_bytes((0, 11, 1), 4, 2, h100, False, 2, None) == 0
    assert custom_all_reduce_max_bytes((0, 11, 0), 4, 2, h100, False, 2, None) == 8 * MiB
    assert "--nnodes 2" in engine_disables_ca((0, 19, 0), h100, 2, "mp")
    # 0.33.0's ParallelConfig no longer turns it off under --nnodes (custom_all_reduce.py decides per TP group): the
    # TP 4 group inside one node keeps its 8 MiB bound
    assert engine_disables_ca((0, 33, 0), h100, 2, "mp") is None
    assert custom_all_reduce_max_bytes((0, 33, 0), 4, 2, h100, False, 2, "mp") == 8 * MiB
    s = make_settings(engine_version="0.19.0", tp=4, pp=2, nnodes=2, distributed_executor_backend="mp")
    assert custom_ar_max_bytes(s, h100) == 0
    p = build_plan(load_model("meta-llama/Meta-Llama-3.1-70B"), h100, s, with_roofline=False, with_advice=False)
    assert any("ParallelConfig._verify_args" in d.source for d in p.memory.deductions)


@pytest.mark.parametrize("gpu, ver, on", [
    ("amd_mi300x", (0, 7, 3), False),   # 0.7.3 config.py: is_rocm() → disable_custom_all_reduce
    ("amd_mi300x", (0, 8, 5), True),    # gfx942 matches "gfx94" (platforms/rocm.py use_custom_allreduce)
    ("amd_mi355x", (0, 8, 5), False),   # gfx950: 0.8.5 lists gfx94 only
    ("amd_mi355x", (0, 9, 2), True),    # 0.9.2 adds gfx95
    ("amd_mi250x", (0, 19, 0), False),  # gfx90a: never
])
def test_rocm_runs_custom_all_reduce_on_the_mi300_series_only(gpu, ver, on):
    g = resolve_gpu(gpu)
    assert (custom_all_reduce_max_bytes(ver, 2, 1, g, False) > 0) is on
    assert (engine_disables_ca(ver, g, 1, None) is None) is on


def test_rocm_disable_custom_all_reduce_takes_off_what_the_release_counts():
    # MI300X TP 2. 0.9.2 snapshots before the TP group's set-up, so custom all-reduce's cudaMalloc'd meta + buffer
    # (2 × 8 MiB) are in the window: on = the ROCm residual + 16 MiB, --disable-custom-all-reduce = the residual (no
    # CustomAllreduce, and no quick all-reduce, built only beside it). 0.14.1: outside the window, identical. MI250X
    # (gfx90a) runs none: the flag changes nothing there either.
    mi = resolve_gpu("amd_mi300x")
    on, off = non_torch_term((0, 9, 2), 2, 1, 1, mi, False), non_torch_term((0, 9, 2), 2, 1, 1, mi, True)
    assert on.bytes - off.bytes == pytest.approx(16 * MiB) and "--disable-custom-all-reduce" in off.source
    assert non_torch_term((0, 14, 1), 2, 1, 1, mi, False).bytes == non_torch_term((0, 14, 1), 2, 1, 1, mi, True).bytes
    mi250 = resolve_gpu("amd_mi250x")
    assert non_torch_term((0, 9, 2), 2, 1, 1, mi250, False).bytes == non_torch_term((0, 9, 2), 2, 1, 1, mi250,
                                                                                     True).bytes
