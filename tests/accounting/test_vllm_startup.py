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
TOTAL = 85_029_027_840  # CUDA's H100 SXM total (gpu_cuda.csv): 79.19 GiB, as every vLLM 0.19.0 start-up prints
# vLLM's own process at its init snapshot on an H100 at TP 1 (startup_free.VLLM_SNAPSHOT_CONTEXT_GIB): the snapshot's
# cuda_memory, 0.51 GiB in all 27 TP 1 start-ups of shared/data/vllm-startups-0.19 (startups.csv,
# init_cuda_memory_by_rank "EngineCore:0.51"; the logs print "Free memory on device (78.68/79.19 GiB) on startup"),
# ±0.005 GiB the print's half step: 0.51 GiB = 547,608,330.24 B, 0.515 = 552,977,039.36, 0.505 = 542,239,621.12.
# Free = TOTAL − held: 84,481,419,509.76 B = 78.679 GiB (the printed 78.68), 84,476,050,800.64 (78.674) to
# 84,486,788,218.88 (78.684).
FREE, FREE_LO, FREE_HI = TOTAL - 0.51 * GiB, TOTAL - 0.515 * GiB, TOTAL - 0.505 * GiB


def _mem(util: float, version: str = "0.19.0", gpu=H100, **kw):
    s = make_settings(engine_version=version, max_model_len=8192, gpu_memory_utilization=util, **kw)
    return build_plan(LLAMA, gpu, s, with_roofline=False, with_advice=False).memory


def test_0_995_on_one_h100_is_refused_at_0_19():
    # ceil(TOTAL × 0.995) = ceil(84,603,882,700.8) = 84,603,882,701 B (78.79 GiB) > FREE_HI 84,486,788,218.88: vLLM
    # 0.19.0's request_memory raises at every end of the corpus's range, so the plan exits 3 (before: a warning, with
    # SGLang's 0.42 GiB pre-load figure, 0.13–0.75, free 78.77 GiB, 78.44–79.06). Largest utilization that starts:
    # floor(FREE ÷ TOTAL × 1000) / 1000 = floor(993.56) = 0.993; low end 0.99350 → 0.993, high end 0.99362 → 0.993
    with pytest.raises(DoesNotFitError) as err:
        _mem(0.995)
    msg = str(err.value)
    assert err.value.exit_code == 3
    assert msg.startswith("does not start: vLLM 0.19.0 refuses to start when the free memory at its start-up snapshot "
                          "is below ceil(total × gpu_memory_utilization)")
    assert "asks 78.79 GiB" in msg and "− 0.51 GiB this process holds" in msg
    assert "= 78.68 GiB (78.67–78.68)" in msg
    assert "free ÷ total = 0.993 (0.993–0.993): --gpu-memory-utilization 0.993 starts even at the low end" in msg


def test_utilization_1_never_starts_from_0_9_1():
    # ceil(TOTAL × 1.0) = TOTAL > FREE_HI: refused, exit 3, at 0.19.0 and at the default version (the newest read)
    for version in ("0.19.0", ""):
        with pytest.raises(DoesNotFitError) as err:
            _mem(1.0, version=version)
        assert err.value.exit_code == 3


def test_0_994_refused_0_993_starts_on_an_h100():
    # 0.994: ceil(TOTAL × 0.994) = 84,518,853,673 B > FREE_HI: refused. 0.993: ceil(84,433,824,645.12) =
    # 84,433,824,646 B ≤ FREE_LO 84,476,050,800.64: starts at every end, no line (the corpus's 0.95 and 0.9 further)
    with pytest.raises(DoesNotFitError):
        _mem(0.994)
    assert _mem(0.993).startup is None
    assert _mem(0.95).startup is None


def test_tp_2_takes_the_distributed_init_from_the_corpus():
    # TP 2 at 0.19.0 (snapshot after the distributed init): held = 0.51 + VLLM_DIST_INIT_GIB (0.92, 1.02, 1.56) =
    # 1.53 GiB (1.425–2.075 with the context's ±0.005): the corpus's 11 start-ups at TP·PP > 1 print 1.43–2.07 GiB
    # (Llama-3.1-8B and Qwen2.5-7B TP 2: 1.53, free 77.66 GiB). Free = TOTAL − 1.53 GiB = 83,386,202,849.28 B (77.66),
    # 82,801,013,555.2 (77.11, TOTAL − 2.075 GiB) to 83,498,945,740.8 (77.76). 0.98 asks ceil(83,328,447,283.2) =
    # 83,328,447,284 B: below the point, above the low end: a warning (Mixtral's 2.01 GiB would refuse it)
    st = _mem(0.98, tp=2).startup
    assert (st.verdict, st.requested_bytes) == ("may_refuse", 83_328_447_284)
    assert (st.free_bytes, st.free_low_bytes, st.free_high_bytes) == pytest.approx(
        (TOTAL - 1.53 * GiB, TOTAL - 2.075 * GiB, TOTAL - 1.425 * GiB), abs=1)
    assert "− 1.53 GiB this process holds by the snapshot (CUDA context, NCCL" in st.message
    # 0.10.0 takes the snapshot before the distributed init: the TP 1 context only, 0.98 starts
    assert _mem(0.98, version="0.10.0", tp=2).startup is None


def test_a_gpu_outside_the_corpus_takes_the_linux_context_range():
    # A100 80GB: total 85,094,039,552 B (gpu_cuda.csv). Its context is not in the corpus: LINUX_CONTEXT_GIB (0.37,
    # 0.45, 0.51). 0.995 asks ceil(84,668,569,354.24) = 84,668,569,355 B (78.85 GiB); free 84,610,855,731.2 (0.45 GiB
    # held, 78.80) is below it, 84,696,755,077.12 (0.37 GiB held, 78.88) above: a warning, not a refusal
    st = _mem(0.995, gpu=get_gpu("A100-80GB")).startup
    assert (st.verdict, st.requested_bytes) == ("may_refuse", 84_668_569_355)
    assert st.free_bytes == pytest.approx(85_094_039_552 - 0.45 * GiB, abs=1)
    assert (st.max_utilization, st.max_utilization_low, st.max_utilization_high) == (0.994, 0.993, 0.995)
    assert st.message.startswith("warning: gpu_memory_utilization 0.995 asks 78.85 GiB; free at start-up")


def test_before_0_9_1_no_check_only_a_warning():
    # 0.9.0 (v1/worker/gpu_worker.py::init_device keeps only init_gpu_memory) and 0.6.3 (V0 worker.py) never refuse
    # at start-up: utilization 1.0 plans, with the warning that the cache or graph capture may run out of memory
    # (0.993 at every end: FREE ÷ TOTAL as above)
    for version in ("0.9.0", "0.6.3"):
        st = _mem(1.0, version=version).startup
        assert st.verdict == "may_run_out"
        assert "has no start-up check (from 0.9.1)" in st.message
        assert st.message.endswith("up to 0.993 (0.993–0.993) asks no more than is free")


def test_sglang_is_left_alone():
    # SGLang's mem_fraction_static is a share of the free memory after the load: no such check (plan_other.py)
    s = make_settings(engine="sglang", max_model_len=8192, mem_fraction_static=0.99)
    assert build_plan(LLAMA, H100, s, with_roofline=False, with_advice=False).memory.startup is None
