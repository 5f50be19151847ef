"""The host term of a vLLM step (accounting/host_overhead.py), worked by hand, and how it reaches the step cost."""

from __future__ import annotations

import csv
from importlib import resources

import numpy as np
import pytest

from kvledger.accounting.host_overhead import (
    OP_HOST_S,
    V0_SEQ_S,
    V0_STEP_S,
    V1_SEQ_S,
    V1_STEP_S,
    HostStepCost,
    eager_launch_s,
    host_overhead_for,
)
from kvledger.accounting.stepcost import StepShape


class Flat:
    """A step cost of a fixed GPU time, s."""

    name = "flat"

    def __init__(self, gpu_s: float) -> None:
        self.gpu_s = gpu_s

    def step_time_s(self, shape: StepShape) -> float:
        return self.gpu_s


def test_opt13b_eager_decode_of_32_sequences_by_hand():
    # OPT-13B: 40 decoder layers. vLLM 0.5-era V0 count 18 ops a layer + 12 outside: 40·18 + 12 = 732 ops;
    # × 19 µs = 13.908 ms of launches. V0 CPU in series at TP 1 and 32 sequences: 0.813 ms + 32 × 42.3 µs = 2.1666 ms.
    h = host_overhead_for("vllm", "0.5.0", 40, 1, enforce_eager=True, batching="vllm_v0")
    assert h.launch_s == pytest.approx(732 * 19e-6)
    assert eager_launch_s(40, 18) == pytest.approx(0.013908)
    # GPU work 10 ms < launches: the launches set the pace, 13.908 + 2.1666 = 16.0746 ms
    assert h.step(0.010, 0, 32) == pytest.approx(0.0160746)
    # GPU work 20 ms > launches: the launches hide under it, 20 + 2.1666 = 22.1666 ms
    assert h.step(0.020, 0, 32) == pytest.approx(0.0221666)
    # a prompt step of 2 sequences, GPU 10 ms: 13.908 + 0.813 + 2 × 0.0423 = 14.8056 ms
    assert h.step(0.010, 1600, 2) == pytest.approx(0.0148056)


def test_v0_with_cuda_graphs_launches_only_prompt_steps():
    # V0 (0.9.0 _use_captured_graph): decode steps replay a graph, prompt steps launch eagerly
    h = host_overhead_for("vllm", "0.9.0", 32, 1, enforce_eager=False, batching="vllm_v0", max_num_seqs=128)
    assert h.step(0.005, 0, 32) == pytest.approx(0.005 + 0.813e-3 + 32 * 42.3e-6)
    launch = (32 * 18 + 12) * 19e-6  # 11.172 ms
    assert h.step(0.005, 200, 1) == pytest.approx(launch + 0.813e-3 + 42.3e-6)
    # 0.5.0 captures batches up to 256 only (_BATCH_SIZES_TO_CAPTURE): a decode step of 300 launches eagerly
    h = host_overhead_for("vllm", "0.5.0", 32, 1, enforce_eager=False, batching="vllm_v0", max_num_seqs=512)
    assert h.graph_max_batch == 256
    assert h.step(0.005, 0, 256) == pytest.approx(0.005 + 0.813e-3 + 256 * 42.3e-6)
    assert h.step(0.005, 0, 300) == pytest.approx(launch + 0.813e-3 + 300 * 42.3e-6)


def test_which_engines_get_a_term():
    # V1 with CUDA graphs: only its CPU term, none when --cpu-overhead / a profile's host terms price it (rule_cpu off)
    h = host_overhead_for("vllm", "0.11.0", 32, 1, enforce_eager=False, batching="continuous")
    assert (h.launch_s, h.step_s, h.seq_s, h.overlap) == (0.0, V1_STEP_S, V1_SEQ_S, False)
    assert host_overhead_for("vllm", "0.11.0", 32, 1, enforce_eager=False, batching="continuous",
                             rule_cpu=False) is None
    assert host_overhead_for("sglang", "0.5.23", 32, 1, enforce_eager=True, batching="sglang") is None
    # V1 with --enforce-eager: launches on every step, and V1's CPU term (not V0's)
    h = host_overhead_for("vllm", "0.11.0", 32, 1, enforce_eager=True, batching="continuous")
    assert (h.step_s, h.seq_s, h.graph_max_batch) == (V1_STEP_S, V1_SEQ_S, 0)
    assert h.launch_s == pytest.approx(eager_launch_s(32, 18))
    # TP > 1: Vidur's TP 2–4 line
    h = host_overhead_for("vllm", "0.9.0", 32, 2, enforce_eager=False, batching="vllm_v0")
    assert (h.step_s, h.seq_s) == (1.454e-3, 44.3e-6)
    # an idle step costs nothing
    assert h.step(0.0, 0, 0) == 0.0


def _vidur_line(models: set[str]) -> tuple[float, float]:
    """Least-squares (ms, ms per sequence) of schedule + prepare_inputs_e2e + sampler_e2e + process_model_outputs
    medians against batch over Vidur's A100 rows of these models."""
    path = resources.files("kvledger.accounting") / "data" / "profiling" / "vidur" / "cpu_overheads" / "a100" / \
        "cpu_overheads.csv"
    with path.open() as fh:
        rows = [r for r in csv.DictReader(fh) if r["model_name"] in models]
    b = np.array([float(r["batch_size"]) for r in rows])
    y = np.array([sum(float(r[k + "_median"]) for k in ("schedule", "prepare_inputs_e2e", "sampler_e2e",
                                                          "process_model_outputs")) for r in rows])
    c = np.linalg.lstsq(np.vstack([np.ones_like(b), b]).T, y, rcond=None)[0]
    return float(c[0]), float(c[1])


def test_v0_cpu_constants_are_vidurs_lines():
    step, seq = _vidur_line({"meta-llama/Llama-2-7b-hf", "microsoft/phi-2"})  # the TP 1 rows
    assert V0_STEP_S[1] * 1e3 == pytest.approx(step, abs=1e-3)
    assert V0_SEQ_S[1] * 1e3 == pytest.approx(seq, abs=1e-4)
    step, seq = _vidur_line({"codellama/CodeLlama-34b-Instruct-hf", "internlm/internlm-20b",
                             "meta-llama/Llama-2-70b-hf"})  # TP 2 and 4
    assert V0_STEP_S[2] * 1e3 == pytest.approx(step, abs=1e-3)
    assert V0_SEQ_S[2] * 1e3 == pytest.approx(seq, abs=1e-4)
    assert OP_HOST_S == 19e-6


def test_wrapper_prices_every_path_alike():
    h = host_overhead_for("vllm", "0.5.0", 40, 1, enforce_eager=True, batching="vllm_v0")
    c = HostStepCost(Flat(0.010), h)
    shape = StepShape(num_decode_seqs=32, decode_kv_tokens=32 * 500)
    assert c.step_time_s(shape) == pytest.approx(0.0160746)
    assert c.decode_steps_list(32, 16000, 3) == [c.step_time_s(shape)] * 3
    assert list(c.decode_steps_s(32, 16000, 3)) == [c.step_time_s(shape)] * 3
    assert c.decode_plain_terms(32) is None
    assert c.name == "flat+host" and c.gpu_s == 0.010  # other attributes are the wrapped model's


def test_v0_roofline_gets_the_term_from_make_step_cost():
    from kvledger.analyses.serving.sim_setup import SimRequestArgs, load_plan, make_step_cost

    a = SimRequestArgs(model="facebook/opt-13b", gpu="A100-80GB", engine_version="0.5.0", max_model_len=2048,
                       gpu_profile="none", enforce_eager=True)
    plan, _ = load_plan(a)
    cost, info = make_step_cost(a, plan, batching="vllm_v0")
    assert isinstance(cost, HostStepCost) and "host_overhead.py" in info["source"]
    shape = StepShape(num_decode_seqs=8, decode_kv_tokens=8 * 1000)
    gpu = cost.inner.step_time_s(shape)
    assert cost.step_time_s(shape) == pytest.approx(max(gpu, eager_launch_s(40, 18)) + 0.813e-3 + 8 * 42.3e-6)
    plain, _ = make_step_cost(SimRequestArgs(model="facebook/opt-13b", gpu="A100-80GB", engine_version="0.11.0",
                                             max_model_len=2048, gpu_profile="none"),
                              load_plan(SimRequestArgs(model="facebook/opt-13b", gpu="A100-80GB",
                                                       engine_version="0.11.0", max_model_len=2048,
                                                       gpu_profile="none"))[0])
    assert isinstance(plain, HostStepCost) and "V1 CPU" in plain.host.source and not plain.host.overlap


def test_v1_cpu_term_at_128_sequences_by_hand():
    # vLLM 0.11 V1 without async scheduling (engine/core.py EngineCore.step: schedule → execute_model, which ends in
    # the sampled ids' .tolist() sync → update_from_output, one after the other): CPU time in series
    # 0.5 ms + 128 × 20 µs = 3.06 ms. A decode step whose GPU work is 7 ms then takes 7 + 3.06 = 10.06 ms.
    h = host_overhead_for("vllm", "0.11.0", 32, 1, enforce_eager=False, batching="continuous")
    assert h.step(0.007, 0, 128) == pytest.approx(0.01006)
    # a prompt step of 3 sequences (no eager launches in V1): 7 + 0.5 + 3 × 0.02 = 7.56 ms
    assert h.step(0.007, 1500, 3) == pytest.approx(0.00756)
    # with async scheduling the engine overlaps it: max(7, 3.06) = 7 ms; with 2 ms of GPU work the CPU sets it, 3.06
    h = host_overhead_for("vllm", "0.11.0", 32, 1, enforce_eager=False, batching="continuous", async_scheduling=True)
    assert h.step(0.007, 0, 128) == pytest.approx(0.007)
    assert h.step(0.002, 0, 128) == pytest.approx(0.00306)


def test_v1_term_and_cpu_overhead_are_one_term():
    from dataclasses import replace

    from kvledger.analyses.serving.sim_setup import SimRequestArgs, load_plan, make_step_cost

    a = SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="H100", engine_version="0.11.0", max_model_len=512,
                       gpu_profile="none", max_num_seqs=128)
    plan, _ = load_plan(a)
    cost, info = make_step_cost(a, plan)
    shape = StepShape(num_decode_seqs=128, decode_kv_tokens=128 * 300)
    assert cost.step_time_s(shape) == pytest.approx(cost.inner.step_time_s(shape) + 0.5e-3 + 128 * 20e-6)
    # async scheduling: the engine overlaps it; 8B's cheapest step (its 16 GB weight read, 5.6 ms) is above
    # 0.5 + 128 × 0.02 = 3.06 ms: hidden, the plain roofline kept
    over, _ = make_step_cost(a, plan, overlap_cpu=True)
    assert not isinstance(over, HostStepCost)
    assert over.step_time_s(shape) == pytest.approx(cost.inner.step_time_s(shape))
    # --cpu-overhead 2ms replaces the term: the roofline's own per-step CPU time, no second one
    b = replace(a, cpu_overhead="2ms")
    plan_b, _ = load_plan(b)
    given, _ = make_step_cost(b, plan_b)
    assert not isinstance(given, HostStepCost) and given.cpu_overhead_s == pytest.approx(2e-3)


def test_cpu_overhead_replaces_v0s_cpu_line_and_keeps_its_launches():
    # --cpu-overhead gives the engine's CPU time per step: V0's Vidur line (0.813 ms + 42.3 µs per sequence) is then
    # not added a second time, while eager launches (priced against the GPU work, max) stay: OPT-13B, 40 layers ×
    # 18 ops + 12 = 732 launches × 19 µs = 13.908 ms against 5 ms of GPU work → 13.908 ms, no CPU line.
    h = host_overhead_for("vllm", "0.5.0", 40, 1, enforce_eager=True, batching="vllm_v0", rule_cpu=False)
    assert (h.step_s, h.seq_s) == (0.0, 0.0) and "V0 CPU" not in h.source
    assert h.step(0.005, 0, 32) == pytest.approx(eager_launch_s(40, 18)) == pytest.approx(0.013908)


def test_a_profiles_fitted_host_time_adds_to_v1s_cpu_term(tmp_path):
    # calibration.gpu_fit fits host_step_s/host_seq_s with the engine's host term kept (roofline_with), so a
    # profile's host time is what the rule leaves out and adds to it: vLLM 0.11 without async scheduling, a decode
    # step of 128 sequences = the roofline's GPU time + 0.6 ms + 128 × 13 µs (the profile) + 0.5 ms + 128 × 20 µs
    # (V1's CPU term) = GPU + 2.264 ms + 3.06 ms.
    import json

    from kvledger.analyses.serving.sim_setup import SimRequestArgs, load_plan, make_step_cost

    base = SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="H100", engine_version="0.11.0", max_model_len=512,
                          gpu_profile="none", max_num_seqs=128, gemm_efficiency="flat")  # as the profile below
    plan, _ = load_plan(base)
    prof = tmp_path / "p.json"
    prof.write_text(json.dumps({"kind": "kvledger-gpu-profile", "version": 2, "gpu": plan.gpu.name,
                                "flops_fraction": 0.7, "bandwidth_fraction": 0.8, "host_step_s": 0.0006,
                                "host_seq_s": 1.3e-5}))
    from dataclasses import replace

    a = replace(base, gpu_profile=str(prof))
    cost, info = make_step_cost(a, load_plan(a)[0])
    assert isinstance(cost, HostStepCost) and "V1 CPU" in cost.host.source
    shape = StepShape(num_decode_seqs=128, decode_kv_tokens=128 * 300)
    plain, _ = make_step_cost(base, plan)
    gpu = plain.inner.step_time_s(shape)
    assert cost.step_time_s(shape) == pytest.approx(gpu + 0.0006 + 128 * 1.3e-5 + 0.5e-3 + 128 * 20e-6)


def test_a_fitted_step_cost_is_the_whole_step_no_host_term_on_top(tmp_path):
    # A model-scope fit (`kvledger calibrate --scope model`'s profile, a bundled calibration) is fitted to the engine's
    # measured latencies, so its fixed and per-request terms already hold that engine's host time (build_profile's
    # note: "both are in fixed_s"); the term priced on top would count it twice. Under V0 and --enforce-eager, where
    # the roofline is wrapped (test above), make_step_cost returns a fitted cost as fitted.
    import json

    from kvledger.accounting.calibration_profile import PROFILE_KIND
    from kvledger.analyses.serving.sim_setup import SimRequestArgs, load_plan, make_step_cost

    path = tmp_path / "profile.json"
    path.write_text(json.dumps({"kind": PROFILE_KIND, "version": 1, "step_cost": {
        "fixed_s": 0.020, "prefill_token_s": 1e-4, "prefill_pair_s": 0.0, "decode_seq_s": 1e-3,
        "decode_kv_token_s": 0.0, "cpu_overhead_s": 0.0, "overlap": False}}))
    kw = dict(model="facebook/opt-13b", gpu="A100-80GB", engine_version="0.5.0", max_model_len=2048,
              gpu_profile="none", enforce_eager=True)
    plan, _ = load_plan(SimRequestArgs(**kw))
    cost, info = make_step_cost(SimRequestArgs(**kw, step_cost=str(path)), plan, batching="vllm_v0")
    assert not isinstance(cost, HostStepCost) and "host_overhead.py" not in info["source"]
    # decode of 32 requests: 20 ms + 32 × 1 ms = 52 ms (with the term on top: 52 + 0.813 + 32 × 0.0423 = 54.167 ms)
    assert cost.step_time_s(StepShape(num_decode_seqs=32, decode_kv_tokens=32_000)) == pytest.approx(0.052)
    # a prompt step of 800 tokens: 20 + 800 × 0.1 = 100 ms (launches 40 × 18 + 12 ops × 19 µs = 13.9 ms lie under it;
    # the CPU term, 0.813 + 0.0423 = 0.855 ms, is not added)
    assert cost.step_time_s(StepShape(num_prefill_tokens=800, num_prefill_seqs=1, prefill_kv_tokens=800,
                                      prefill_attn_pairs=800 * 801 / 2)) == pytest.approx(0.100)
    bundled, _ = make_step_cost(SimRequestArgs(**kw, step_cost="calibrated"), plan, batching="vllm_v0")
    assert not isinstance(bundled, HostStepCost)
    # DistServe's decode fit below 95 requests, a + b·ΣK + c·B ms (its stored coefficients ≈ 23.48, 5.93e-4, 0.0607)
    a, b, c = bundled.decode_small
    assert bundled.step_time_s(StepShape(num_decode_seqs=32, decode_kv_tokens=32_000)) == pytest.approx(
        (a + b * 32_000 + c * 32) / 1e3)
    assert (a + b * 32_000 + c * 32) == pytest.approx(23.48 + 18.976 + 1.9424, abs=0.02)
