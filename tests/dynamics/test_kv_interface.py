"""The declared KV-manager contract (engine/kv_interface.py): every manager provides it, and prefix-cache stats are
counted once, in vLLM's names, by ``count_admission`` for all of them."""

from __future__ import annotations

import inspect

import pytest

from kvledger.accounting.kvlayout import AllocGroup, KVLayout
from kvledger.accounting.mamba_prefix_rules import mamba_prefix_rule
from kvledger.dynamics.engine.config import EngineConfig
from kvledger.dynamics.engine.hybrid_kv import HybridKVManager
from kvledger.dynamics.engine.kv_interface import KVManager, PrefixCacheStats
from kvledger.dynamics.engine.kv_manager import PagedKVManager
from kvledger.dynamics.engine.kv_transfer import ReceivedKVManager
from kvledger.dynamics.engine.mamba_prefix import MambaPrefixKVManager
from kvledger.dynamics.engine.radix_cache import RadixKVManager
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.engine.request_state import SimRequest
from kvledger.dynamics.engine.scheduler import Scheduler
from kvledger.dynamics.engine.sglang_scheduler import SGLangScheduler
from kvledger.dynamics.engine.swa_step import StepBlockRule


def _hybrid() -> HybridKVManager:
    # one full and one sliding-window group (window 8), block size 4 (as tests/dynamics/test_hybrid_kv.py)
    layout = KVLayout((AllocGroup("full", 1, 1, 4, 1), AllocGroup("sliding_window", 1, 1, 4, 1, 8)), 1, 4, 0)
    return HybridKVManager(64, StepBlockRule.from_layout(layout, max_model_len=64, inflight_tokens=64))


MANAGERS = {
    "paged": lambda: PagedKVManager(64, 4, enable_caching=True),
    "received": lambda: ReceivedKVManager(64, 4),
    "radix": lambda: RadixKVManager(256, 4),
    "hybrid": _hybrid,
    # one full and one align-mode Mamba state group, block size 4, vLLM 0.33's rule (as test_mamba_prefix.py)
    "mamba": lambda: MambaPrefixKVManager(64, StepBlockRule((("full", 4, 0), ("state", 4, 0)), 64, 64, True, 0,
                                                            state_prefix=mamba_prefix_rule("0.33.0"))),
}


def _protocol_members() -> set[str]:
    names = set(KVManager.__annotations__)
    names |= {n for n, v in vars(KVManager).items() if not n.startswith("_") and (callable(v) or isinstance(v,
        property))}
    return names


@pytest.mark.parametrize("kind", MANAGERS)
def test_every_manager_provides_the_whole_contract(kind):
    kv = MANAGERS[kind]()
    members = _protocol_members()
    assert {"match", "admit", "grow", "free", "usage", "block_size", "supports_stretches", "prefix_stats"} <= members
    missing = sorted(m for m in members if not hasattr(kv, m))
    assert not missing, f"{type(kv).__name__} lacks {missing}"
    for name in ("match", "admit", "grow", "free", "stretch_limit"):
        ours = inspect.signature(getattr(kv, name)).parameters
        declared = list(inspect.signature(getattr(KVManager, name)).parameters)[1:]  # without self
        assert len(ours) == len(declared), (name, list(ours), declared)
    assert isinstance(kv.prefix_stats, PrefixCacheStats)


@pytest.mark.parametrize("kind", ["paged", "radix"])
def test_admissions_count_queries_and_hits_in_vllms_names(kind):
    # block size 4, one 8-token segment shared by both requests, 12-token prompts (8 shared + 4 unique):
    # the first finds nothing (queries 12, hits 0); once it is computed and freed, the second hits the whole
    # segment: 8 tokens (2 full blocks for vLLM; 8 token slots for SGLang's tree), under its num_tokens − 1 = 11 cap.
    kv = MANAGERS[kind]()
    a = SimRequest(0, RequestSpec("a", 0.0, 12, 1, prefix_segments=(7,), segment_tokens=8))
    b = SimRequest(1, RequestSpec("b", 0.0, 12, 1, prefix_segments=(7,), segment_tokens=8))
    handle, hit = kv.match(a)
    assert kv.admit(a, handle, 12 - hit, 12)
    a.num_computed_tokens = 12
    kv.free(a, preempted=False)
    handle, hit = kv.match(b)
    assert hit == 8 and kv.admit(b, handle, 12 - hit, 12)
    assert (b.num_cached_tokens, b.num_computed_tokens) == (8, 8)
    s = kv.prefix_stats
    assert (s.requests, s.queries, s.hits) == (2, 24, 8)
    assert (s.preempted_requests, s.preempted_queries, s.preempted_hits) == (0, 0, 0)


def test_a_readmitted_preempted_request_is_counted_apart():
    # a 10-token prompt decodes 3 tokens (13 computed, 14 known), is preempted and comes back: its own 3 full blocks
    # (12 tokens) hit; vLLM counts that lookup as a preempted one (14 tokens looked up, 12 hit), not a new request.
    kv = PagedKVManager(32, 4, enable_caching=True)
    r = SimRequest(0, RequestSpec("r", 0.0, 10, 5))
    assert kv.admit(r, [], 10, 10)
    r.num_computed_tokens, r.num_generated, r.num_tokens = 13, 4, 14
    assert kv.grow(r, 0)
    r.num_preemptions = 1
    kv.free(r, preempted=True)
    r.num_computed_tokens = 0
    hits, hit = kv.match(r)
    assert hit == 12 and kv.admit(r, hits, 2, 14)
    s = kv.prefix_stats
    assert (s.requests, s.queries, s.hits) == (1, 10, 0)
    assert (s.preempted_requests, s.preempted_queries, s.preempted_hits) == (1, 14, 12)
    assert r.num_cached_tokens == 0 and r.num_computed_tokens == 12  # the first admission's hit is what a record keeps


@pytest.mark.parametrize("batching", ["continuous", "sglang"])
def test_both_schedulers_return_a_scheduler_output(batching):
    # two 6-token prompts under a 16-token budget: both admitted whole in the first step
    cfg = EngineConfig(num_gpu_blocks=32, block_size=4, max_num_batched_tokens=16, max_model_len=64,
                       batching=batching)
    kv = RadixKVManager(31 * 4, 4) if batching == "sglang" else PagedKVManager(32, 4, enable_caching=True)
    sched = (SGLangScheduler if batching == "sglang" else Scheduler)(cfg, kv)
    reqs = [SimRequest(i, RequestSpec(f"r{i}", 0.0, 6, 3)) for i in range(2)]
    sched.waiting.extend(reqs)
    out = sched.schedule()
    assert [(r.uid, n) for r, n in out.scheduled] == [(0, 6), (1, 6)]
    assert out.preempted == [] and out.num_admitted == 2
