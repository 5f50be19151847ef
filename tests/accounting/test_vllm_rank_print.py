"""Which vLLM worker prints the available memory and whose pool the tokens line shows (``vllm_rank_print``)."""

from __future__ import annotations

from kvledger.accounting.plan_vllm import printed_gib_block_range
from kvledger.accounting.vllm_rank_print import check_printed_pool, rank_print
from kvledger.units import GiB

# DeepSeek-R1 at TP 8 (MLA is not split across ranks): a block is 16 tokens × 61 layers × (512 + 64) × 2 B
# = 1,124,352 B.
DSR1_BLOCK = 16 * 61 * (512 + 64) * 2


def test_who_prints_by_version():
    # V0 (before 0.8 here): worker.py logs every worker's profile, executor_base.py logs the minimum's blocks.
    assert (rank_print((0, 6, 4)).memory, rank_print((0, 6, 4)).tokens_are_minimum) == ("every worker", True)
    # 0.11.0 gpu_worker.py: logger.info in every worker; kv_cache_utils.py logs each worker's tokens inside
    # get_kv_cache_config_from_groups, before get_kv_cache_configs takes the minimum.
    assert rank_print((0, 11, 0)) == rank_print((0, 10, 1))
    assert (rank_print((0, 11, 0)).memory, rank_print((0, 11, 0)).tokens_are_minimum) == ("every worker", False)
    # 0.11.1–0.19: info_once(scope="local") for the memory; _report_kv_cache_config after the minimum.
    for ver in ((0, 11, 1), (0, 11, 2), (0, 14, 1), (0, 19, 0)):
        assert (rank_print(ver).memory, rank_print(ver).tokens_are_minimum) == ("local rank 0", True)
    # 0.20: the memory line lost its scope (per process: every worker), the tokens still after the minimum.
    assert (rank_print((0, 20, 0)).memory, rank_print((0, 20, 0)).tokens_are_minimum) == ("every worker", True)


def test_dsr1_mi300x_tp8_pool_below_rank_0_is_the_smallest_rank():
    # vme record 5f389286 (vLLM 0.11.2+rhai1, 8 × MI300X): "Available KV cache memory: 87.09 GiB" (local rank 0),
    # "GPU KV cache size: 1,324,304 tokens" = 82,769 blocks (the smallest rank's). 87.085 GiB = 93,506,806,744 B
    # (rounded up) and 87.095 GiB − 1 B = 93,517,544,161 B hold 83,165–83,174 blocks of 1,124,352 B: the pool is 396–405
    # blocks short, so the smallest rank held 93,506,806,744 − 82,770 × 1,124,352 + 1 = 444,191,705 B (0.4137 GiB) to
    # 93,517,544,161 − 82,769 × 1,124,352 = 456,053,473 B (0.4247 GiB) less than rank 0.
    lo, hi = printed_gib_block_range(round(87.09 * GiB), DSR1_BLOCK)
    assert (lo, hi) == (83_165, 83_174)
    chk = check_printed_pool((0, 11, 2), 8, 87.09, 1_324_304 // 16, DSR1_BLOCK, lo, hi)
    assert chk.verdict == "smallest rank"
    assert (chk.spread_low, chk.spread_high) == (444_191_705, 456_053_473)
    assert "local rank 0" in chk.why and "0.11.1–0.19" in chk.why


def test_same_count_is_a_miss_where_the_rule_does_not_allow_it():
    # The same figures on one GPU (the pool is that GPU's own), on 0.11.0 (each worker logs its own tokens), or with a
    # count above the printed rank's range (the minimum cannot exceed rank 0's) are not explained by the rule.
    assert check_printed_pool((0, 11, 2), 1, 87.09, 82_769, DSR1_BLOCK, 83_165, 83_174).verdict == "miss"
    assert check_printed_pool((0, 11, 0), 8, 87.09, 82_769, DSR1_BLOCK, 83_165, 83_174).verdict == "miss"
    assert check_printed_pool((0, 11, 2), 8, 87.09, 83_175, DSR1_BLOCK, 83_165, 83_174).verdict == "miss"
    assert check_printed_pool((0, 11, 2), 8, 87.09, 83_170, DSR1_BLOCK, 83_165, 83_174).verdict == "exact"


def test_llama70b_mi300x_tp4_spread():
    # vme record 88462985 (vLLM 0.13.0+rhai0, 4 × MI300X, Llama-3.3-70B bf16): 137.30 GiB, 1,799,360 tokens = 112,460
    # blocks. A block is 16 × 80 layers × 2 (K, V) × (8 / 4) heads × 128 × 2 B = 1,310,720 B; 137.295–137.305 GiB
    # hold 112,472–112,480 blocks, 12–20 short: the smallest rank held 0.0135–0.0247 GiB less (one 1.25 MiB block
    # either side of 12 × 1.25 MiB = 0.0146 GiB, bounded by the print's ±0.005 GiB).
    block = 16 * 80 * 2 * 2 * 128 * 2
    lo, hi = printed_gib_block_range(round(137.30 * GiB), block)
    assert (lo, hi) == (112_472, 112_480)
    chk = check_printed_pool((0, 13, 0), 4, 137.30, 112_460, block, lo, hi)
    assert chk.verdict == "smallest rank"
    assert round(chk.spread_low / GiB, 4) == 0.0135 and round(chk.spread_high / GiB, 4) == 0.0247
