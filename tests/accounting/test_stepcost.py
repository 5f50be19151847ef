"""The one step-price adapter (accounting/stepcost.py ``step_pricer``) and the wrappers that price through it."""

from __future__ import annotations

from kvledger.accounting.host_overhead import HostStepCost, host_overhead_for
from kvledger.accounting.kvcache import kv_ledger
from kvledger.accounting.roofline import RooflineStepCost
from kvledger.accounting.sglang_steps import GraphPaddedStepCost, decode_capture_sizes
from kvledger.accounting.stepcost import FixedStepCost, StepShape, shape_price, step_pricer, step_prices
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model

FIXED = FixedStepCost(per_step_s=0.01, per_token_s=0.001)


def test_a_model_without_step_time_of_is_priced_through_a_step_shape():
    # a 100-token chunk beside 10 decodes: 0.01 + 0.001 × (100 + 10) = 0.12 s, as step_time_s prices it
    price = step_pricer(FIXED)
    assert price(100, 1, 100, 5050.0, 10, 1000) == FIXED.step_time_s(StepShape(100, 1, 100, 5050.0, 10, 1000))
    assert price(100, 1, 100, 5050.0, 10, 1000) == shape_price(FIXED, 100, 1, 100, 5050.0, 10, 1000)
    assert abs(price(100, 1, 100, 5050.0, 10, 1000) - 0.12) < 1e-15


def test_a_fast_pricing_model_is_priced_by_its_own_bound_method():
    # the simulator's compiled core takes the roofline's plain form only where the price *is* rc.step_time_of
    # (dynamics/fast/open_native.py plain_price), so the adapter hands back that method itself, not a wrapper
    m, g = load_model("meta-llama/Llama-3.1-8B"), get_gpu("H100-SXM")
    rc = RooflineStepCost(m, g, kv_ledger(m, "auto", 1), 1)
    assert step_pricer(rc) == rc.step_time_of
    assert step_pricer(rc, step_prices(rc)) == rc.step_time_of
    # both wrappers price their inner model through the same adapter
    assert GraphPaddedStepCost(rc, decode_capture_sizes(256)).price_of == rc.step_time_of
    h = host_overhead_for("vllm", "0.5.0", 32, 1, enforce_eager=True, batching="vllm_v0")
    assert HostStepCost(rc, h).price_of == rc.step_time_of
    # FixedStepCost has no step_time_of: the host wrapper prices its GPU time through a StepShape,
    # 0.01 + 0.001 × 32 decodes = 0.042 s
    assert abs(HostStepCost(FIXED, h).price_of(0, 0, 0, 0.0, 32, 16_000) - 0.042) < 1e-15
