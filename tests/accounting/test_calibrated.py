"""Calibrated step costs: exact arithmetic on the bundled coefficients/tables, agreement with the measurements
they were fitted on, and held-out checks against Splitwise's measured Llama-2-70B step times."""

from __future__ import annotations

import csv
from pathlib import Path

import numpy as np
import pytest

from kvledger.accounting.calibrated import DistServeStepCost, get_calibrated_cost, list_calibrated
from kvledger.accounting.stepcost import StepCostModel, StepShape, decode_steps_by_loop
from kvledger.errors import UnknownNameError


def prefill(tokens: int, prior: int = 0) -> StepShape:
    pairs = tokens * prior + tokens * (tokens + 1) / 2
    return StepShape(num_prefill_tokens=tokens, num_prefill_seqs=1, prefill_kv_tokens=prior + tokens,
                     prefill_attn_pairs=pairs)


def decode(batch: int, kv_each: int) -> StepShape:
    return StepShape(num_decode_seqs=batch, decode_kv_tokens=batch * kv_each)


# ---------------------------------------------------------------- DistServe (fitted coefficients)

def test_distserve_vllm_opt13b_arithmetic():
    m = get_calibrated_cost("facebook/opt-13b", "A100-80GB", 1)
    assert isinstance(m, DistServeStepCost) and m.name == "distserve-vllm:facebook/opt-13b@a100-80gb/tp1"
    # prefill [22.0522, 0.140509, 8.07658e-6]: 22.0522 + 0.140509·829 + 8.07658e-6·829² = 22.0522 + 116.4822 + 5.5505
    assert m.step_time_s(prefill(829)) * 1000 == pytest.approx(144.0849, abs=1e-3)
    # decoding_smallbs [23.4750, 5.92934e-4, 0.0607269]: B = 2, ΣK = 2000 → 23.4750 + 1.18587 + 0.12145
    assert m.step_time_s(decode(2, 1000)) * 1000 == pytest.approx(24.7824, abs=1e-3)
    # B = 100 ≥ threshold 95 → decoding_largebs [20.2064, 4.90773e-4, 0.120003]: 20.2064 + 49.0773 + 12.0003
    assert m.step_time_s(decode(100, 1000)) * 1000 == pytest.approx(81.2840, abs=1e-3)
    # DistServe's own engine is faster: 18.1025 + 0.101912·829 + 7.12226e-6·829² = 107.4825
    own = get_calibrated_cost("distserve:opt-13b", "a100", 1)
    assert own.step_time_s(prefill(829)) * 1000 == pytest.approx(107.4825, abs=1e-3)


def test_distserve_vllm_against_measured_vllm_runs():
    from kvledger.dynamics.workload.distserve_runs import load_distserve_run

    m = get_calibrated_cost("distserve-vllm:facebook/opt-13b", "a100", 1)
    recs = load_distserve_run("vllm-100-1").measured.records
    ratios = []
    for r in recs:  # requests whose prefill overlapped no other request's wait for a first token, prompt ≥ 256
        alone = not any(o is not r and o.arrival_s < r.first_token_s and o.first_token_s > r.arrival_s for o in recs)
        if alone and r.num_prompt_tokens >= 256:
            ratios.append(r.ttft_s / m.step_time_s(prefill(r.num_prompt_tokens)))
    # 63 such requests at 1 req/s; measured TTFT / fitted prefill time has median 0.949 (what remains is
    # waiting for a decode step in flight and HTTP time); tolerance 10%
    assert len(ratios) == 63
    assert np.median(ratios) == pytest.approx(1.0, abs=0.10)
    # fastest measured TPOT (requests with > 50 output tokens) 25.47 ms vs one decode step at B = 1,
    # K = 1000: 23.4750 + 0.5929 + 0.0607 = 24.13 ms; tolerance 10%
    fastest = min(r.tpot_s for r in recs if r.num_output_tokens > 50)
    assert fastest == pytest.approx(m.step_time_s(decode(1, 1000)), rel=0.10)


# ---------------------------------------------------------------- Vidur (operator tables)

def test_vidur_reproduces_its_table_points():
    m = get_calibrated_cost("vidur:meta-llama/Llama-2-7b-hf", "A100-80GB", 1)
    items = m.breakdown_ms(prefill(512))
    # mlp.csv, A100, TP1, 512 tokens, medians: norms 0.012 + 0.012, QKV 0.234, RoPE 0.022, out 0.088, up 0.402,
    # act 0.0365, down 0.229, add 0.007 = 1.0425 ms per layer × 32 layers
    assert items["linear_ops"] == pytest.approx(32 * 1.0425, abs=1e-9)
    # attention.csv prefill chunk 512, empty cache: 0.072 ms; Llama-2-7B has 32 q heads × 128 = the table's 32 × 128
    assert items["attention_prefill"] == pytest.approx(32 * 0.072, abs=1e-9)
    assert items["tp_all_reduce"] == 0.0 and items["attention_decode"] == 0.0
    # cpu_overheads.csv Llama-2-7B TP1, batch 32: schedule 0.5112 + sampler 0.6084 + prepare 0.4339 + outputs 0.5428
    assert m.breakdown_ms(decode(32, 100))["cpu_overhead"] == pytest.approx(2.0962, abs=1e-4)
    assert m.step_time_s(prefill(512)) == pytest.approx(sum(items.values()) / 1000)

    big = get_calibrated_cost("vidur:llama-2-70b", "a100", 2)  # the attention table's own shape (TP2)
    # decode, 32 sequences × 1024 KV: 0.064 ms per layer (two identical rows) × 80 layers
    assert big.breakdown_ms(decode(32, 1024))["attention_decode"] == pytest.approx(80 * 0.064, abs=1e-9)
    # prefill chunk 1024 after 1024 cached tokens: rows 0.320, 0.319, 0.314, 0.316 → mean 0.31725 ms × 80
    assert big.breakdown_ms(prefill(1024, 1024))["attention_prefill"] == pytest.approx(80 * 0.31725, abs=1e-9)
    # TP all-reduce of 512 tokens × 8192 × 2 B = 8,388,608 B: 0.095 ms (a100_dgx, 2 GPUs) + 0.02 ms launch, 2 per layer
    assert big.breakdown_ms(prefill(512))["tp_all_reduce"] == pytest.approx(80 * 2 * 0.115, abs=1e-9)


# Held out: Splitwise's perf_model.csv (DGX-A100 / DGX-H100, vLLM-era engine) never entered the Vidur tables.
# Medians of 45 (prefill 512) and 15 (decode, B=1, 128 outputs) rows; Vidur prediction from its tables:
#   A100 TP2 prefill 512: 195.48 ms measured, 196.29 predicted (+0.4%);  decode B=1: 54.86 vs 58.73 (+7.1%)
#   H100 TP2 prefill 512:  83.83 ms measured,  71.01 predicted (−15.3%); decode B=1: 37.00 vs 32.84 (−11.2%)
# Tolerance: 15% on A100, 20% on H100 (H100 attention is extrapolated from the A100 table).
# Not asserted: at TP4/TP8 Splitwise's decode barely speeds up (45 ms at both) while the op sum does
# (33 / 24 ms), i.e. the executor overheads of that setup are missing from the Vidur sum.
@pytest.mark.parametrize("gpu, tol, measured_prefill_ms, measured_decode_ms", [
    ("A100-80GB", 0.15, 195.48, 54.86), ("H100", 0.20, 83.83, 37.00)])
def test_vidur_against_held_out_splitwise_llama2_70b(gpu, tol, measured_prefill_ms, measured_decode_ms):
    vidur = get_calibrated_cost("vidur:meta-llama/Llama-2-70b-hf", gpu, 2)
    assert vidur.step_time_s(prefill(512)) * 1000 == pytest.approx(measured_prefill_ms, rel=tol)
    # Splitwise decode: batch 1, 512-token prompt, 128 outputs → mean KV 512 + 64 = 576
    assert vidur.step_time_s(decode(1, 576)) * 1000 == pytest.approx(measured_decode_ms, rel=tol)


def test_splitwise_model_on_its_own_points():
    m = get_calibrated_cost("splitwise:llama2-70b", "a100-80gb", 2)
    # median prompt_time of the 45 batch-1 rows with a 512-token prompt (15 with 128 output tokens, 5 each
    # with 256…8192): 195.4801 ms
    assert m.step_time_s(prefill(512)) * 1000 == pytest.approx(195.4801, abs=1e-3)
    # batch 16, prompt 512: token_time median 65.46 ms; at the reference mean KV (576) no context correction
    assert m.step_time_s(decode(16, 576)) * 1000 == pytest.approx(65.46, abs=0.01)


# ---------------------------------------------------------------- protocol and registry

@pytest.mark.parametrize("name, gpu, tp", [
    ("facebook/opt-13b", "a100", 1), ("distserve:opt-66b", "a100", 4), ("vidur:meta-llama/Llama-2-7b-hf", "h100", 1),
    ("vidur:Meta-Llama-3-8B", "a100", 2), ("vidur:microsoft/phi-2", "a40", 1), ("splitwise:llama2-70b", "h100", 8)])
def test_vectorised_decode_matches_the_loop(name, gpu, tp):
    m = get_calibrated_cost(name, gpu, tp)
    assert isinstance(m, StepCostModel)
    for b, kv in ((1, 100), (17, 17 * 900), (150, 150 * 5000)):
        np.testing.assert_allclose(m.decode_steps_s(b, kv, 64), decode_steps_by_loop(m, b, kv, 64), rtol=1e-12)
    assert m.step_time_s(StepShape()) == 0.0 and m.step_time_s(prefill(64000)) > m.step_time_s(prefill(4000)) > 0


def test_registry_listing_and_errors():
    keys = {c.key for c in list_calibrated()}
    assert "distserve-vllm:facebook/opt-13b@a100-80gb/tp1" in keys
    assert "vidur:meta-llama/Meta-Llama-3-70B@a100-80gb/tp8" in keys
    assert "splitwise:bigscience/bloom@h100-80gb-pcap/tp8" in keys
    assert not any(k.startswith("vidur:") and "@a40/tp2" in k for k in keys)  # no A40 all-reduce profile
    # vidur before splitwise
    assert get_calibrated_cost("llama2-70b", "NVIDIA H100 80GB SXM5", 2).name.startswith("vidur:")
    with pytest.raises(UnknownNameError) as err:
        get_calibrated_cost("facebook/opt-13b", "A100-80GB", 3)
    assert "distserve-vllm:facebook/opt-13b@a100-80gb/tp1" in str(err.value)
    with pytest.raises(UnknownNameError):
        get_calibrated_cost("facebook/opt-13b", "A100-40GB", 1)
    with pytest.raises(UnknownNameError):
        get_calibrated_cost("opt-13b", "a100", 1, source="roofline")


_SHARED = Path(__file__).resolve().parents[3] / "shared" / "data" / "profiling" / "vidur"


@pytest.mark.skipif(not _SHARED.is_dir(), reason="reference data set not present")
def test_bundled_subset_keeps_the_original_values():
    from kvledger.accounting import calibrated

    ours = calibrated._root() / "vidur" / "compute" / "h100" / "Qwen" / "Qwen-72B" / "mlp_median.csv"
    orig = _SHARED / "compute" / "h100" / "Qwen" / "Qwen-72B" / "mlp.csv"
    with ours.open() as a, orig.open() as b:
        for x, y in zip(csv.DictReader(a), csv.DictReader(b), strict=True):
            assert all(x[k] == y[k] for k in x)


def test_a_fit_that_turns_negative_outside_its_data_is_refused_not_used():
    # a prefill fit with a negative quadratic term, 20 + 0.1·t − 2e-6·Σt² ms (Σt² generalised as 2·pairs − t = t²),
    # is positive at 512 tokens (20 + 51.2 − 0.52 = 70.7 ms) and negative at 100,000 (20 + 10,000 − 20,000 ms):
    # the model is refused there rather than giving a negative step time
    from kvledger.accounting.calibrated import DistServeStepCost
    from kvledger.accounting.stepcost import StepShape
    from kvledger.errors import InputError

    m = DistServeStepCost("test", (20.0, 0.1, -2e-6), (20.0, 5e-4, 0.06), (20.0, 5e-4, 0.12), 95)
    assert m.step_time_s(StepShape(num_prefill_tokens=512, num_prefill_seqs=1, prefill_attn_pairs=512 * 513 / 2)) == \
        pytest.approx((20.0 + 0.1 * 512 - 2e-6 * (512 * 513 - 512)) / 1000.0)
    with pytest.raises(InputError, match="does not hold this far outside the measurements"):
        m.step_time_s(StepShape(num_prefill_tokens=100_000, num_prefill_seqs=1,
                                prefill_attn_pairs=100_000 * 100_001 / 2))


def _grid_at_numpy(g, x: float, y: float) -> float:
    """Grid2.at as numpy computes it (np.clip, np.searchsorted, float64 scalars): the reference for its Python form."""
    xc = min(max(x, g.xs[0]), g.xs[-1])
    yc = min(max(y, g.ys[0]), g.ys[-1])
    i = int(np.clip(np.searchsorted(g.xs, xc) - 1, 0, len(g.xs) - 2))
    j = int(np.clip(np.searchsorted(g.ys, yc) - 1, 0, len(g.ys) - 2))
    fx = (xc - g.xs[i]) / (g.xs[i + 1] - g.xs[i])
    fy = (yc - g.ys[j]) / (g.ys[j + 1] - g.ys[j])
    z = g.z
    return float((1 - fx) * ((1 - fy) * z[i, j] + fy * z[i, j + 1]) + fx * ((1 - fy) * z[i + 1, j] + fy * z[i + 1,
                                                                                                         j + 1]))


def test_vidur_grid_lookups_in_python_floats_equal_numpys_bit_for_bit():
    m = get_calibrated_cost("vidur:meta-llama/Llama-2-7b-hf", "h100", 1)
    rng = np.random.default_rng(0)
    for g in (m.decode, m.prefill):
        # grid points, edges, below and beyond the grid, and random points inside, as ints and floats
        xs = [*g.xs.tolist(), g.xs[0] - 1, g.xs[-1] * 2, *rng.uniform(g.xs[0], g.xs[-1], 50).tolist(), 3, 1000]
        ys = [*g.ys.tolist(), 0, g.ys[-1] * 3, *rng.uniform(g.ys[0], g.ys[-1], 50).tolist(), 7, 4096]
        for x in xs:
            for y in ys[::3]:
                assert g.at(x, y) == _grid_at_numpy(g, x, y)
    # decode_steps_s keeps each batch size's terms: a second call (from the memo) gives the same floats
    first = m.decode_steps_s(17, 17 * 900, 64)
    assert 17 in m.by_batch and m.decode_steps_s(17, 17 * 900, 64).tolist() == first.tolist()
