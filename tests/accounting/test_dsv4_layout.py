"""DeepSeek-V4's compressed caches and vLLM 0.33's packed block layout, worked by hand on transformers' default config.

Engine code read (vLLM 0.33.0 wheel): ``models/deepseek_v4/attention.py`` (DeepseekV4Attention / DeepseekV4IndexerCache
``get_kv_cache_spec``: fp8_ds_mla entries of 584 B, pages padded to 576 B; indexer keys 128 + 4 = 132 B per 4 tokens),
``models/deepseek_v4/compressor.py`` (CompressorStateCache: float32 state of 2 × coff × head_dim per token slot, blocks
of 4 at ratio 4 and 8 at ratio 128, window coff × ratio), ``v1/attention/backends/mla/sparse_swa.py``
(DeepseekV4SWACache: 64-token blocks), ``models/deepseek_v4/sparse_mla.py`` (kernel block size 256 only),
``v1/core/kv_cache_planning.py`` (``_get_packed_kv_cache_groups``, ``_approximate_gcd``,
``_get_kv_cache_bytes_per_block``) and ``v1/core/kv_cache_utils.py`` (``get_max_concurrency_for_kv_cache_config``).

The default config (transformers 5.24.0 ``DeepseekV4Config``): 43 layers, 20 at compress ratio 4 and 23 at 128,
sliding_window 128, head_dim 512 (qk_rope_head_dim 64), index_head_dim 128.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvledger.accounting.kvcache import kv_ledger
from kvledger.accounting.kvlayout import vllm_layout
from kvledger.accounting.kvlayout_packed import approximate_gcd
from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.modelspec import parse_config
from kvledger.errors import InputError

CONFIG = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "oracle_configs" / "deepseek_v4.json"
AVAIL_30_GIB = 32_212_254_720


@pytest.fixture(scope="module")
def dsv4():
    return parse_config(json.loads(CONFIG.read_text()), source="deepseek_v4 default config")


def test_kv_bytes_per_token_and_per_sequence(dsv4):
    # Beyond the window, per token: ratio 4: 584 / 4 + 132 / 4 = 146 + 33 = 179 B × 20 layers = 3,580 B;
    # ratio 128: 584 / 128 = 4.5625 B × 23 = 104.9375 B; together 3,684.9375 B/token on every TP rank.
    # Fixed per request: the 128-token window, 128 × 584 = 74,752 B, in every layer; the compressor's float32 state
    # over coff × ratio tokens: ratio 4, 2 × 2 × 512 × 4 B = 8,192 B × 8 tokens = 65,536 B, plus the indexer
    # compressor's 2 × 2 × 128 × 4 B = 2,048 B × 8 = 16,384 B; ratio 128, 2 × 1 × 512 × 4 = 4,096 B × 128 = 524,288 B.
    # 20 × (74,752 + 65,536 + 16,384) + 23 × (74,752 + 524,288) = 3,133,440 + 13,777,920 = 16,911,360 B.
    kv = kv_ledger(dsv4, "auto", tp=8)
    assert kv.bytes_per_token == pytest.approx(3_684.9375)
    assert kv.state_bytes_per_seq == 16_911_360
    assert kv.bytes_per_request(8192) == pytest.approx(3_684.9375 * 8192 + 16_911_360)


def test_packed_layout_block_bytes_and_groups(dsv4):
    # Pages (576-B padded): ratio-4 entries 64 × 584 = 37,376 → 37,440; ratio-128 entries 2 × 584 = 1,168 → 1,728;
    # indexer keys 64 × 132 = 8,448 → 8,640; window 64 × 584 → 37,440; ratio-4 compressor 4 × 8,192 = 32,768 →
    # 32,832; ratio-128 compressor 8 × 4,096 → 32,832; indexer compressor 4 × 2,048 = 8,192 → 8,640.
    # Cache types: 256-token MLA {37,440 × 20, 1,728 × 23, 8,640 × 20} (unbalanced: one group); window (128, 64)
    # {37,440 × 43}; ratio-4 compressors (8, 4) {32,832 × 20, 8,640 × 20} (balanced and mixed: at least 20 repeats);
    # ratio-128 compressors (128, 8) {32,832 × 23}. Repeats: the d in [20, 43] padding (43, 20, 23) least is 23
    # (3 + 3 + 0 = 6; 22 pads 24, 24 pads 10). Groups: MLA 1, window cdiv(43, 23) = 2 (22 and 21 layers), ratio-4
    # compressors 1, ratio-128 compressors 1. Widest group: 20 × 37,440 + 23 × 1,728 + 20 × 8,640 = 961,344 B a block.
    assert approximate_gcd([43, 20, 23], 20) == 23
    layout = vllm_layout(dsv4, kv_ledger(dsv4, "auto", tp=8), 256)
    assert layout.bytes_per_block == 961_344
    summary = sorted((g.kind, g.block_size, g.window_tokens, g.num_layers, g.page_bytes) for g in layout.groups)
    assert summary == [("mla", 256, 0, 63, 961_344),
                       ("sliding_window", 4, 8, 40, 829_440),
                       ("sliding_window", 8, 128, 23, 755_136),
                       ("sliding_window", 64, 128, 21, 786_240),
                       ("sliding_window", 64, 128, 22, 823_680)]
    # A request at 8,192 tokens with 2 × 8,192 tokens in flight (vLLM 0.33, async scheduling): MLA cdiv(8192, 256) = 32;
    # each window group cdiv(min(127 + 16,384, 8,192), 64) + 1 = 129; ratio-4 compressors cdiv(8,192, 4) + 1 = 2,049;
    # ratio-128 compressors cdiv(8,192, 8) + 1 = 1,025: 32 + 2 × 129 + 2,049 + 1,025 = 3,364 blocks.
    assert layout.blocks_per_request(8192, 16_384) == 3_364
    # steady state after 8,192 tokens: 32 + 2 × (cdiv(127, 64) + 1 = 3) + (cdiv(7, 4) + 1 = 3) + (cdiv(127, 8) + 1 = 17)
    assert layout.blocks_for_tokens(8192) == 32 + 6 + 3 + 17


def test_plan_blocks_and_printed_capacity(dsv4):
    # 30 GiB given: floor(32,212,254,720 / 961,344) = 33,507 blocks; 33,507 / 3,364 = 9.96x, int(9.9604… × 8,192) =
    # 81,596.
    s = make_settings(tp=8, max_model_len=8192, available_kv_memory_bytes=AVAIL_30_GIB)
    p = build_plan(dsv4, get_gpu("H200"), s, with_roofline=False)
    assert (p.memory.block_size, p.memory.bytes_per_block, p.memory.num_gpu_blocks) == (256, 961_344, 33_507)
    assert p.memory.printed_lines == ("GPU KV cache size: 81,596 tokens, Maximum concurrency for 8,192 tokens per "
                                      "request: 9.96x",)
    assert p.memory.pool_tokens == 81_596  # the figure vLLM 0.33 prints, not (blocks ÷ 5 groups) × 256
    assert any(n.startswith("DeepSeek-V4 reservation per request at 8,192 tokens (16,384 in flight): 32 for compressed")
               for n in p.memory.notes)


@pytest.mark.parametrize("kw, msg", [({"engine_version": "0.19.0"}, "from 0.20"),
                                     ({"block_size": 16}, "blocks of 256 tokens only"),
                                     ({"kv_cache_dtype": "bf16"}, "fp8_ds_mla"),
                                     ({"engine": "sglang"}, "not modelled here"),
                                     ({"disable_hybrid_kv_cache_manager": True}, "not modelled for DeepSeek-V4")])
def test_refusals_name_the_rule(dsv4, kw, msg):
    with pytest.raises(InputError, match=msg):
        build_plan(dsv4, get_gpu("H200"), make_settings(tp=8, max_model_len=8192, **kw), with_roofline=False)


def test_decode_step_reads_the_window_the_top_k_and_every_indexer_key(dsv4):
    # One request decoding at 8,192 tokens of context on TP 8 (8 query heads per GPU; K = V, so a (query, entry) pair
    # costs QK + PV = 4 × 8 × 512 = 16,384 FLOP). Bytes read per GPU:
    #   indexer keys and ratio-128 entries over the whole context: (20 × 33 + 23 × 4.5625) × 8,192
    #     = 764.9375 × 8,192 = 6,266,368 B;
    # the ratio-4 entries the indexer keeps: 20 × 146 B × min(8,192, 4 × index_topk 512) = 2,920 × 2,048 = 5,980,160 B;
    #   every layer's 128-token window: 43 × 584 × 128 = 3,214,336 B;
    #   compressor states read and written: 2 × (16,911,360 − 3,214,336) = 27,394,048 B.
    # FLOPs: indexer scoring 2 × 64 heads × 128 / 4 per token × 20 layers = 81,920 and ratio-128 entries 16,384 / 128
    # × 23 = 2,944 per context token (84,864 × 8,192 = 695,205,888), the window 16,384 × 43 × 128 = 90,177,536 and
    # the top-k 16,384 / 4 × 20 × 2,048 = 167,772,160: 953,155,584 FLOP.
    from kvledger.accounting.roofline import RooflineStepCost
    from kvledger.accounting.stepcost import StepShape

    rc = RooflineStepCost(dsv4, get_gpu("H200"), kv_ledger(dsv4, "auto", tp=8), 8)
    c = rc.costs(StepShape(0, 0, 0, 0, 1, 8192))
    assert c.kv_bytes == pytest.approx(6_266_368 + 5_980_160 + 3_214_336 + 27_394_048)
    assert c.attn_flops == pytest.approx(695_205_888 + 90_177_536 + 167_772_160)


def test_window_only_layers_share_one_group():
    # compress_rates of 0: every layer keeps only its 128-token window (DeepseekV4SWACache, 64-token blocks of
    # 64 × 584 = 37,376 → 37,440 B). One page size and one cache type: vLLM takes the uniform path, one group of all
    # 43 layers, 43 × 37,440 = 1,609,920 B a block; a request at 8,192 tokens (16,384 in flight) needs
    # cdiv(min(127 + 16,384, 8,192), 64) + 1 = 129 blocks.
    cfg = json.loads(CONFIG.read_text())
    cfg["compress_rates"] = {"heavily_compressed_attention": 0, "compressed_sparse_attention": 0}
    m = parse_config(cfg, source="window-only DeepSeek-V4")
    layout = vllm_layout(m, kv_ledger(m, "auto", tp=8), 256)
    assert (layout.bytes_per_block, len(layout.groups), layout.blocks_per_request(8192, 16_384)) == (1_609_920, 1, 129)


@pytest.mark.parametrize("rates, msg", [({"heavily_compressed_attention": -4}, "compress ratio of -4"),
                                        ({"heavily_compressed_attention": 2}, "compress ratio of 2")])
def test_compress_ratios_vllm_cannot_build_are_refused(rates, msg):
    # vLLM 0.33 builds compressors for ratios 4 and 128 only (CompressorStateCache); 0 or 1 is a window-only layer.
    from kvledger.errors import ConfigError

    cfg = json.loads(CONFIG.read_text())
    cfg["compress_rates"] = {**cfg["compress_rates"], **rates}
    with pytest.raises(ConfigError, match=msg):
        parse_config(cfg, source="edited DeepSeek-V4")


def test_a_layer_type_compress_rates_does_not_name_is_window_only_with_a_note():
    # vLLM's get_compress_ratios reads compress_rates.get(layer_type, 0): the 23 heavily_compressed layers become
    # window-only (ratio 1) and the plan says which type was read that way.
    cfg = json.loads(CONFIG.read_text())
    del cfg["compress_rates"]["heavily_compressed_attention"]
    m = parse_config(cfg, source="edited DeepSeek-V4")
    assert (
        sorted({layer.compress_ratio for layer in m.layers}) == [1, 4]
        and sum(layer.compress_ratio == 1 for layer in m.layers) == 23
    )
    assert any("heavily_compressed_attention are not in compress_rates" in n for n in m.notes)
