"""The judgment commands price a deployment's steps as `kvledger simulate` does (analyses/serving/plan_pricing.py): the
same step time for the same flags, both sides of a comparison alike, and the one deliberately roofline-only figure
says so."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvledger.accounting.roofline_breakdown import decode_shape
from kvledger.accounting.settings import make_settings
from kvledger.analyses.serving.plan_pricing import PricingFlags
from kvledger.analyses.serving.sim_setup import SimRequestArgs, prepare
from kvledger.catalog.gpu_file import resolve_gpu
from kvledger.catalog.models import load_model
from kvledger.cli.main import app

L8 = "meta-llama/Llama-3.1-8B"
QWEN3_4B = str(Path(__file__).parents[1] / "fixtures" / "configs" / "Qwen3-4B.json")
runner = CliRunner(env={"COLUMNS": "250"})


def _simulate_cost(**flags):
    """simulate's step cost (and its plan) for the same model, GPU and flags."""
    setup = prepare(SimRequestArgs(**flags))
    return setup.cost, setup.plan


def test_fp8_kv_prices_both_sides_as_simulate_with_v1_cpu_time():
    from kvledger.analyses.judgments.fp8_kv import analyse_fp8_kv

    # priced flat on both sides, so that the plan's own roofline (flat) is the GPU part of simulate's step
    cost, plan = _simulate_cost(model=L8, gpu="H100-SXM", engine_version="0.11.0", gemm_efficiency="flat")
    r = analyse_fp8_kv(load_model(L8), resolve_gpu("H100-SXM"), make_settings(engine_version="0.11.0"),
                       concurrency=64, contexts=[8192], pricing=PricingFlags(gemm_efficiency="flat"))
    p, shape = r.curve[0], decode_shape(64, 8192)
    assert p.bf16_step_s == cost.step_time_s(shape)  # the same float as simulate's
    # vLLM 0.11 is V1 without async scheduling (default on from 0.14): V1's CPU time in series with the GPU step,
    # host_overhead.py V1_STEP_S + V1_SEQ_S × 64 = 0.5 ms + 64 × 20 µs = 1.78 ms on top of the roofline
    assert p.bf16_step_s - plan.step_cost().step_time_s(shape) == pytest.approx(1.78e-3, rel=1e-9)
    # the fp8 side is simulate --kv-cache-dtype fp8's step + the FP8 overhead: the same 1.78 ms, which cancels in
    # the gain
    cost_f, plan_f = _simulate_cost(model=L8, gpu="H100-SXM", engine_version="0.11.0", kv_cache_dtype="fp8",
                                    gemm_efficiency="flat")
    assert p.fp8_step_s == pytest.approx(cost_f.step_time_s(shape) + p.fp8_overhead_s, rel=1e-12)
    assert p.bf16_step_s - p.fp8_step_s == pytest.approx(
        plan.step_cost().step_time_s(shape) - plan_f.step_cost().step_time_s(shape) - p.fp8_overhead_s, rel=1e-9)
    assert "V1 CPU 0.5 ms + 20 µs per sequence" in r.step_cost["source"]


def test_fp8_kv_fitted_to_a_calibration_is_the_bare_roofline_and_says_so():
    from kvledger.analyses.judgments.fp8_kv import analyse_fp8_kv

    s = make_settings(cpu_overhead_s=2.79e-3)
    r = analyse_fp8_kv(load_model(L8), resolve_gpu("H100-SXM"), s, concurrency=8, contexts=[4096],
                       fitted="the fit of --calibration x.csv")
    cost, plan = _simulate_cost(model=L8, gpu="H100-SXM", cpu_overhead="2.79ms")
    shape = decode_shape(8, 4096)
    # the fitted fixed step holds the measured engine's host time: the roofline with it in series, no host term
    gpu_s = plan.step_cost(cpu_overhead_s=0.0).step_time_s(shape)
    assert r.curve[0].bf16_step_s == plan.step_cost().step_time_s(shape) == pytest.approx(gpu_s + 2.79e-3)
    # where simulate (vLLM 0.33, async scheduling) overlaps --cpu-overhead with its own GPU step (the measured GEMM
    # curve and layer kernels, not the plan's flat roofline): max(GPU, 2.79 ms)
    sim_gpu_s = _simulate_cost(model=L8, gpu="H100-SXM")[0].step_time_s(shape)
    assert cost.step_time_s(shape) == pytest.approx(max(sim_gpu_s, 2.79e-3))
    assert r.step_cost["source"].startswith("the bare roofline, deliberately (not simulate's step cost)")
    assert "no host term is added" in r.step_cost["source"]


def test_spec_decode_gets_the_gpu_profile_and_the_eager_launches_simulate_uses():
    from kvledger.accounting.plan import build_plan
    from kvledger.analyses.judgments.spec_decode import SpecDecodeModel
    from kvledger.analyses.judgments.spec_decode_summary import analyse_spec_decode, make_draft
    from kvledger.analyses.serving.plan_pricing import priced_settings

    m, g = load_model(QWEN3_4B), resolve_gpu("RTX 4090")
    cost, _ = _simulate_cost(model=QWEN3_4B, gpu="RTX 4090")
    r = analyse_spec_decode(m, g, make_settings(), draft_tokens=4, acceptance=0.8, draft=make_draft(),
                            context_tokens=2048, pricing=PricingFlags())
    # the RTX 4090's bundled GPU profile (accounting/data/gpu_profiles/rtx-4090.json): 69.89% FLOP/s, 86.54% bandwidth
    assert (r.settings["achievable_flops_fraction"], r.settings["achievable_bandwidth_fraction"]) == (0.6989, 0.8654)
    assert r.step_cost["priced_by"].startswith("gpu: GPU profile bundled:rtx-4090.json")
    row = next(x for x in r.rows if x.batch == 8)
    assert row.base_step_s == cost.step_time_s(decode_shape(8, 2048))
    # --enforce-eager: every step launches (36 layers × 18 ops + 12) × 19 µs = 660 × 19 µs = 12.54 ms from the host
    # (host_overhead.py), longer than Qwen3-4B's ~9.6 ms decode step on the 4090, so plain and verify steps both
    # take 12.54 ms (V1's 0.5 ms + 20 µs CPU time overlaps under async scheduling) — as simulate prices them
    cost_e, _ = _simulate_cost(model=QWEN3_4B, gpu="RTX 4090", enforce_eager=True)
    s = priced_settings(make_settings(enforce_eager=True), g, PricingFlags())
    sm = SpecDecodeModel(build_plan(m, g, s, with_advice=False), make_draft(), 4, 0.8, PricingFlags())
    row = sm.row(1, 2048)
    assert row.base_step_s == cost_e.step_time_s(decode_shape(1, 2048)) == pytest.approx(12.54e-3, rel=1e-9)
    assert row.round_s == pytest.approx(12.54e-3, rel=1e-9)  # a free draft: the round costs the launches alone


def test_disagg_pools_are_priced_as_simulate():
    from kvledger.analyses.judgments.pd_disagg import DisaggStudy
    from kvledger.dynamics.engine.kv_transfer import link_from_gpu
    from kvledger.ledgers.slo import parse_slo

    g = resolve_gpu("H100-SXM")
    study = DisaggStudy(load_model(L8), g, make_settings(engine_version="0.11.0", max_model_len=8192),
                        link_from_gpu(g, "nvlink", 1e-3), parse_slo("ttft=200ms,tpot=50ms"), pricing=PricingFlags())
    cost, _ = _simulate_cost(model=L8, gpu="H100-SXM", engine_version="0.11.0", max_model_len=8192)
    shape = decode_shape(32, 1024)
    pool = study.pool(1, (), 2, decode=True)
    # 0.5 ms + 32 × 20 µs = 1.14 ms of V1 CPU time per step on top of the roofline, in both
    assert pool.cost.step_time_s(shape) == cost.step_time_s(shape)
    assert "V1 CPU 0.5 ms" in study.priced(1)[1]["source"]


def test_offload_runs_and_break_even_use_simulates_step_cost_and_plan_says_roofline():
    from rich.console import Console

    from kvledger.accounting.kv_tier_rules import TierSettings
    from kvledger.accounting.kv_tiers import PLAN_ROOFLINE, build_tier_plan
    from kvledger.analyses.judgments.offload import analyse_offload
    from kvledger.report.kv_tiers_view import render_kv_tiers

    g, tiers = resolve_gpu("H100-SXM"), TierSettings(kv_offloading_size_gib=64, kv_offloading_backend="native")
    rep = analyse_offload(load_model(L8), g, make_settings(engine_version="0.13.0", max_model_len=32768), tiers,
                          num_sessions=4, pricing=PricingFlags())
    assert "V1 CPU 0.5 ms" in rep.step_cost["source"]
    assert rep.tiers.priced_by.startswith("the run's step cost")
    # build_tier_plan without a step cost prices on the memory plan's roofline alone and says so (the hand-worked
    # arithmetic, tests/accounting/test_kv_tiers.py); `plan` passes simulate's (tests/cli/test_plan_tiers_cli.py)
    _, plan = _simulate_cost(model=L8, gpu="H100-SXM", engine_version="0.13.0", max_model_len=32768)
    tp = build_tier_plan(plan, tiers)
    assert tp.priced_by == PLAN_ROOFLINE
    con = Console(record=True, width=400)
    render_kv_tiers(tp, con)
    assert "roofline alone (no host term" in " ".join(con.export_text().split())


def test_judgment_commands_take_simulates_eager_and_profile_flags():
    r = runner.invoke(app, ["fp8-kv", L8, "--gpu", "H100-SXM", "--concurrency", "4", "--contexts", "2K",
                            "--enforce-eager", "--json"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    assert "every step eager (--enforce-eager)" in json.loads(r.stdout)["step_cost"]["source"]
    r = runner.invoke(app, ["spec-decode", QWEN3_4B, "--gpu", "RTX 4090", "--draft-tokens", "2", "--acceptance",
                            "0.7", "--gpu-profile", "none"], catch_exceptions=False)
    assert r.exit_code == 0, r.output
    out = " ".join(r.stdout.split())
    assert "step cost: roofline (its source under the figures)" in out and "priced by: uncalibrated" in out
    # the source, a paragraph, under the tables and before the verdict
    assert out.index("step cost source: kvledger.accounting.roofline") > out.index("One round per sequence")
