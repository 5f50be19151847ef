"""KV cache group size by vLLM release (kvlayout.group_size_ratio), read in v1/core/kv_cache_utils.py
``_get_kv_cache_groups_uniform_page_size``: 0.11.0 and 0.11.2 always take the smallest attention type's layer count;
0.12.0 and 0.17.0 take the largest where ``max_num_layers < min_num_layers * 1.25``; 0.18.0 and 0.19.0 where
``< min_num_layers * 1.5``.

Worked on gpt-oss-20b's layers (sliding window 128 first, then full, alternating; 2,048 B per token per layer, so a
16-token page is 32,768 B per layer slot)."""

from __future__ import annotations

import dataclasses

import pytest

from kvledger.accounting.kvcache import kv_ledger
from kvledger.accounting.kvlayout import group_size_ratio, vllm_layout
from kvledger.catalog.models import load_model


def _layout(ver, layers):
    m = load_model("openai/gpt-oss-20b")
    m = dataclasses.replace(m, layers=tuple(layers(m.layers)))
    return vllm_layout(m, kv_ledger(m, "auto", 1), 16, ver=ver)


def test_ratios_by_release():
    assert [group_size_ratio(v) for v in ((0, 10, 2), (0, 11, 2), (0, 12, 0), (0, 17, 0), (0, 18, 0), None)] == \
        [None, None, 1.25, 1.25, 1.5, 1.5]


@pytest.mark.parametrize("ver,bpb,groups,padding", [
    # 5 sliding + 4 full (the first 9 layers): 5 < 4 × 1.25 is false, so up to 0.17 the group size is 4: sliding
    # splits into 2 groups (3 padding slots), full 1; a block 4 × 32,768 = 131,072 B. From 0.18 5 < 4 × 1.5: group
    # size 5, one group each (1 padding slot in full), a block 5 × 32,768 = 163,840 B
    ((0, 11, 0), 131_072, 3, 3), ((0, 12, 0), 131_072, 3, 3), ((0, 17, 0), 131_072, 3, 3),
    ((0, 18, 0), 163_840, 2, 1), ((0, 19, 0), 163_840, 2, 1)])
def test_a_ratio_of_1_25_changes_at_018(ver, bpb, groups, padding):
    lay = _layout(ver, lambda layers: layers[:9])
    assert (lay.bytes_per_block, len(lay.groups), lay.padding_layers) == (bpb, groups, padding)
    # 131,072 tokens with 8,192 in flight: a sliding group 521 blocks, a full one 8,192; three groups 521 × 2 +
    # 8,192 = 9,234, two 521 + 8,192 = 8,713
    assert lay.blocks_per_request(131_072, 8_192) == (9_234 if groups == 3 else 8_713)


@pytest.mark.parametrize("ver,bpb,groups,padding", [
    # 12 sliding + 13 full (gpt-oss-20b with one more full layer, vLLM's own gpt-oss + EAGLE example): before 0.12
    # the group size is 12, so full splits into 2 groups (11 padding slots), a block 12 × 32,768 = 393,216 B; from
    # 0.12 13 < 12 × 1.25: group size 13, 2 groups (1 padding slot), a block 13 × 32,768 = 425,984 B
    ((0, 11, 0), 393_216, 3, 11), ((0, 12, 0), 425_984, 2, 1), ((0, 18, 0), 425_984, 2, 1)])
def test_a_ratio_below_1_25_changes_at_012(ver, bpb, groups, padding):
    lay = _layout(ver, lambda layers: layers + (layers[1],))
    assert (lay.bytes_per_block, len(lay.groups), lay.padding_layers) == (bpb, groups, padding)


@pytest.mark.parametrize("ver", [(0, 11, 0), (0, 12, 0), (0, 17, 0), (0, 18, 0)])
def test_gpt_oss_20b_itself_is_the_same_in_every_release(ver):
    # 12 + 12: min = max, one group of 12 per type in every release, a block 12 × 32,768 = 393,216 B
    lay = _layout(ver, lambda layers: layers)
    assert (lay.bytes_per_block, len(lay.groups), lay.padding_layers) == (393_216, 2, 0)


@pytest.mark.parametrize("version,bpb,groups", [("0.10.2", 1_310_720, 3), ("0.11.0", 1_441_792, 2),
                                                ("0.17.0", 1_441_792, 2), ("0.18.0", 1_441_792, 2)])
def test_a_pipeline_stage_is_grouped_as_the_whole_model_from_011(version, bpb, groups):
    # gemma-2-9b-it, 42 layers alternating sliding (first) and full, 8 KV heads × 256 × 2 (K, V) × 2 B = 8,192 B per
    # token per layer, a 16-token page 131,072 B. At --pp 2 each stage holds 21 layers, 11 sliding + 10 full on the
    # first. 0.10.2 groups each worker's own layers (core.py: get_kv_cache_config per worker) with the smallest count:
    # 10 slots, a block 1,310,720 B, sliding split into 2 groups. From 0.11.0 get_kv_cache_configs groups the merged
    # specs of every worker: 21 + 21, one group per type, and the worker's group size is its largest group, 11: a block
    # 1,441,792 B over 2 groups
    from kvledger.accounting.plan import build_plan
    from kvledger.accounting.settings import make_settings
    from kvledger.catalog.gpus import get_gpu

    p = build_plan(load_model("google/gemma-2-9b-it"), get_gpu("h100"), make_settings(engine_version=version, pp=2),
                   with_roofline=False)
    assert [st["bytes_per_block"] for st in p.memory.stages] == [bpb, bpb] and len(p.layout.groups) == groups
