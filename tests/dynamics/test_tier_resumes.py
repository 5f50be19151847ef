"""Resumes after preemption under LMCache's chunks (vLLM) and SGLang HiCache (retraction), worked by hand.

Rules read: LMCache 0.5.6 ``integration/vllm/vllm_v1_adapter.py`` (``get_num_new_matched_tokens`` looks
``request.all_token_ids`` up; ``ReqMeta.from_request_tracker`` saves whole prompt chunks, ``save_decode_cache`` off) and
``integration/vllm/lmcache_mp_connector.py`` (``<resume-load>``; ``GetStoreMetadata`` caps at the prompt); SGLang
0.5.23 ``managers/schedule_batch.py : release_req`` (``release_kv_cache(checkpoint=False)`` on retraction),
``mem_cache/common.py : checkpoint_kv_cache`` (after each prefill chunk) and ``Req.init_next_round_input`` (a
retracted request is matched as any other). vLLM's own host tier: tests/dynamics/test_resume_reload.py.
"""

from __future__ import annotations

import pytest

from kvledger.accounting.stepcost import FixedStepCost
from kvledger.dynamics.engine.config import EngineConfig
from kvledger.dynamics.engine.offload import HostTier
from kvledger.dynamics.engine.request import RequestSpec
from kvledger.dynamics.offload_sim import simulate_offload
from kvledger.dynamics.resume_stats import ResumeStats
from kvledger.jsonable import to_jsonable

BPT = 131072  # KV bytes per token; the host link reads 51.2 GB/s: 8 tokens load in 8 × 131,072 / 51.2e9 = 20.48 µs
COST = FixedStepCost(0.01, 1e-5)  # 10 ms + 10 µs per computed token
VLLM = EngineConfig(num_gpu_blocks=9, block_size=4, max_model_len=32, max_num_batched_tokens=64,
                    async_scheduling=False)


def _rec(result, rid: str):
    return next(r for r in result.records.records if r.request_id == rid)


def _lmcache(in_step: bool) -> HostTier:
    # 8-token chunks (2 blocks of 4); 100 chunks: nothing evicted. in_step: LMCacheConnectorV1 (vLLM before 0.33),
    # else LMCacheMPConnector's asynchronous load (0.33)
    return HostTier(100, BPT, 51.2e9, 51.2e9, chunk_tokens=8, load_in_step=in_step)


@pytest.mark.parametrize("in_step", [False, True])
def test_lmcache_reloads_a_resumed_requests_prompt_chunk_once_hbm_lost_it(in_step):
    # As test_resume_reload.py (A, B: 8 prompt tokens each at t = 0; 4-token blocks, 8 usable), but A generates 24
    # tokens. B (16 output) is preempted at step 10 with 16 computed tokens (num_tokens 17); its freed blocks go to
    # the free queue tail first [B3, B2, B1, B0], and A takes B3 at step 10, B2 at 14 (21 tokens), B1 at 18 (25), B0
    # at 22 (29): HBM keeps none of B. A finishes at step 24 (31 computed), B resumes at step 25 with 17 tokens.
    # LMCache saved each prompt's one whole chunk (8 tokens) at its prefill and nothing after (decode not saved).
    # The resume's lookup (all 17 tokens, whole chunks from 0): chunk 0 (B's prompt) hits, chunk 1 (tokens 8–15,
    # generated) was never saved: 8 tokens beyond the HBM hit of 0 load; 17 − 8 = 9 recomputed.
    # (At B's first attempts, while A runs, HBM still had B0–B2 (12 tokens ≥ the chunk's 8): nothing to load then,
    # but the chunk was found, so LMCache is asked again at each attempt and loads once HBM lost it.)
    run = simulate_offload([RequestSpec("A", 0.0, 8, 24), RequestSpec("B", 0.0, 8, 16)], VLLM, COST,
                           _lmcache(in_step), record_steps=True)
    t = run.tiers
    assert run.with_offload.summary.num_preemptions == 1
    assert t.resume == ResumeStats(1, 17, 0, 8, 9, 0)
    # first arrivals: no hit anywhere; the reload's bytes and time are the tier's
    assert (t.prompt_tokens, t.hbm_hit_tokens, t.host_hit_tokens, t.stored_units) == (16, 0, 0, 2)
    assert t.loaded_bytes == 8 * BPT and t.host_load_s == pytest.approx(8 * BPT / 51.2e9)
    # the recompute saved: B's resume step computes 9 tokens, not 17 (10.09 ms, not 10.17 ms); the load (20.48 µs)
    # is on that step (in-step) or before it (asynchronous): B ends 8 × 10 µs − 20.48 µs = 59.52 µs sooner
    assert _rec(run.without_offload, "B").finish_s - _rec(run.with_offload, "B").finish_s == pytest.approx(59.52e-6)
    resumed = [d for d in run.with_offload.steps[0].dicts() if d["batch"] == [["B", 9]]]
    assert len(resumed) == 1 and resumed[0]["start_s"] == pytest.approx(0.24047 + (0 if in_step else 20.48e-6))


def test_lmcache_finds_nothing_beyond_hbm_when_hbm_keeps_the_prompt():
    # test_resume_reload.py's run (A generates 16): at B's resume HBM still holds B0, B1 (its 8-token prompt), which
    # cover LMCache's one chunk: 8 from HBM, nothing loads, 17 − 8 = 9 recomputed (as without the tier)
    run = simulate_offload([RequestSpec("A", 0.0, 8, 16), RequestSpec("B", 0.0, 8, 16)], VLLM, COST, _lmcache(False))
    assert run.tiers.resume == ResumeStats(1, 17, 8, 0, 9, 0)
    assert run.tiers.loaded_bytes == 0


@pytest.mark.parametrize("in_step, stored, evicted", [(False, 6, 5), (True, 4, 3)])
def test_lmcache_saves_on_resume_under_mp_not_under_connector_v1(in_step, stored, evicted):
    # 12 usable 4-token blocks; A, B: 16 prompt + 16 output at t = 0; LMCache holds 1 chunk of 8 tokens.
    # Step 1 computes both prompts (4 blocks each, 4 free); each prompt's 2 whole chunks are saved in turn, A c0, A c1,
    # B c0, B c1: the one-chunk tier keeps B c1 (4 stored, 3 evicted). Step k ≥ 2 computes token 15 + k of each:
    # a 5th block each at step 2, a 6th at step 6 (12 used); at step 10 A needs a 7th: B is preempted with 24
    # computed, 9 generated (num_tokens 25), its blocks freed tail first [B5 … B0]; A takes B5, then B4 at step 14,
    # and finishes after step 16 (31 computed, 8 blocks). B resumes with 25 tokens: HBM has B0–B3 (16, its prompt);
    # LMCache's lookup from chunk 0 misses (B c0 was evicted): nothing loads, 25 − 16 = 9 recomputed.
    # Its re-prefill: LMCacheMPConnector (0.33) saves the prompt's chunks from its LMCache hit (0) on, B c0 and B c1
    # again, each evicting the one before (6 stored, 5 evicted); LMCacheConnectorV1's tracker is still in decode
    # phase (B had decoded), so it saves nothing (4 stored, 3 evicted).
    cfg = EngineConfig(num_gpu_blocks=13, block_size=4, max_model_len=40, max_num_batched_tokens=64,
                       async_scheduling=False)
    host = HostTier(1, BPT, 51.2e9, 51.2e9, chunk_tokens=8, load_in_step=in_step)
    t = simulate_offload([RequestSpec("A", 0.0, 16, 16), RequestSpec("B", 0.0, 16, 16)], cfg, COST, host).tiers
    assert t.resume == ResumeStats(1, 25, 16, 0, 9, 0)
    assert (t.stored_units, t.evicted_units) == (stored, evicted)


def test_the_vllm_host_tiers_resume_is_unchanged():
    # vLLM's native connector (test_resume_reload.py): 0.19.0 reloads B2, B3 (8 tokens), 0.23.0 stores the prompt
    # only, which HBM has; no lower tier, so no lower_reloaded_tokens key
    reqs = [RequestSpec("A", 0.0, 8, 16), RequestSpec("B", 0.0, 8, 16)]
    old = simulate_offload(reqs, VLLM, COST, HostTier(100, BPT, 51.2e9, 51.2e9)).tiers.resume
    new = simulate_offload(reqs, VLLM, COST, HostTier(100, BPT, 51.2e9, 51.2e9, prompt_only=True)).tiers.resume
    assert (old, new) == (ResumeStats(1, 17, 8, 8, 1, 0), ResumeStats(1, 17, 8, 0, 9, 0))
    assert old.lower_reloaded_tokens is None and "lower_reloaded_tokens" not in to_jsonable(old)


# SGLang: a 84-slot token pool (page 1), prompts of one 16-token segment each, ratio admission (ignore_eos off),
# steps of 10 ms flat.
SGLANG = EngineConfig(num_gpu_blocks=85, max_model_len=100, block_size=1, max_num_batched_tokens=256, max_num_seqs=8,
                      prefix_caching_policy="sglang", batching="sglang", ignore_eos=False)
STEP = FixedStepCost(per_step_s=0.010)
HICACHE = HostTier(100, BPT, 51.2e9, 51.2e9)  # write_through, 100 segments


def _sglang_reqs(*extra: RequestSpec) -> list[RequestSpec]:
    return [RequestSpec("A", 0.0, 16, 30, (1,), 16), RequestSpec("B", 0.03, 16, 30, (2,), 16), *extra]


def test_sglang_retraction_keeps_the_checkpointed_prompt_and_recomputes_the_decoded_tokens():
    # A = 16 + 30 at 0 is prefilled at step 0 and decodes; B = 16 + 30 arrives at 30 ms and is admitted at step 3
    # (the ratio under-reserves A's remaining tokens, test_sglang_scheduler.py's scenario). The prefill checkpoints
    # each prompt into the tree (write_through backs the segment up to host). Through step 28 both decode: A holds
    # 16 + 27 = 43 slots, B 16 + 25 = 41, the pool's 84. Step 29 needs 2 more: B (fewer outputs: 26 vs 28) is
    # retracted with 41 computed, 26 generated (num_tokens 42). release_kv_cache(checkpoint=False): the tree keeps its
    # 16 prompt tokens, its 25 decoded slots are freed. A finishes at step 30; B resumes at step 31 with 42 tokens:
    # 16 from HBM (its prompt segment, still in the tree), 42 − 16 = 26 recomputed, nothing from host (the host's
    # copy lies inside the device prefix). (Before: the tree kept all 41, and 1 was recomputed.)
    run = simulate_offload(_sglang_reqs(), SGLANG, STEP, HICACHE, fast_forward=False)
    assert run.with_offload.summary.num_preemptions == 1 and _rec(run.with_offload, "B").num_preemptions == 1
    assert run.tiers.resume == ResumeStats(1, 42, 16, 0, 26, 0)


def test_hicache_loads_a_retracted_requests_prompt_back_from_host():
    # As above, with C = 60 + 4 arriving at 50 ms: it waits (its 60 + 4 do not fit beside A and B), B's retraction
    # at step 29 puts B behind it. A finishes at step 30 (16 + 29 = 45 computed, into the tree). Step 31 admits C:
    # 84 − 45 − 16 = 23 slots free, 37 more needed: the least recently used leaves go, B's prompt segment (unlocked at
    # step 29) then A's 29-token tail (unlocked at step 30). C decodes to step 34; B resumes at step 35 with 42
    # tokens: HBM holds none of them, host holds its segment (backed up at step 3): 16 tokens ≥ load_back_threshold
    # 10 load back (16 × 131,072 B, 40.96 µs at 51.2 GB/s), 42 − 16 = 26 recomputed. Without the tier: 42 recomputed.
    run = simulate_offload(_sglang_reqs(RequestSpec("C", 0.05, 60, 4, (3,), 16)), SGLANG, STEP, HICACHE,
                           fast_forward=False)
    t = run.tiers
    assert run.with_offload.summary.num_preemptions == 1
    assert t.resume == ResumeStats(1, 42, 0, 16, 26, 0)
    # first arrivals found nothing on host (the resume's load-back counts apart); 3 segments stored
    assert (t.host_hit_tokens, t.host_hit_rate, t.stored_units) == (0, 0.0, 3)
    assert t.loaded_bytes == 16 * BPT and t.host_load_s == pytest.approx(16 * BPT / 51.2e9)
    base = run.without_offload
    assert base.summary.num_preemptions == 1 and _rec(base, "B").num_preemptions == 1


def test_the_resume_line_names_each_engines_rule_and_the_lower_tiers():
    from kvledger.report.sim_tiers_view import resume_line

    # the HiCache run above: 42 tokens back, 16 loaded back from host, 26 recomputed
    line = resume_line(ResumeStats(1, 42, 0, 16, 26, 0), "sglang")
    assert line.startswith("on resume after preemption (1 resumes, 42 tokens of prompt + generated KV): 0 found in "
                           "HBM's prefix cache, 16 reloaded from the host tier, 26 recomputed (SGLang matches a "
                           "retracted request again in its radix tree, which kept what its prefill computed, and the "
                           "host tier;")
    # LMCache with a disk tier: 17 = 0 + 8 host + 4 from disk + 5 recomputed
    line = resume_line(ResumeStats(1, 17, 0, 8, 5, 0, 4))
    assert "8 reloaded from the host tier, 4 from the tiers below it (disk, remote), 5 recomputed (vLLM looks" in line
    with pytest.raises(RuntimeError, match="resume accounting"):
        ResumeStats(1, 17, 0, 8, 9, 0, 4)  # 0 + 8 + 9 + 4 ≠ 17
