"""SGLang and TensorRT-LLM pools, worked by hand from their rules (docs/engine-model.md §3, §4)."""

from __future__ import annotations

import pytest

from kvledger.accounting import notes as N
from kvledger.accounting.memory import sglang_mem_fraction_static
from kvledger.accounting.plan import build_plan
from kvledger.accounting.plan_other import trtllm_bytes_per_token
from kvledger.accounting.settings import make_settings
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model

H100 = get_gpu("h100")
LLAMA8 = load_model("meta-llama/Llama-3.1-8B")


def test_sglang_default_fraction_and_token_pool_on_h100():
    # reserved = 512 + 1.5 × 8,192 (chunked_prefill_size) + (1/8) × 1,024 + 2 × 256 (cuda graph bs) = 13,440 MiB
    # (above the 10 GiB floor); fraction = round((81,559 − 13,440) / 81,559, 3) = round(0.83521, 3) = 0.835.
    frac, _ = sglang_mem_fraction_static(81_559, 1, 8192, 256)
    assert frac == 0.835
    # a plan adds the prefill CUDA graphs, on by default (sglang_prefill_graphs.py): 58 sizes up to 8,192 × 8 MiB
    # = 464 MiB; 13,904 MiB → round(67,655 / 81,559, 3) = round(0.82952, 3) = 0.83.
    p = build_plan(LLAMA8, H100, make_settings(engine="sglang"), with_roofline=False)
    # free before load = 81,090 MiB − 0.42 GiB held before the weights (no custom all-reduce at TP 1,
    # sglang_rules.SGLANG_PRELOAD_GIB) = 85,029,027,840 − 450,971,566.08 = 84,578,056,273.92 B;
    # available = 84,578,056,273.92 × 0.83 − 16,060,522,496 (weights) − 67,108,864 (float32 RoPE buffer,
    # 131,072 × 128 × 4 B) − 1,564,672 (segment tails: 65 norms of 8,192 B in one 2 MiB small segment)
    # − 69,793,218.56 (0.065 GiB measured rest of the load, sglang_rules.SGLANG_LOAD_EXTRA_GIB) = 54,000,797,456 B;
    # #tokens = floor(54,000,797,456 / 131,072) = 411,993; K = V = 411,993 × 65,536 B = 25.15 GiB (SGLang says "GB").
    assert (p.memory.fraction, p.memory.available_kv_bytes, p.memory.pool_tokens) == (0.83, 54_000_797_456, 411_993)
    # and the scheduler's start-up line: max_running_requests = min(clamp(411,993 / 131,072 × 512 = 1,609, 2,048,
    # 4,096), 411,993 // 2) = 2,048
    assert p.memory.printed_lines == ("KV Cache is allocated. #tokens: 411993, K size: 25.15 GB, V size: 25.15 GB",
                                      "max_total_num_tokens=411993, chunked_prefill_size=8192, max_prefill_tokens="
                                      "16384, max_running_requests=2048, context_len=131072, available_gpu_mem=… GB")
    # Page size 1: an 8,192-token request needs 8,192 slots → floor(411,993 / 8,192) = 50 whole requests.
    assert p.row_at(8192).max_requests == 50


def test_trtllm_pool_on_h100():
    # free after the dry run = 85,029,027,840 − 16,060,522,496 (weights) − 939,524,096 (8,192 tokens × (2·4,096 +
    # 48·128 + 3·14,336) × 2 B) − 139,586,437 − 47,513,600 (the CUDA-graph pool of the default largest graph, 128:
    # 128 × 57,344 × 2 B activations + 128 × 128,256 × 2 B logits) − 923,417,968.64 (the fitted 0.86 GiB,
    # trtllm_terms.TRTLLM_EXTRA_GIB) = 66,918,463,242.36 B; × 0.9 = 60,226,616,918 B; ÷ 131,072 B/token = 459,492
    # tokens; // 32 = 14,359 blocks; an 8K request is 256 blocks → 14,359 / 256 = 56.09x.
    p = build_plan(LLAMA8, H100, make_settings(engine="trtllm"), with_roofline=False)
    assert (p.memory.available_kv_bytes, p.memory.pool_tokens, p.memory.num_gpu_blocks) == (60_226_616_918, 459_492,
        14_359)
    assert round(p.row_at(8192).max_concurrency, 2) == 56.09
    # range: the transferred terms at their ends (transferred_ranges.py): weights × (1 + 0.25%) = 16,100,673,802.24,
    # forward × 1.11 = 1,042,871,746.56, non-torch 0.25 GiB = 268,435,456 (sum 17,411,981,004.80); low end =
    # (85,023,784,960 (H100's lowest CUDA total) − 17,411,981,004.80 − 71,270,400 (1.5 × the graph pool) −
    # 1,460,288,880.64 (the fitted term's 1.36 GiB high)) × 0.9 = 59,472,220,207.10 B → 453,737 tokens → 14,179 blocks;
    # high end: weights × (1 − 0.1%) = 16,044,461,973.50, forward × 0.9 = 845,571,686.40, non-torch 0.03 GiB =
    # 32,212,254.72 (sum 16,922,245,914.62); (85,060,485,120 − 16,922,245,914.62 − 32,833,536 (the logits alone) −
    # 386,547,056.64 (0.36 GiB)) × 0.9 = 60,946,972,751.46 B → 464,988 tokens → 14,530 blocks; at max_model_len
    # 131,072 (4,096 blocks a request) 14,179 / 4,096 to 14,530 / 4,096.
    r = p.memory.ranges
    assert r["available_kv_bytes"] == pytest.approx((59_472_220_207.10, 60_946_972_751.46))
    assert (r["num_gpu_blocks"], r["pool_tokens"]) == ((14_179, 14_530), (453_737, 464_988))
    assert r["max_concurrency"] == pytest.approx((14_179 / 4096, 14_530 / 4096))
    # the reserve follows: 0.1 × the free memory at each end (6,608,024,467.46 to 6,771,885,861.27 B)
    reserve = p.memory.deductions[-1]
    assert (reserve.low_bytes, reserve.high_bytes) == pytest.approx((6_608_024_467.46, 6_771_885_861.27))


def test_trtllm_tensorrt_engine_terms_and_given_memory_range():
    # The TensorRT-engine executor (0.19.0) deducts the engine's activations, its runtime buffers, its decoder (both
    # sized from the code, accounting/trtllm_engine_buffers.py) and the fitted uncounted rest (0.773 GiB), no fitted
    # 3.52 GiB any more. Given the printed KV memory (16.05 GiB, TR03
    # https://github.com/NVIDIA/TensorRT-LLM/issues/4275#issuecomment-2941155249) the range is its print's ± 0.005 GiB:
    # 16.045–16.055 GiB; Llama-3.1-8B bf16 KV 131,072 B/token → floor(16.045 × 8,192) = 131,440 to 131,522 tokens →
    # ceil(/64) = 2,054 to 2,056 blocks.
    p = build_plan(LLAMA8, H100, make_settings(engine="trtllm", engine_version="0.19.0",
                                               available_kv_memory_bytes=int(16.05 * 2**30)), with_roofline=False)
    names = [d.name for d in p.memory.deductions]
    assert names[2].startswith("executor runtime buffers") and names[3].startswith("decoder buffers")
    assert names[4] == "CUDA context and memory no executor counter prints (fitted)"
    assert not any("non-torch" in n or "beyond the engine" in n for n in names)
    assert p.memory.deductions[4].bytes == pytest.approx(0.773 * 2**30)
    assert p.memory.ranges["available_kv_bytes"] == pytest.approx((16.045 * 2**30, 16.055 * 2**30))
    assert p.memory.ranges["pool_tokens"] == (131_440, 131_522) and p.memory.ranges["num_gpu_blocks"] == (2_054, 2_056)


def test_trtllm_per_token_estimate_divides_heads_without_rounding_up():
    # get_cache_size_per_token: 80 layers × 2 × ((128 × 8) // 16) × 2 B = 20,480 B at TP 16 — half a head per GPU,
    # where vLLM keeps one whole head per GPU (40,960 B).
    assert trtllm_bytes_per_token(load_model("meta-llama/Llama-3.1-70B"), 16, 2) == 20_480


def test_sglang_gives_sliding_layers_their_own_pool():
    # gpt-oss-20b: 12 sliding (W = 128) + 12 full layers, 8 KV heads × 64 × 2 (K, V) × 2 B = 2,048 B per layer-token,
    # so 24,576 B per token in each kind. SGLang (pool_configurator.py::HybridSWAPoolConfigurator): one full-pool token
    # costs 24,576 + 0.8 × 24,576 = 44,236.8 B; 40 GiB = 42,949,672,960 B → 970,903 full tokens, int(0.8 × 970,903)
    # = 776,722 SWA tokens. Sized as full attention it would be 42,949,672,960 // 49,152 = 873,813 tokens.
    p = build_plan(load_model("openai/gpt-oss-20b"), H100, make_settings(engine="sglang",
                                                                         available_kv_memory_bytes=40 * 2**30,
                                                                         max_model_len=8192), with_roofline=False)
    assert p.memory.pool_tokens == 970_903
    assert (
        p.memory.printed_lines[0] == "Use sliding window memory pool. full_layer_tokens=970903, swa_layer_tokens=776722"
    )


def test_sglang_mamba_state_slots_come_first():
    # Jamba-v0.1 at TP 4: the ledger's state is 2,179,072 B per request over 28 Mamba layers; 4 attention layers hold
    # 4,096 B per token. SGLang (_handle_max_mamba_cache): budget = 40 GiB × 0.9 / 1.9 = 20,344,581,928.4 B;
    # K = (budget − s) // s = 9,335 slots; (K + 1) × s = 20,343,816,192 B; the rest 22,605,856,768 B // 4,096 =
    # 5,519,008 tokens.
    p = build_plan(load_model("ai21labs/Jamba-v0.1"), get_gpu("H200"),
                   make_settings(engine="sglang", tp=4, available_kv_memory_bytes=40 * 2**30, max_model_len=8192),
                       with_roofline=False)
    assert p.kv.state_bytes_per_seq == 2_179_072
    assert p.memory.deductions[-1].bytes == 9_336 * 2_179_072 and p.memory.available_kv_bytes == 22_605_856_768
    assert p.memory.pool_tokens == 5_519_008
    # max_running_requests (resolve_max_num_reqs, SGLang 0.5.23): clamp(5,519,008 / 8,192 × 512, 2,048, 4,096) = 4,096,
    # then capped by the state pool: JambaForCausalLM is in neither hybrid-Mamba radix list, so 3 slots per request:
    # 9,335 // 3 = 3,111.
    assert p.memory.max_num_seqs == 3_111


def test_sglang_qwen3_next_running_requests_capped_at_five_state_slots_each():
    # Qwen3-Next at TP 4: 36 Gated DeltaNet layers of (3 × 8,192 conv + 32 × 128 × 128 SSM) × 2 B / 4 = 274,432 B each,
    # 9,879,552 B per request. 30 GiB of KV memory: budget 32,212,254,720 × 0.9 / 1.9 = 15,258,436,446.3 B;
    # K = (budget − 9,879,552) // 9,879,552 = 1,543 slots. Qwen3NextForCausalLM is in both of SGLang 0.5.23's lists, so
    # the 'auto' strategy is extra_buffer (overlap on, triton backend): 3 + 2 tracking slots; cap 1,543 // 5 = 308,
    # below
    # clamp(#tokens / 8,192 × 512, 2,048, 4,096).
    p = build_plan(load_model("Qwen/Qwen3-Next-80B-A3B-Thinking"), H100,
                   make_settings(engine="sglang", tp=4, available_kv_memory_bytes=30 * 2**30, max_model_len=8192),
                   with_roofline=False)
    assert p.kv.state_bytes_per_seq == 9_879_552
    assert p.memory.max_num_seqs == 308
    assert any(n.startswith("max_running_requests capped to 308 by the Mamba state pool: 1,543 slots // 5")
               for n in p.memory.notes)


def test_trtllm_pools_per_window_round_up():
    # gpt-oss-20b, max_seq_len 8,192, 10 GiB of KV memory, 32 tokens per block. Windows 128 and 8,192, 24,576 B per
    # token each: shares 128/8,320 and 8,192/8,320 (kvCacheManager.cpp::calculateWindowSizeToShare weighs bytes ×
    # window). 10,737,418,240 / 24,576 = 436,906.67 tokens' worth: × 128/8,320 → 6,721 tokens → ceil(6,721 / 32) = 211
    # blocks (floor would be 210); × 8,192/8,320 → 430,185 tokens → ceil(430,185 / 32) = 13,444 blocks (floor 13,443).
    p = build_plan(load_model("openai/gpt-oss-20b"), H100, make_settings(engine="trtllm",
                                                                         available_kv_memory_bytes=10 * 2**30,
                                                                         max_model_len=8192), with_roofline=False)
    assert (p.memory.pool_tokens, p.memory.num_gpu_blocks, p.memory.bytes_per_block) == (430_185, 13_444, 32 * 24_576)
    assert any("window 128: 6,721 tokens, 211 blocks" in n for n in p.memory.notes)


def test_trtllm_one_window_floors():
    # Llama-3.1-8B, one window: 131,072 B per token; 2,804,940,800 B → 21,400 tokens → 21,400 // 32 = 668 blocks
    # (668.75):
    # the Python path (resource_manager.py::calculate_max_num_blocks) floors, the C++ multi-window path would give 669.
    p = build_plan(LLAMA8, H100, make_settings(engine="trtllm", available_kv_memory_bytes=21_400 * 131_072),
                   with_roofline=False)
    assert (p.memory.pool_tokens, p.memory.num_gpu_blocks) == (21_400, 668)


def test_trtllm_tensorrt_engine_executor_rounds_blocks_up():
    # TensorRT-LLM's own log (NVIDIA/TensorRT-LLM issue #2268, engine 0.13, Qwen1.5-7B fp16, C++ executor):
    #   "Memory usage when calculating max tokens in paged kv cache: total: 39.39 GiB, available: 21.89 GiB"
    #   "Number of blocks in KV cache primary pool: 631"
    # kvCacheManager.cpp KVCacheManager::calculateMaxNumBlocks: maxTokens = int(0.9 × available / bytes per token),
    # blocks = ceilDiv(maxTokens, tokens_per_block). Qwen1.5-7B and Llama-2-7B both keep 32 layers × 2 × 32 KV heads
    # × 128 × 2 B = 524,288 B per token. "21.89 GiB" is any figure in [21.885, 21.895) GiB: maxTokens in
    # [40,339, 40,357]; with 64 tokens per block that is 630.3–630.6 blocks, so ceil gives 631 (the log) and floor 630.
    llama2 = load_model("meta-llama/Llama-2-7b-hf")
    for avail_gib in (21.885, 21.89, 21.8949):
        kv_mem = int(0.9 * avail_gib * 2**30)
        p = build_plan(llama2, H100, make_settings(engine="trtllm", engine_version="0.13.0",
                                                   available_kv_memory_bytes=kv_mem,
                                                   max_model_len=4096), with_roofline=False)
        assert p.memory.block_size == 64 and p.memory.num_gpu_blocks == 631
        assert kv_mem // 524_288 // 64 == 630  # what the PyTorch backend's floor would give for the same memory
    # the same memory on the PyTorch backend (1.0 on; one window: Python path, floor) at 64 tokens per block: 630
    q = build_plan(llama2, H100, make_settings(engine="trtllm", engine_version="1.2.1", block_size=64,
                                               available_kv_memory_bytes=int(0.9 * 21.89 * 2**30), max_model_len=4096),
                   with_roofline=False)
    assert q.memory.num_gpu_blocks == 630 and "PyTorch backend" in q.memory.engine_version


def test_trtllm_engine_version_is_read_and_checked():
    import pytest

    from kvledger.accounting.plan_other import trtllm_runtime
    from kvledger.errors import InputError

    assert trtllm_runtime(None)[0] == "pytorch" and trtllm_runtime("1.0.0")[0] == "pytorch"
    assert trtllm_runtime("0.21.0")[0] == "tensorrt" and trtllm_runtime("v0.13")[0] == "tensorrt"
    with pytest.raises(InputError, match="is not one TensorRT-LLM version"):
        trtllm_runtime("latest")
    with pytest.raises(InputError, match="not an SGLang version"):
        build_plan(LLAMA8, H100, make_settings(engine="sglang", engine_version="latest"), with_roofline=False)
    with pytest.raises(InputError, match="predates"):
        build_plan(LLAMA8, H100, make_settings(engine="sglang", engine_version="0.3.6"), with_roofline=False)


def test_trtllm_engine_example_10718_tokens_is_670_blocks():
    # NVIDIA/TensorRT-LLM issue #224 (2023-10-31): Llama-2-7b fp16, engine built with --tokens_per_block 16, A10, Triton
    # backend: "[TensorRT-LLM][INFO] Using 10718 tokens in paged KV cache."; the maintainer's answer (schetlur-nv,
    # 2023-11-01): that token count "gets rounded up to the next multiple of block size during allocation".
    # 10,718 / 16 = 669.875: the C++ executor allocates ceil = 670 blocks (10,720 token slots), not floor = 669.
    # Llama-2-7b keeps 32 layers × 2 × 32 KV heads × 128 × 2 B = 524,288 B per token; any KV memory in
    # [10,718, 10,719) × 524,288 B gives 10,718 tokens.
    llama2 = load_model("meta-llama/Llama-2-7b-hf")
    for extra in (0, 524_287):
        p = build_plan(llama2, H100, make_settings(engine="trtllm", engine_version="0.5.0", block_size=16,
                                                   available_kv_memory_bytes=10_718 * 524_288 + extra,
                                                       max_model_len=4096),
                       with_roofline=False)
        assert (p.memory.pool_tokens, p.memory.block_size, p.memory.num_gpu_blocks) == (10_718, 16, 670)


def test_sglang_range_from_the_pre_load_memory_and_the_device_total():
    # SGLang: available = (total − X) × f − weights − B − E, X = memory in use before the weights load, B = the RoPE
    # buffer and segment tails (67,108,864 + 1,564,672 B, computed), E = the rest the load adds. Point X = 0.42 GiB
    # at TP 1; X runs from 0.13 GiB (CUDA context) to 0.75 GiB in public logs (sglang_rules.SGLANG_PRELOAD_HIGH_GIB);
    # E from −0.005 to 0.19 GiB (sglang_rules.SGLANG_LOAD_EXTRA_GIB). H100's CUDA total ranges
    # 85,023,784,960–85,060,485,120 B over drivers (gpu_cuda.csv). f = 0.83 (with the prefill graphs), weights
    # 16,060,522,496 B, −0.1% …
    # +0.25% (vLLM's logged spread, transferred: transferred_ranges.weights_range): +40,151,306.24 / −16,060,522.50 B:
    #   low  = (85,023,784,960 − 805,306,368) × 0.83 − 16,060,522,496 − 40,151,306.24 − 68,673,536 − 204,010,946.56
    #        = 53,527,978,946 B → floor(/131,072) 408,386 tokens
    #   high = (85,060,485,120 − 139,586,437) × 0.83 − 16,060,522,496 + 16,060,522.50 − 68,673,536 + 5,368,709.12
    #        = 54,376,579,106 B → 414,860 tokens
    # page 1, 131,072-token requests: concurrency 408,386 / 131,072 = 3.116 to 414,860 / 131,072 = 3.165
    p = build_plan(LLAMA8, H100, make_settings(engine="sglang"), with_roofline=False)
    r = p.memory.ranges
    assert r["available_kv_bytes"] == (53_527_978_946.0, 54_376_579_106.0)
    assert r["pool_tokens"] == r["num_gpu_blocks"] == (408_386, 414_860)
    assert r["max_concurrency"] == (408_386 / 131_072, 414_860 / 131_072)
    w = next(d for d in p.memory.deductions if d.name == "weights")
    assert (w.low_bytes, w.high_bytes) == pytest.approx((16_060_522_496 * 0.999, 16_060_522_496 * 1.0025))
    # the reserve's range: − (0.42 − 0.13 GiB) × 0.83 = − 0.2407 GiB to + (0.75 − 0.42 GiB) × 0.83 = + 0.2739 GiB
    res = next(d for d in p.memory.deductions if d.name == N.SGLANG_RESERVE)
    assert (res.high_bytes - res.bytes) / 2**30 == pytest.approx(0.2739, abs=1e-5)
    assert (res.bytes - res.low_bytes) / 2**30 == pytest.approx(0.2407, abs=1e-5)
    # distributed (TP 2 over NVLink, custom all-reduce on): no public TP-2 start-up, so the point stays 0.42 GiB and the
    # range reaches 2.67 GiB before the weights (sglang PR #11716, TP 8 on H200: CUDA total 139.96 GiB less "Load weight
    # begin. avail mem=137.29 GB"): + (2.67 − 0.42) and − (0.42 − 0.13) GiB, × f
    p2 = build_plan(LLAMA8, H100, make_settings(engine="sglang", tp=2), with_roofline=False)
    d2 = next(d for d in p2.memory.deductions if d.name == N.SGLANG_RESERVE)
    assert (d2.high_bytes - d2.bytes) / p2.memory.fraction == pytest.approx(2.25 * 2**30)
    assert (d2.bytes - d2.low_bytes) / p2.memory.fraction == pytest.approx(0.29 * 2**30)
    # given the engine's figure there is nothing left to range over
    g = build_plan(LLAMA8, H100, make_settings(engine="sglang", available_kv_memory_bytes=50 * 2**30),
                   with_roofline=False)
    assert g.memory.ranges == {}
