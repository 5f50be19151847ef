"""vLLM's DP ranks of a MoE model in lock-step (dynamics/dp_lockstep.py): the front end's balancing rule per release,
and every rank's step ending with the slowest rank's, worked by hand."""

from __future__ import annotations

from types import SimpleNamespace

from kvledger.accounting.stepcost import FixedStepCost
from kvledger.dynamics.dp_lockstep import DpBalancer, balancer_rule
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.simulator import EngineConfig, simulate

RANK = FixedStepCost(per_step_s=0.01, per_token_s=0.001)  # a rank's step: 10 ms + 1 ms per token


class _Lockstep:
    """Two ranks priced as the lock-step cost prices them: the slowest rank's time, an idle rank its 1-token dummy."""

    dp, inner, name = 2, RANK, "fixed"

    def step_time_s(self, shapes):
        return max(0.011 if s is None else RANK.step_time_s(s) for s in shapes)


def _fake_rank(waiting, running, used=0, capacity=10):
    return SimpleNamespace(sched=SimpleNamespace(waiting=[0] * waiting, running=[0] * running),
                           kv=SimpleNamespace(num_used_blocks=used, capacity_blocks=capacity),
                           num_outstanding=waiting + running)


def test_release_rules():
    assert [balancer_rule(v) for v in ((0, 19, 0), (0, 25, 1), (0, 26, 0), (0, 27, 0), (0, 33, 0))] == [
        "0.19.0", "0.19.0", "0.26.0", "0.33.0", "0.33.0"]


def test_balancing_scores_by_release():
    # rank 0: 1 waiting, 0 running; rank 1: 0 waiting, 3 running (a fresh 100 ms view, t = 0)
    ranks = [_fake_rank(1, 0), _fake_rank(0, 3)]
    req = SimpleNamespace(arrival_s=0.0)
    # 0.19: 4 × waiting + running = 4 against 3 → rank 1
    assert DpBalancer("0.19.0", 2)(ranks, req) == 1
    # 0.33: max(unfinished on the rank, waiting + running) = 1 against 3 → rank 0 (no KV penalty at usage 0)
    assert DpBalancer("0.33.0", 2)(ranks, req) == 0
    # 0.33 with rank 0's KV 90 % used: 1 + 1 × 6 × (0.9 − 0.5) = 3.4 against 3 → rank 1
    assert DpBalancer("0.33.0", 2)([_fake_rank(1, 0, 9, 10), _fake_rank(0, 3)], req) == 1


def test_view_counts_its_own_routings_until_the_next_publication():
    ranks = [_fake_rank(0, 0), _fake_rank(0, 0)]
    b = DpBalancer("0.19.0", 2)
    # t = 0: scores 0, 0 → rank 0 (first on ties), its waiting count now 1; then 4 against 0 → rank 1; then 4, 4 →
    # rank 0 again (0.19 scans from rank 0 every time)
    picks = [b(ranks, SimpleNamespace(arrival_s=t)) for t in (0.0, 0.01, 0.099)]
    assert picks == [0, 1, 0] and b.view[0][0] == 2
    # t = 0.1: a new 100 ms period, the view replaced by the ranks' counts (both empty): rank 0
    assert b(ranks, SimpleNamespace(arrival_s=0.1)) == 0 and b.view[0][0] == 1
    # 0.26 rotates the scan start: the same empty ranks take rank 0, rank 1, then (scores 4, 4, start 0) rank 0
    b26 = DpBalancer("0.26.0", 2)
    assert [b26(ranks, SimpleNamespace(arrival_s=0.0)) for _ in range(3)] == [0, 1, 0]


def test_idle_rank_waits_for_the_busy_ranks_step():
    cfg = EngineConfig(num_gpu_blocks=100, block_size=16, max_model_len=512)
    reqs = [RequestSpec("short", 0.0, 4, 3), RequestSpec("long", 0.0, 100, 1), RequestSpec("late", 0.15, 5, 1)]
    res = simulate(reqs, cfg, _Lockstep(), data_parallel_rule="0.19.0")
    rec = {r.request_id: r for r in res.records.records}
    # routing (0.19, one view for t < 0.1): "short" → rank 0 (0, 0: first), "long" → rank 1 (4 against 0);
    # "late" at 0.15 s: a new period, both ranks empty → rank 0
    assert res.extra["data_parallel"]["requests_routed_per_rank"] == [2, 1]
    # step 1 (t = 0): rank 0 prefills 4 tokens (14 ms), rank 1 100 tokens (110 ms): the step takes 110 ms, so
    # "short"'s first token comes at 0.110 s, not 0.014 s; "long" (one output token) finishes then
    assert abs(rec["short"].first_token_s - 0.110) < 1e-12 and abs(rec["long"].finish_s - 0.110) < 1e-12
    # steps 2 and 3: rank 0 decodes (11 ms), rank 1 idle runs the 1-token dummy (11 ms): 0.121, 0.132
    assert abs(rec["short"].finish_s - 0.132) < 1e-12
    # no rank has work from 0.132 s: no step until "late" arrives at 0.15; its 5-token prefill takes 15 ms
    assert abs(rec["late"].finish_s - 0.165) < 1e-12
    # the same requests on two independent replicas: "short" alone takes 14 + 11 + 11 ms
    alone = simulate(reqs[:2], cfg, RANK, num_replicas=2, router="round_robin")
    assert abs(alone.records.records[0].finish_s - 0.036) < 1e-12
