"""vLLM's start-up free-memory check on a GPU it has to itself (accounting/vllm_startup.py): refused where every end
of the assumed free memory is below the request, a warning inside the range, nothing where it starts."""

from __future__ import annotations

import pytest

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model
from kvledger.errors import DoesNotFitError
from kvledger.units import GiB

LLAMA = load_model("meta-llama/Llama-3.1-8B")
H100 = get_gpu("H100-SXM")
TOTAL = 85_029_027_840  # CUDA's H100 SXM total (gpu_cuda.csv): 79.19 GiB
# this process at the snapshot (wddm_engines.startup_process_term at TP 1): 0.42 GiB point, 0.13 (CUDA context,
# int(0.13 GiB) = 139,586,437 B) to 0.75 GiB: free 84,578,056,273.92 B (78.77 GiB), 84,223,721,472 (78.44) to
# 84,889,441,403 (79.06)
FREE, FREE_LO, FREE_HI = TOTAL - 0.42 * GiB, TOTAL - 0.75 * GiB, TOTAL - 139_586_437


def _mem(util: float, version: str = "0.19.0", **kw):
    s = make_settings(engine_version=version, max_model_len=8192, gpu_memory_utilization=util, **kw)
    return build_plan(LLAMA, H100, s, with_roofline=False, with_advice=False).memory


def test_utilization_1_never_starts_from_0_9_1():
    # ceil(TOTAL × 1.0) = TOTAL > FREE_HI (the context holds at least 0.13 GiB): refused, exit 3, with the rule, the
    # free memory and the largest utilization that starts: floor(FREE ÷ TOTAL × 1000) / 1000 = floor(994.70) = 0.994,
    # low end 84,223,721,472 ÷ TOTAL = 0.99053 → 0.990, high end 0.99836 → 0.998
    with pytest.raises(DoesNotFitError) as err:
        _mem(1.0)
    msg = str(err.value)
    assert err.value.exit_code == 3
    assert msg.startswith("does not start: vLLM 0.19.0 refuses to start when the free memory at its start-up snapshot "
                          "is below ceil(total × gpu_memory_utilization)")
    assert "= 78.77 GiB (78.44–79.06)" in msg
    assert "free ÷ total = 0.994 (0.990–0.998): --gpu-memory-utilization 0.990 starts even at the low end" in msg
    with pytest.raises(DoesNotFitError):  # the default version (the newest read) has the same check
        _mem(1.0, version="")


def test_inside_the_range_warns_and_plans():
    # 0.995: ceil(TOTAL × 0.995) = ceil(84,603,882,700.8) = 84,603,882,701 B (78.79 GiB): above the point's free
    # 84,578,056,273.92, below the high end's 84,889,441,403: a warning, the plan goes on
    st = _mem(0.995).startup
    assert (st.verdict, st.requested_bytes) == ("may_refuse", 84_603_882_701)
    assert (st.free_bytes, st.free_low_bytes, st.free_high_bytes) == pytest.approx((FREE, FREE_LO, FREE_HI), abs=1)
    assert (st.max_utilization, st.max_utilization_low, st.max_utilization_high) == (0.994, 0.990, 0.998)
    assert st.message.startswith("warning: gpu_memory_utilization 0.995 asks 78.79 GiB; free at start-up 79.19 GiB "
                                 "total − 0.42 GiB this process holds")


def test_below_the_low_end_says_nothing():
    # 0.99: ceil(TOTAL × 0.99) = 84,178,737,562 B ≤ FREE_LO 84,223,721,472: starts at every end, no line (the 0.95
    # and 0.9 defaults, the corpus's start-ups, are further below)
    assert _mem(0.99).startup is None
    assert _mem(0.95).startup is None


def test_before_0_9_1_no_check_only_a_warning():
    # 0.9.0 (v1/worker/gpu_worker.py::init_device keeps only init_gpu_memory) and 0.6.3 (V0 worker.py) never refuse
    # at start-up: utilization 1.0 plans, with the warning that the cache or graph capture may run out of memory
    for version in ("0.9.0", "0.6.3"):
        st = _mem(1.0, version=version).startup
        assert st.verdict == "may_run_out"
        assert "has no start-up check (from 0.9.1)" in st.message
        assert st.message.endswith("up to 0.994 (0.990–0.998) asks no more than is free")


def test_sglang_is_left_alone():
    # SGLang's mem_fraction_static is a share of the free memory after the load: no such check (plan_other.py)
    s = make_settings(engine="sglang", max_model_len=8192, mem_fraction_static=0.99)
    assert build_plan(LLAMA, H100, s, with_roofline=False, with_advice=False).memory.startup is None
