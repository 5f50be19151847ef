"""The fast path's list of pure-decode step prices is, float for float, what pricing each step on its own gives."""

from __future__ import annotations

import pytest

from kvledger.accounting.plan import build_plan
from kvledger.accounting.roofline import RooflineStepCost
from kvledger.accounting.settings import PlanSettings
from kvledger.accounting.stepcost import StepShape
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model


def _cost(name, gpu, tp=1, **kw):
    m, g = load_model(name, allow_hub=False), get_gpu(gpu)
    return RooflineStepCost(m, g, build_plan(m, g, PlanSettings(tp=tp), with_roofline=False, with_advice=False).kv, tp,
                            **kw)


@pytest.mark.parametrize("name, gpu, tp, kw", [
    ("meta-llama/Llama-3.1-8B", "H100", 1, {}),  # bandwidth-bound decode: the plain-float path up to 96 steps
    ("meta-llama/Llama-3.1-8B", "H100", 2, {"cpu_overhead_s": 0.0004}),  # all-reduce and CPU terms added
    ("meta-llama/Llama-3.1-8B", "L4", 1, {"cpu_overhead_s": 0.003, "overlap_cpu": True}),  # the CPU floor under overlap
    ("Qwen/Qwen3-8B", "H100", 1, {"flops_fraction": 0.5, "bandwidth_fraction": 0.6}),
    ("meta-llama/Llama-3.1-8B", "H100", 1, {"host_step_s": 0.0007, "host_seq_s": 1.3e-5}),  # host terms in series
    ("meta-llama/Llama-3.1-8B", "H100", 2, {"host_seq_s": 2e-5, "cpu_overhead_s": 0.004, "overlap_cpu": True}),
])
@pytest.mark.parametrize("num_seqs, kv_tokens", [(1, 17), (9, 12_345), (300, 600_000)])
@pytest.mark.parametrize("num_steps", [1, 7, 32, 33, 96, 97, 250])
def test_decode_steps_list_equals_each_step_priced_alone(name, gpu, tp, kw, num_seqs, kv_tokens, num_steps):
    rc = _cost(name, gpu, tp, **kw)
    # step j decodes one token for each of num_seqs requests reading kv_tokens + num_seqs·j KV tokens in all
    alone = [rc.step_time_s(StepShape(0, 0, 0, 0.0, num_seqs, kv_tokens + num_seqs * j)) for j in range(num_steps)]
    assert rc.decode_steps_list(num_seqs, kv_tokens, num_steps) == alone
    assert rc.decode_steps_s(num_seqs, kv_tokens, num_steps).tolist() == alone


@pytest.mark.parametrize("name, gpu, tp, kw", [
    ("meta-llama/Llama-3.1-8B", "H100", 1, {}),
    ("meta-llama/Llama-3.1-8B", "H100", 2, {"cpu_overhead_s": 0.0004}),
    ("meta-llama/Llama-3.1-8B", "L4", 1, {"cpu_overhead_s": 0.003, "overlap_cpu": True}),
    ("Qwen/Qwen3-8B", "H100", 1, {"flops_fraction": 0.5, "bandwidth_fraction": 0.6}),
    ("meta-llama/Llama-3.1-8B", "H100", 1, {"host_step_s": 0.0007, "host_seq_s": 1.3e-5}),  # host terms in series
    ("meta-llama/Llama-3.1-8B", "H100", 2, {"host_seq_s": 2e-5, "cpu_overhead_s": 0.004, "overlap_cpu": True}),
])
def test_a_mixed_step_priced_from_its_fields_equals_its_costs_priced(name, gpu, tp, kw):
    # step_time_of reads its constants (2 × matmul params, peak × fraction, …) from step_consts, kept at the first
    # call: every price must still be time_s(costs(shape)) float for float, the first call and the later ones.
    rc = _cost(name, gpu, tp, **kw)
    shapes = [(0, 0, 0, 0.0, 5, 4_000), (1_000, 1, 1_000, 500_500.0, 60, 250_000), (512, 2, 2_048, 393_472.0, 0, 0),
              (3, 1, 903, 2_709.0, 255, 1_000_000), (0, 0, 0, 0.0, 0, 0)]
    for _ in range(2):
        assert [rc.step_time_of(*s) for s in shapes] == [
            rc.time_s(rc.costs(StepShape(*s))) if s[0] + s[4] else 0.0 for s in shapes]
    assert rc.step_consts()[7] == rc.peak_flops * rc.flops_fraction  # matmul peak × fraction, FLOP/s
