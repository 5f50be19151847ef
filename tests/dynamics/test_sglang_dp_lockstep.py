"""SGLang's DP attention ranks in lock-step (dynamics/dp_lockstep.py with SGLang 0.5.23's round-robin dispatch,
data_parallel_controller.py round_robin_scheduler): two ranks, a fixed step cost, worked by hand."""

from __future__ import annotations

from types import SimpleNamespace

from kvledger.accounting.stepcost import FixedStepCost
from kvledger.dynamics.dp_lockstep import RoundRobinBalancer
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.simulator import EngineConfig, simulate

RANK = FixedStepCost(per_step_s=0.01, per_token_s=0.001)  # a rank's step: 10 ms + 1 ms per token


class _Lockstep:
    """Two ranks, the step the slowest rank's; an idle rank's IDLE batch of 0 tokens: 10 ms."""

    dp, inner, name = 2, RANK, "fixed"

    def step_time_s(self, shapes):
        return max(0.010 if s is None else RANK.step_time_s(s) for s in shapes)


def test_round_robin_ignores_load():
    b = RoundRobinBalancer(3)
    busy = SimpleNamespace(arrival_s=0.0)
    assert [b([None] * 3, busy) for _ in range(5)] == [0, 1, 2, 0, 1] and b.routed == [2, 2, 1]


def test_round_robin_sends_a_request_to_the_busy_rank():
    cfg = EngineConfig(num_gpu_blocks=100, block_size=16, max_model_len=512)
    reqs = [RequestSpec("long", 0.0, 4, 20), RequestSpec("b", 0.0, 4, 1), RequestSpec("c", 0.2, 4, 1)]
    res = simulate(reqs, cfg, _Lockstep(), data_parallel_rule="sglang round_robin")
    rec = {r.request_id: r for r in res.records.records}
    # round robin: "long" → rank 0, "b" → rank 1, "c" → rank 0 again though rank 0 is busy and rank 1 idle
    # (vLLM 0.19's load score would send it to rank 1)
    assert res.extra["data_parallel"]["requests_routed_per_rank"] == [2, 1]
    assert res.extra["data_parallel"]["balancing_rule"] == "SGLang 0.5.23 round_robin"
    # step 1 (t = 0): both ranks prefill 4 tokens, 14 ms: "long"'s first token and "b"'s only one at 0.014 s
    assert abs(rec["b"].finish_s - 0.014) < 1e-12 and abs(rec["long"].first_token_s - 0.014) < 1e-12
    # then rank 0 decodes "long" (11 ms; rank 1's IDLE batch 10 ms): steps start at 0.014 + 0.011 k; "c" (0.2 s) is
    # routed at the first start at or after it, k = 17: 0.201 s, where rank 0 decodes 1 + prefills 4 = 15 ms
    assert abs(rec["c"].finish_s - 0.216) < 1e-12
    # "long": tokens 2–18 at 0.025 … 0.201, the 19th at 0.216, the 20th 11 ms later
    assert abs(rec["long"].finish_s - 0.227) < 1e-12
    # vLLM 0.19's rule on the same run: "c" to the idle rank 1, its 14 ms prefill beside rank 0's 11 ms decode
    v = simulate(reqs, cfg, _Lockstep(), data_parallel_rule="0.19.0")
    assert v.extra["data_parallel"]["requests_routed_per_rank"] == [1, 2]
    assert abs({r.request_id: r for r in v.records.records}["c"].finish_s - 0.215) < 1e-12
