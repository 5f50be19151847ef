"""A Hypothesis state machine over a whole replica: requests arrive and the engine runs, and the KV state stays
consistent.

Invariants (issue 3): free + used blocks = total; no block both free and referenced; ref
counts equal the number of holders and never go negative; a cached hash points at a block
holding exactly that content; every running request's blocks cover its computed tokens.
"""

from __future__ import annotations

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from kvledger.accounting.stepcost import FixedStepCost
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.engine.request_state import SimRequest
from kvledger.dynamics.replica import Replica
from kvledger.dynamics.simulator import EngineConfig


class ReplicaMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        # 12 blocks of 4 tokens (11 usable) and requests up to 40 tokens: preemptions are frequent
        self.cfg = EngineConfig(num_gpu_blocks=12, block_size=4, max_model_len=40, max_num_batched_tokens=12)
        self.rep = Replica(self.cfg, FixedStepCost(0.01))
        self.uid = 0

    @rule(group=st.integers(0, 2), nseg=st.integers(0, 3), extra=st.integers(1, 9), out=st.integers(1, 12))
    def arrive(self, group, nseg, extra, out):
        spec = RequestSpec(f"r{self.uid}", self.rep.now_s, nseg * 6 + extra, out,
                           tuple(group * 10 + j for j in range(nseg)), 6)
        self.rep.add(SimRequest(self.uid, spec))
        self.uid += 1

    @rule(gap=st.sampled_from([0.0, 0.015, 0.1, float("inf")]))
    def run(self, gap):
        if self.rep.has_work:
            self.rep.run_unit(self.rep.now_s + gap if gap else self.rep.now_s + 1e-9)

    @invariant()
    def blocks_add_up(self):
        pool, running = self.rep.kv.pool, self.rep.sched.running
        free = pool.free_block_ids()
        held = [b for r in running for b in r.blocks]
        assert len(free) + len(set(held)) == pool.num_usable_blocks
        assert not set(free) & set(held) and 0 not in free
        for b in set(held) | set(free):
            assert pool.ref_cnt(b) == held.count(b) >= 0
        assert all(not r.blocks for r in self.rep.sched.waiting)

    @invariant()
    def running_blocks_cover_computed_tokens_and_cached_keys_match_content(self):
        kv = self.rep.kv
        for r in self.rep.sched.running:
            assert len(r.blocks) * 4 >= r.num_computed_tokens
            for i, b in enumerate(r.blocks):
                if i < r.num_registered:
                    assert kv.pool.key_of(b) == kv._key(r, i)  # the hash names what this block holds
                else:
                    assert not kv.pool.is_cached(b)
        for b in range(1, kv.pool.num_gpu_blocks):
            key = kv.pool.key_of(b)
            assert key is None or b in kv.pool.blocks_with_key(key)


ReplicaMachine.TestCase.settings = settings(max_examples=40, stateful_step_count=60, deadline=None)
TestReplicaMachine = ReplicaMachine.TestCase


class V0ReplicaMachine(ReplicaMachine):
    """The same invariants under vLLM V0's prefill-first rule (all 12 blocks usable, watermark 0)."""

    def __init__(self) -> None:
        super().__init__()
        self.cfg = EngineConfig(num_gpu_blocks=12, block_size=4, max_model_len=40, max_num_batched_tokens=40,
                                batching="vllm_v0", enable_chunked_prefill=False, enable_prefix_caching=False)
        self.rep = Replica(self.cfg, FixedStepCost(0.01))


V0ReplicaMachine.TestCase.settings = settings(max_examples=30, stateful_step_count=60, deadline=None)
TestV0ReplicaMachine = V0ReplicaMachine.TestCase
