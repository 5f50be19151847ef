"""``HostStepCost.decode_steps_list`` takes the wrapped model's own list and applies the host term to it: the same
floats as pricing each pure-decode step alone (``step_time_of``), as the wrapper priced them before."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvledger.accounting.host_overhead import HostStepCost, host_overhead_for
from kvledger.analyses.serving.sim_setup import SimRequestArgs, load_plan, make_step_cost


def _by_step(cost: HostStepCost, n: int, kv: int, steps: int) -> list[float]:
    return [cost.step_time_of(0, 0, 0, 0.0, n, kv + i * n) for i in range(steps)]


@pytest.mark.parametrize("gpu,tp,version,eager,batching", [
    ("H100", 1, "0.11.0", False, "continuous"), ("L40S", 2, "0.11.0", False, "continuous"),
    ("A100-80GB", 4, None, False, "continuous"), ("H100", 1, "0.11.0", True, "continuous"),
    ("A100-80GB", 1, "0.5.0", False, "vllm_v0"), ("A100-80GB", 2, "0.5.0", True, "vllm_v0")])
def test_list_is_each_step_priced_alone(gpu, tp, version, eager, batching):
    a = SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu=gpu, tp=tp, engine_version=version, max_model_len=4096,
                       gpu_profile="none", enforce_eager=eager, max_num_seqs=512)
    cost, _ = make_step_cost(a, load_plan(a)[0], batching=batching)
    assert isinstance(cost, HostStepCost)
    for n in (1, 3, 64, 255, 256, 257, 300):
        for kv, steps in ((n * 17, 1), (n * 900 + 5, 40), (n * 2000, 96), (n * 10, 97), (n * 3000 + 1, 250)):
            assert cost.decode_steps_list(n, kv, steps) == _by_step(cost, n, kv, steps)


@pytest.mark.parametrize("overlap", [False, True])
def test_overlapped_term_and_a_model_without_its_own_list(overlap):
    a = SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu="H100", engine_version="0.11.0", max_model_len=4096,
                       gpu_profile="none")
    inner = make_step_cost(a, load_plan(a)[0])[0].inner
    h = host_overhead_for("vllm", "0.11.0", 32, 1, enforce_eager=True, batching="continuous", async_scheduling=overlap)
    cost = HostStepCost(inner, h)
    for n, kv, steps in ((1, 100, 5), (128, 128 * 700, 60), (32, 32 * 4000, 150)):
        assert cost.decode_steps_list(n, kv, steps) == _by_step(cost, n, kv, steps)
    flat = HostStepCost(type("Flat", (), {"name": "flat", "step_time_s": lambda self, s: 0.002})(), h)
    assert flat.decode_steps_list(8, 80, 3) == _by_step(flat, 8, 80, 3)




@pytest.mark.parametrize("gpu", ["H100", "L40S"])
@pytest.mark.parametrize("cpu_scale,graphs", [(1.0, None), (40.0, 256)])
def test_overlapped_cpu_term_on_the_plain_roofline_list(gpu, cpu_scale, graphs):
    # async scheduling overlaps V1's CPU time with the GPU's (max, not sum); a TP-1 roofline without a state or
    # all-reduce term has the plain decode form gemm + g·kv / bw, so the wrapper prices a chunk in one pass: every
    # float equal to pricing the step alone. 0.11's CPU time never leads these GPUs' decode steps; 40× it leads the
    # small batches (the max takes the CPU side), and with graphs up to 256 sequences the larger batches run eager
    # (launches against the GPU work: the two-pass list)
    a = SimRequestArgs(model="meta-llama/Llama-3.1-8B", gpu=gpu, engine_version="0.11.0", max_model_len=4096,
                       gpu_profile="none")
    inner = make_step_cost(a, load_plan(a)[0])[0].inner
    h = host_overhead_for("vllm", "0.11.0", 32, 1, enforce_eager=False, batching="continuous", async_scheduling=True)
    h = replace(h, step_s=h.step_s * cpu_scale, graph_max_batch=graphs or h.graph_max_batch)
    cost = HostStepCost(inner, h)
    assert h.overlap and inner.decode_plain_terms(64) is not None  # the plain form the one-pass list reads
    cpu_led = 0
    for n in (1, 3, 64, 255, 256, 257, 300):
        for kv, steps in ((n * 17, 1), (n * 900 + 5, 40), (n * 2000, 96), (n * 10, 97)):
            got = cost.decode_steps_list(n, kv, steps)
            assert got == _by_step(cost, n, kv, steps)
            cpu_led += got.count(h.step_s + h.seq_s * n)
    assert (cpu_led > 0) == (cpu_scale > 1)
