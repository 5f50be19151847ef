"""The fused-MoE kernel term (moe_kernel.py) worked by hand on a made-up layer, its fit to the bundled kernel timings,
and the roofline's vector paths pricing it as the scalar one does."""

from __future__ import annotations

import math

import numpy as np
import pytest

from kvledger.accounting.moe_kernel import (
    block_m,
    fit_moe_kernel,
    load_rows,
    moe_kernel_fit,
    moe_layer_s,
    padded_rows_per_expert,
    touched_fraction,
)


def test_a_small_made_up_layer_by_hand():
    # 4 experts, top-2, hidden 64, expert width 32, BF16: each expert 3 × 64 × 32 = 6,144 weights = 12,288 B,
    # the layer 4 × 12,288 = 49,152 B. A 3-token step:
    # touched share 1 − (1 − 2/4)^3 = 7/8 → 43,008 B read;
    assert touched_fraction(3, 2, 4) == 7 / 8
    read = 49_152 * 7 / 8
    # 3 ≤ 4 experts → BLOCK_M 16 (vLLM get_default_config); an expert's count c ~ Bin(3, 1/2) ≤ 3 < 16, so its rows
    # pad to 16 unless it got none: 16 × (1 − 1/8) = 14 rows per expert, 56 in all against 3 × 2 = 6 real
    assert block_m(3, 4) == 16 and block_m(5, 4) == 64
    assert padded_rows_per_expert(3, 2, 4) == pytest.approx(14.0, rel=1e-12)
    # 40 tokens > 4 experts → BLOCK_M 64; c ≤ 40 < 64: 64 × (1 − 2^-40) rows
    assert padded_rows_per_expert(40, 2, 4) == pytest.approx(64 * (1 - 0.5 ** 40), rel=1e-12)
    assert padded_rows_per_expert(0, 2, 4) == 0.0
    flops = 2 * 6_144 * 4 * 14  # 688,128 FLOP on padded rows (73,728 on the real ones)
    # t0 1 µs, β 0.5, η∞ 0.25, m½ 2: η(14) = 0.25 × 14 / 16 = 0.21875
    p = (1e-6, 0.5, 0.25, 2.0)
    # 1 GB/s, 1 TFLOP/s: read 43,008 / 0.5e9 = 86.016 µs > FLOPs 688,128 / 0.21875e12 = 3.1457 µs → 87.016 µs
    assert moe_layer_s(p, read, flops, 14.0, 1e9, 1e12) == pytest.approx(87.016e-6, rel=1e-12)
    # 1 TB/s: read 0.086 µs < 3.1457 µs → compute-bound: 1 + 3.1457 = 4.1457 µs
    assert moe_layer_s(p, read, flops, 14.0, 1e12, 1e12) == pytest.approx(1e-6 + 688_128 / 0.21875e12, rel=1e-12)
    # no FLOPs: the floor and the read alone
    assert moe_layer_s(p, read, 0.0, 0.0, 1e9, 1e12) == pytest.approx(87.016e-6, rel=1e-12)


def test_the_fit_keeps_the_hbm_rows_and_reports_its_leave_one_source_out_error():
    rows = load_rows()
    # 53 published timings; the 4 whose touched expert bytes fit in L2 are left out
    assert len(rows) == 49 and len({r.source for r in rows}) == 4
    f = moe_kernel_fit()
    assert (f.rows, f.sources, f.padded) == (49, 4, True)
    assert f.floor_s * 1e6 == pytest.approx(42.6, abs=0.1) and f.half_tokens == pytest.approx(5.40, abs=0.01)
    # the module docstring's table: padded 15.2% in-sample, 22.4% held out (worst 101.9%), the tuned Mixtral table's
    # rows at 16-row blocks (moe_rows.tuned_block)
    assert math.isfinite(f.err_loso) and math.isfinite(f.err_loso_max) and f.err_loso > f.err_in
    assert (f.err_in, f.err_loso, f.err_loso_max) == pytest.approx((0.152, 0.224, 1.019), abs=0.001)
    assert len(f.by_source) == 4 and all(math.isfinite(x) for b in f.by_source for x in b[1:])
    # the unpadded variant (T·k rows): worse held out, 25.1%
    u = fit_moe_kernel(rows, padded=False)
    assert (u.err_in, u.err_loso) == pytest.approx((0.169, 0.251), abs=0.001) and u.err_loso > f.err_loso


def _qwen3_moe_h100():
    from kvledger.accounting.plan import build_plan
    from kvledger.accounting.roofline import RooflineStepCost
    from kvledger.accounting.settings import make_settings
    from kvledger.catalog.gpus import get_gpu
    from kvledger.catalog.models import load_model

    plan = build_plan(load_model("Qwen/Qwen3-30B-A3B"), get_gpu("H100"), make_settings(max_model_len=8192),
                      with_advice=False)
    return RooflineStepCost(plan.model, plan.gpu, plan.kv, 1)


@pytest.mark.parametrize("batch", [1, 7, 64, 128, 129, 512])
def test_vector_decode_prices_are_the_scalar_ones_for_an_moe_model(batch):
    from kvledger.accounting.stepcost import StepShape

    rc = _qwen3_moe_h100()
    assert rc.moe_layers == 48
    want = [rc.time_s(rc.costs(StepShape(0, 0, 0, 0.0, batch, batch * 900 + batch * i))) for i in range(5)]
    assert rc.costs(StepShape(0, 0, 0, 0.0, batch, batch * 900)).moe_kernel_s > 0
    assert list(rc.decode_steps_s(batch, batch * 900, 5)) == want
    assert rc.decode_steps_list(batch, batch * 900, 5) == want
    assert rc.step_time_of(0, 0, 0, 0.0, batch, batch * 900) == want[0]
    assert rc.step_time_s(StepShape(0, 0, 0, 0.0, batch, batch * 900)) == want[0]


def test_vector_split_prices_the_fused_moe_term_as_the_scalar_split():
    from kvledger.accounting.step_split import roofline_prefill_fraction, roofline_prefill_fraction_one
    from kvledger.accounting.stepcost import StepShape

    rc = _qwen3_moe_h100()
    assert rc.split_vectorisable
    shapes = [(512, 1, 512, 512 * 513 / 2, 64, 64 * 1000), (8, 1, 1008, 8 * 1000 + 36, 200, 200 * 3000),
              (4000, 2, 6000, 4000 * 2000 + 4000 * 4001 / 2, 1, 777)]
    a = np.array(shapes, dtype=np.float64)
    got = roofline_prefill_fraction(rc, *(a[:, j] for j in range(6)))
    want = [roofline_prefill_fraction_one(rc, StepShape(int(s[0]), int(s[1]), int(s[2]), s[3], int(s[4]), int(s[5])))
            for s in shapes]
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=0.0)
    arr = rc.moe_kernel_s_array(np.array([64.0, 3.0, 64.0]))
    assert list(arr) == [rc.moe_kernel_s(64), rc.moe_kernel_s(3), rc.moe_kernel_s(64)]
