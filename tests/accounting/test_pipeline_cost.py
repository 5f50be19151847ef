"""The stages' step cost (accounting/pipeline_cost.py) and the per-boundary sends it takes from the plan's pipeline
pass (pipeline_pass.PipelineSends.boundary_s)."""

from __future__ import annotations

import pytest

from kvledger.accounting.pipeline_cost import PipelineStepCost
from kvledger.accounting.pipeline_pass import pipeline_sends
from kvledger.accounting.settings import make_settings
from kvledger.accounting.stepcost import FixedStepCost, StepShape
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model

L405 = load_model("meta-llama/Llama-3.1-405B-Instruct")


@pytest.mark.parametrize(("pp", "nnodes", "crossing"), [
    (2, 2, (True,)),  # ranks 0–7 | 8–15: the one boundary is between the nodes
    (4, 4, (True, True, True)),  # one stage a node
    (4, 2, (False, True, False)),  # 16 ranks a node: ranks 7|8 and 23|24 stay on a node, 15|16 crosses
])
def test_each_boundary_knows_whether_it_crosses_nodes(pp, nnodes, crossing):
    s = pipeline_sends(L405, get_gpu("H100"), make_settings(engine="vllm", tp=8, pp=pp, nnodes=nnodes))
    assert s.crossing == crossing and s.across_nodes == sum(crossing)
    for tokens in (1, 3, 8192):  # 3 × 16,384 hidden divides by TP 8; every count here does
        assert sum(s.boundary_s(tokens, b) for b in range(pp - 1)) == pytest.approx(s.seconds(tokens), rel=1e-12)
    if False in crossing:  # a boundary over the NICs takes longer than one over NVLink
        assert s.boundary_s(64, crossing.index(True)) > s.boundary_s(64, crossing.index(False))


def test_stages_split_the_step_by_their_layers():
    # 126 layers over 2 stages: 63 + 63 (get_pp_indices): each stage half of 10 ms + 100 tokens × 1 µs = 10.1 ms
    sends = pipeline_sends(L405, get_gpu("H100"), make_settings(engine="vllm", tp=8, pp=2, nnodes=2))
    cost = PipelineStepCost(FixedStepCost(0.010, 1e-6), sends, (63, 63), True)
    shape = StepShape(num_decode_seqs=100, decode_kv_tokens=100 * 1000)
    assert cost.stage_times_s(shape) == pytest.approx([0.00505, 0.00505])
    assert cost.step_time_s(shape) == pytest.approx(0.0101 + sends.seconds(100))
    assert cost.decode_steps_s(100, 100_000, 3).tolist() == pytest.approx([0.0101 + sends.seconds(100)] * 3)
    assert cost.pp == 2 and not hasattr(cost, "step_time_of")  # the fast pricing calls leave the sends out
