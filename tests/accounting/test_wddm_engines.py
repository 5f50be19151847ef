"""plan --wddm for vLLM and SGLang: the whole-board total, the display driver's hold where each version's code counts
it, and vLLM's start-up check (accounting/wddm_engines.py)."""

from __future__ import annotations

import math

import pytest

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.accounting.wddm import WDDM_HELD_NAME
from kvledger.accounting.wddm_engines import vllm_counts_other_processes
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model
from kvledger.units import GiB, MiB

LLAMA = load_model("meta-llama/Llama-3.1-8B")
RTX5090 = get_gpu("rtx5090")
BOARD = 32_607 * MiB  # nvidia-smi's RTX 5090 total (gpus.csv) = 34,190,917,632 B = 31.84 GiB, CUDA's total under WDDM
LINUX = 32_157 * MiB  # the catalog's Linux CUDA total: 32,607 − 450 MiB reserve = 33,719,058,432 B = 31.40 GiB
# wddm.py's hold on this board: 0.393 + 0.0283 × 31.8427734375 GiB = 1.29415048828125 GiB = 1,389,583,505.82 B,
# range −0.30 / +1.70 GiB about it: 0.99415 GiB = 1,067,460,958.62 B and 2.99415 GiB = 3,214,944,606.62 B
HOLD_LO, HOLD, HOLD_HI = 1_067_460_958.6176, 1_389_583_505.8176, 3_214_944_606.6176
# vLLM's own process at the snapshot, TP 1, off the corpus's H100 (startup_free.LINUX_CONTEXT_GIB): 0.45 GiB,
# 0.37–0.51 (before: SGLang's pre-load figure, 0.42 GiB, 0.13–0.75)
OWN_LO, OWN, OWN_HI = 0.37 * GiB, 0.45 * GiB, 0.51 * GiB


def _mem(engine: str = "vllm", **kw):
    s = make_settings(engine=engine, max_model_len=32_768, **kw)
    return build_plan(LLAMA, RTX5090, s, with_roofline=False, with_advice=False).memory


def test_vllm_v1_budget_is_a_share_of_the_whole_board_and_the_hold_stays_out_of_the_kv():
    # vLLM 0.19 (v1/worker/utils.py::request_memory): requested = ceil(total × 0.9), the 0.16–0.19 default.
    # --wddm: ceil(34,190,917,632 × 0.9) = ceil(30,771,825,868.8) = 30,771,825,869 B (28.66 GiB);
    # Linux: ceil(33,719,058,432 × 0.9) = 30,347,152,589 B. The profile counts growth since the init snapshot, so the
    # hold is in no term: the KV grows by exactly the budget's difference, 0.9 × 450 MiB = 424,673,280 B.
    w, lin = _mem(engine_version="0.19.0", wddm=True), _mem(engine_version="0.19.0")
    assert (w.gpu_total_bytes, w.requested_bytes) == (BOARD, 30_771_825_869)
    assert lin.requested_bytes == 30_347_152_589
    assert WDDM_HELD_NAME not in {d.name for d in w.deductions}
    assert w.available_kv_bytes - lin.available_kv_bytes == 424_673_280
    # the ranges come from the board (a point, no Linux range) less the same terms' ends
    assert w.ranges["available_kv_bytes"][1] - w.ranges["available_kv_bytes"][0] == pytest.approx(
        sum(d.high_bytes - d.low_bytes for d in w.deductions), abs=2)


def test_vllm_0_19_start_up_limit_on_an_rtx_5090():
    # free at the snapshot = board − hold − this process: 34,190,917,632 − 1,389,583,505.82 − 483,183,820.8 =
    # 32,318,150,305.38 B (30.10 GiB); largest utilization that starts = free ÷ board = 0.94523 → 0.945 (the public
    # WSL2 RTX 5090 refusals print 30.2 free of 31.84 GiB: 0.948). Low end (hold 2.99 GiB, process 0.51 GiB):
    # 30,428,364,695.14 B = 28.34 GiB ÷ board = 0.88995 → 0.889; high end (hold 0.99 GiB, process 0.37 GiB):
    # 32,726,172,198.50 B = 30.48 GiB, 0.95716 → 0.957. Before (process 0.42, 0.13–0.75 GiB): 30.13 GiB (28.10–30.72),
    # 0.946 (0.882–0.964).
    st = _mem(engine_version="0.19.0", wddm=True).startup
    free = BOARD - HOLD - OWN
    assert st.free_bytes == pytest.approx(free, abs=1) == pytest.approx(32_318_150_305.38, abs=1)
    assert st.free_low_bytes == pytest.approx(BOARD - HOLD_HI - OWN_HI, abs=1) == pytest.approx(30_428_364_695.14,
                                                                                             abs=1)
    assert st.free_high_bytes == pytest.approx(BOARD - HOLD_LO - OWN_LO, abs=1) == pytest.approx(32_726_172_198.50,
                                                                                              abs=1)
    assert (st.max_utilization, st.max_utilization_low, st.max_utilization_high) == (0.945, 0.889, 0.957)
    assert st.max_utilization == math.floor(free / BOARD * 1000) / 1000
    # 0.9 asks ceil(0.9 × board) = 28.66 GiB: under the point's 30.10, over the low end's 28.34 GiB
    assert st.verdict == "may_refuse"
    assert "Free memory on device ... on startup is less than desired GPU memory utilization" in st.message
    # 0.95 asks ceil(0.95 × board) = 30.25 GiB, over the point: refused
    st = _mem(engine_version="0.19.0", wddm=True, gpu_memory_utilization=0.95).startup
    assert (st.requested_bytes, st.verdict) == (math.ceil(BOARD * 0.95), "refuses")
    # 0.88 asks 28.02 GiB, under even the low end: starts
    assert _mem(engine_version="0.19.0", wddm=True, gpu_memory_utilization=0.88).startup.verdict == "starts"


def test_vllm_versions_that_count_the_hold_take_it_off_the_kv():
    # 0.8.5's V1 profile (gpu_worker.py::determine_available_memory) adds (total − free) − torch allocated, device-wide:
    # the hold comes off the KV 1:1 and nothing is checked at start-up. KV difference vs Linux: 0.9 × 450 MiB − hold.
    assert [vllm_counts_other_processes(v) for v in ((0, 6, 3), (0, 6, 4), (0, 6, 6), (0, 8, 5), (0, 9, 0), (0, 9, 1),
                                                      (0, 19, 0))] == [False, True, False, True, True, False, False]
    w, lin = _mem(engine_version="0.8.5", wddm=True), _mem(engine_version="0.8.5")
    assert w.startup is None
    held = next(d for d in w.deductions if d.name == WDDM_HELD_NAME)
    assert (held.bytes, held.low_bytes, held.high_bytes) == pytest.approx((HOLD, HOLD_LO, HOLD_HI), abs=1)
    assert w.available_kv_bytes - lin.available_kv_bytes == pytest.approx(0.9 * 450 * MiB - HOLD, abs=2)


def test_vllm_v0_has_no_start_up_check_and_may_run_out():
    # 0.6.3 (worker.py: peak = init_gpu_memory − free after the profile): the hold is not counted, nothing is checked;
    # 0.9 asks 28.66 GiB, more than the low end leaves free (28.34): a warning that it may run out of memory, not a
    # refusal; 0.95 asks 30.25 GiB, more than the point leaves (30.10): it runs out.
    st = _mem(engine_version="0.6.3", wddm=True).startup
    assert st.verdict == "may_run_out" and "neither checks at start-up" in st.message
    assert _mem(engine_version="0.6.3", wddm=True, gpu_memory_utilization=0.95).startup.verdict == "runs_out"


def test_sglang_loses_the_hold_times_its_fraction():
    # SGLang 0.5.23 (kv_cache_configurator.py::_profile_available_bytes): KV = free before load × f − the load, so the
    # board (+450 MiB = 471,859,200 B over Linux) less the hold (1,389,583,505.82 B) moves the KV by (450 MiB − hold)
    # × f = −917,724,305.82 × 0.789 ≈ −0.67 GiB, give or take the int() of each plan (≤ 1 B). f = 0.789 on both (from
    # nvidia-smi's total, the same board).
    w, lin = _mem("sglang", wddm=True), _mem("sglang")
    assert (w.gpu_total_bytes, w.fraction) == (BOARD, lin.fraction)
    assert w.requested_bytes == pytest.approx(lin.requested_bytes + 450 * MiB - HOLD, abs=1)
    assert w.available_kv_bytes - lin.available_kv_bytes == pytest.approx((450 * MiB - HOLD) * w.fraction, abs=1)
    # low ends: Linux's total is the board less up to 800 MiB of reserve (gpus.csv range), --wddm's the board less the
    # hold's high 2.99 GiB: (3,214,944,606.62 − 838,860,800) B × 0.789 ≈ 1.75 GiB less KV at the low end
    lo_gap = lin.ranges["available_kv_bytes"][0] - w.ranges["available_kv_bytes"][0]
    assert BOARD - RTX5090.memory_low_bytes == 800 * MiB
    assert lo_gap == pytest.approx((HOLD_HI - 800 * MiB) * w.fraction, abs=2)
