"""V1's CPU time under async scheduling: hidden under the GPU step unless it can lead (a small model at many
sequences), where max(GPU, CPU) prices the step (analyses/serving/roofline_choice.cpu_can_lead)."""

from __future__ import annotations

import pytest

from kvledger.accounting.host_overhead import V1_SEQ_S, V1_STEP_S
from kvledger.analyses.serving.sim_setup import SimRequestArgs, prepare


def _cost(model: str, **kw):
    a = SimRequestArgs(model=model, gpu="H100", trace="azure-conv", num_requests=10, seed=0, gemm_efficiency="flat",
                       **kw)
    return prepare(a).cost


def test_a_small_model_at_many_sequences_is_priced_by_its_cpu_time():
    # Llama-3.2-3B on an H100 (vLLM 0.33 defaults: async scheduling on, 1,024 sequences): a decode step of 512
    # sequences reads 6.4 GB of weights (≈ 2.4 ms at 0.8 × 3.35 TB/s) and does 512 × 6.4 GFLOP (≈ 4.7 ms at 0.7 × 989
    # TFLOP/s), while the engine's CPU time is 0.5 ms + 512 × 20 µs = 10.74 ms: the CPU sets the step
    cost = _cost("meta-llama/Llama-3.2-3B")
    assert cost.step_time_of(0, 0, 0, 0.0, 512, 512) == pytest.approx(V1_STEP_S + 512 * V1_SEQ_S)
    assert V1_STEP_S + 512 * V1_SEQ_S == pytest.approx(10.74e-3)
    # one sequence: 0.52 ms of CPU against the weights' ≥ 2.4 ms: the GPU's time, unchanged by the term
    assert cost.step_time_of(0, 0, 0, 0.0, 1, 1) > V1_STEP_S + V1_SEQ_S


def test_the_work_bounds_read_the_gpu_side_of_an_overlapped_cpu_term():
    from kvledger.accounting.host_overhead import HostStepCost
    from kvledger.analyses.serving.work_bounds import gpu_side

    # every step of max(GPU, CPU) takes at least its GPU time, so the bounds read the roofline underneath
    cost = _cost("meta-llama/Llama-3.2-3B")
    assert isinstance(cost, HostStepCost) and cost.host.overlap and gpu_side(cost) is cost.inner
    plain = _cost("meta-llama/Llama-3.1-8B", max_num_seqs=128)
    assert gpu_side(plain) is plain


def test_where_the_gpu_always_leads_the_roofline_is_kept_as_is():
    # Llama-3.1-8B at 128 sequences: 16 GB of weights take ≥ 6 ms a step, the CPU at most 0.5 + 128 × 0.02 = 3.06 ms
    cost = _cost("meta-llama/Llama-3.1-8B", max_num_seqs=128)
    assert "+host" not in cost.name
