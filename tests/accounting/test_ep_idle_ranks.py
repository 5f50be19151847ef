"""EP larger than the routed-expert count: vLLM's determine_expert_map (0.19 fused_moe/layer.py, 0.33
expert_map_manager.py) gives rank r ``E // ep + (r < E % ep)`` experts and refuses nothing, so with ep > E the ranks
from E on hold none; the plan says so in its first lines, not only in --verbose."""

from __future__ import annotations

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.catalog.expert_placement import local_experts
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model
from kvledger.report.plan_summary import warning_lines


def test_mixtral_ep16_leaves_eight_gpus_without_experts():
    # 8 experts over EP 16: 8 // 16 = 0 each, 8 % 16 = 8 ranks one more → ranks 0–7 hold 1, ranks 8–15 hold 0
    assert [local_experts(8, 16, r) for r in (0, 7, 8, 15)] == [1, 1, 0, 0]
    m, g = load_model("mistralai/Mixtral-8x7B-v0.1"), get_gpu("H100-SXM")
    for s in (make_settings(tp=16, nnodes=2, enable_expert_parallel=True),
              make_settings(tp=8, data_parallel_size=2, nnodes=2, enable_expert_parallel=True)):
        lines = warning_lines(build_plan(m, g, s, with_advice=False))
        assert any("EP 16 over 8 routed experts" in w and "8 of the 16 GPUs add no expert capacity" in w
                   for w in lines)
    # EP 8 over 8 experts: one each, nothing idle
    p = build_plan(m, g, make_settings(tp=8, enable_expert_parallel=True), with_advice=False)
    assert not any("routed experts:" in w for w in warning_lines(p))
