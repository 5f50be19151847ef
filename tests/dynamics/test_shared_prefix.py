"""``--shared-prefix-tokens N`` as shared prefix segments (dynamics/workload/shared_prefix.py): exact block-level reuse
in vLLM's hash cache, a prompt shorter than N left unshared, and a workload with its own prefix ids refused."""

from __future__ import annotations

import pytest

from kvledger.dynamics.engine.kv_manager import PagedKVManager
from kvledger.dynamics.engine.prefix_keys import shareable_block_keys
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.engine.request_state import SimRequest
from kvledger.dynamics.workload.shared_prefix import SHARED_PREFIX_ID, with_shared_prefix
from kvledger.errors import InputError


def _specs(*prompts: int) -> list[RequestSpec]:
    return [RequestSpec(f"r{i}", 10.0 * i, p, 10) for i, p in enumerate(prompts)]


def test_a_long_prompt_carries_one_segment_of_n_tokens_and_a_short_one_none():
    a, b, c = with_shared_prefix(_specs(3000, 1000, 2000), 2000, "t")
    # 3,000 ≥ 2,000 and 2,000 ≥ 2,000: one segment of 2,000 tokens, all of it inside the prompt → 2,000 shareable
    assert (a.prefix_segments, a.segment_tokens, a.num_shareable_tokens) == ((SHARED_PREFIX_ID,), 2000, 2000)
    assert (c.prefix_segments, c.num_shareable_tokens) == ((SHARED_PREFIX_ID,), 2000)
    # 1,000 < 2,000: unshared (the rule chosen), lengths unchanged
    assert (b.prefix_segments, b.num_prompt_tokens, b.num_shareable_tokens) == ((), 1000, 0)
    assert [s.num_prompt_tokens for s in (a, b, c)] == [3000, 1000, 2000]


@pytest.mark.parametrize(("n", "blocks"), [(2000, 125), (1999, 124), (2010, 125)])
def test_vllm_shares_exactly_the_full_blocks_of_the_prefix(n, blocks):
    # B = 16: ⌊2000/16⌋ = 125 (2,000 tokens), ⌊1999/16⌋ = 124 (1,984 tokens), ⌊2010/16⌋ = 125 (2,000 tokens)
    first, later = (SimRequest(i, s) for i, s in enumerate(with_shared_prefix(_specs(3000, 3000), n, "t")))
    assert len(shareable_block_keys(first.spec, 16)) == blocks
    kv = PagedKVManager(1000, 16, enable_caching=True)
    hits, _ = kv.match(first)
    assert kv.admit(first, hits, first.num_tokens, first.num_tokens)
    first.num_computed_tokens = first.num_tokens
    kv.free(first, preempted=False)
    assert kv.match(later)[1] == blocks * 16


def test_a_short_prompt_hits_nothing_and_leaves_the_long_ones_sharing():
    # 3,000 then 1,000 then 3,000 under a 2,000-token prefix, B = 16: the 1,000-token prompt is unshared (0 hit
    # tokens), the third hits the first's 125 blocks = 2,000 tokens
    long1, short, long2 = (SimRequest(i, s) for i, s in enumerate(with_shared_prefix(_specs(3000, 1000, 3000), 2000,
                                                                                     "t")))
    kv = PagedKVManager(1000, 16, enable_caching=True)
    for r in (long1, short):
        hits, got = kv.match(r)
        if r is short:
            assert got == 0
        assert kv.admit(r, hits, r.num_tokens, r.num_tokens)
        r.num_computed_tokens = r.num_tokens
        kv.free(r, preempted=False)
    assert kv.match(long2)[1] == 2000


def test_prefix_ids_already_there_and_bad_sizes_are_refused():
    hashed = [RequestSpec("m", 0.0, 1024, 5, prefix_segments=(7, 8), segment_tokens=512)]
    with pytest.raises(InputError, match="mooncake.*already names which prompts share"):
        with_shared_prefix(hashed, 2000, "mooncake")
    for bad in (0, -3, 1.5, True):
        with pytest.raises(InputError, match="whole number of tokens ≥ 1"):
            with_shared_prefix(_specs(3000), bad, "t")
