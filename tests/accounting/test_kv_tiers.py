"""KV tiers in the plan: capacity per tier, the load-vs-recompute break-even worked by hand, refusals."""

from __future__ import annotations

import pytest

from kvledger.accounting.kv_tier_rules import TierSettings
from kvledger.accounting.kv_tiers import build_tier_plan, prefill_s
from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model
from kvledger.errors import InputError


@pytest.fixture(scope="module")
def plan8b():
    return build_plan(load_model("meta-llama/Llama-3.1-8B"), get_gpu("H100"), make_settings(), with_advice=False)


def test_host_tier_capacity_256gib_vllm_native(plan8b):
    # Llama-3.1-8B bf16: 32 layers × 8 KV heads × 128 dims × 2 (K, V) × 2 B = 131,072 B/token; a 16-token block is
    # 2,097,152 B (already a multiple of the 4,096 B host page). 256 GiB = 274,877,906,944 B // 2,097,152 = 131,072
    # CPU chunks of one block each (vLLM 0.33.0 CPUOffloadingSpec) = 2,097,152 tokens.
    tp = build_tier_plan(plan8b, TierSettings(kv_offloading_size_gib=256))
    host = tp.tier("host_dram")
    assert tp.bytes_per_token == 131072
    assert host.capacity_blocks == 131072 and host.capacity_tokens == 2_097_152
    # H100 SXM host link: PCIe Gen5 x16, 128 GB/s bidirectional (catalog) → 64 GB/s per direction × 0.8 = 51.2 GB/s
    assert host.read_bytes_per_s == pytest.approx(51.2e9)


def test_break_even_llama8b_h100_pcie_gen5_by_hand(plan8b):
    """Host DRAM over PCIe Gen5 x16, vLLM's sequential rule (load, then the 1-token suffix).

    Roofline at 0.7 × 989.5 TFLOP/s = 692.65e12 FLOP/s and 0.8 × 3.35 TB/s = 2.68e12 B/s:
    * weights read per step: 15,009,849,344 B / 2.68e12 = 5.6007 ms (the floor of any step);
    * GEMM FLOPs of n tokens: 2 × 6,979,588,096 × n + 1,050,673,152 (LM head, one sequence);
    * prefill attention of n tokens from 0: max(524,288 × n(n+1)/2 / 692.65e12, 131,072 × n / 2.68e12).
    Recompute of an N-token prefix + 1 token: T(N+1 | 0). Load path: N × 131,072 / 51.2e9 (2.56 µs/token) + T(1 | N),
    and T(1 | N) = 5.6007 ms + 131,072 (N+1) / 2.68e12 (the suffix reads the prefix's KV).
    N = 316: T(317|0) = (13.959176e9 × 317 + 1.0507e9) / 692.65e12 = 6.3900 ms + attention 38.15 µs = 6.4282 ms;
             load path = 0.80896 ms + 5.6007 ms + 15.5 µs = 6.4252 ms → loading wins by 3.0 µs.
    N = 315: T(316|0) = 6.3699 + 0.0379 = 6.4078 ms; load path = 0.8064 + 5.6007 + 0.0155 = 6.4226 ms → loses.
    So the break-even is 316 tokens: below the ridge (≈ 278 tokens) recomputing rides on the weight read for free.
    """
    tp = build_tier_plan(plan8b, TierSettings(kv_offloading_size_gib=256))
    be = tp.break_even[0]
    assert be.tier == "host_dram" and be.rule == "sequential"
    assert be.kind == "above" and be.break_even_tokens == 316
    rc = plan8b.step_cost()
    # one token from 0: the weight floor + reading/writing its own KV (131,072 B / 2.68e12 = 48.9 ns)
    assert prefill_s(rc, 1, 0) == pytest.approx(15_009_849_344 / 2.68e12 + 131072 / 2.68e12, rel=1e-9)
    # at 1,024 tokens: 1,024 × 2.56 µs = 2.6214 ms of load + T(1 | 1024) = 5.6007 + 131,072 × 1,025 / 2.68e12 (50.1 µs)
    assert be.load_s_per_1k == pytest.approx(1024 * 131072 / 51.2e9 + 5.6007e-3 + 131072 * 1025 / 2.68e12, rel=1e-4)


def test_nvme_tier_breaks_even_later_and_sglang_overlap_earlier(plan8b):
    # NVMe at 7 GB/s: 18.72 µs/token against 20.15 µs/token of compute-bound recompute, so the break-even moves to
    # where the ~1.43 µs/token margin pays back the 5.6 ms weight floor: about 5.6007 ms / (20.15 − 18.72) µs ≈ 3,900
    # tokens, less what attention's growth adds to the recompute side (measured by the scan: between 2,000 and 4,000).
    tp = build_tier_plan(plan8b, TierSettings(kv_offloading_size_gib=256, nvme_gib=1024))
    nvme = next(b for b in tp.break_even if b.tier == "nvme")
    assert 2000 < nvme.break_even_tokens < 4000
    host_vllm = tp.break_even[0].break_even_tokens
    ps = build_plan(load_model("meta-llama/Llama-3.1-8B"), get_gpu("H100"), make_settings(engine="sglang"),
                    with_advice=False)
    ts = build_tier_plan(ps, TierSettings(enable_hierarchical_cache=True))
    # SGLang hides the load behind the forward pass (max, not sum): it breaks even sooner than vLLM's sequential rule
    assert ts.break_even[0].rule == "overlapped" and ts.break_even[0].break_even_tokens < host_vllm
    # host pool = int(device tokens × 2.0) + one padding page (page_size 1)
    dev = ps.memory.usable_blocks * ps.memory.block_size
    assert ts.tier("host_dram").capacity_tokens == int(dev * 2.0) + ps.memory.block_size


def test_sglang_hicache_size_in_gb_overrides_ratio():
    ps = build_plan(load_model("meta-llama/Llama-3.1-8B"), get_gpu("H100"), make_settings(engine="sglang"),
                    with_advice=False)
    ts = build_tier_plan(ps, TierSettings(enable_hierarchical_cache=True, hicache_ratio=3.0, hicache_size_gb=100))
    # 100 GB = 1e11 B // 131,072 B/token = 762,939 tokens, + 1 padding page of 1 token
    assert ts.tier("host_dram").capacity_tokens == 762_939 + 1


@pytest.mark.parametrize("engine, tiers, words", [
    ("sglang", TierSettings(kv_offloading_size_gib=256), "--kv-offloading-size is a vLLM flag; with --engine sglang"),
    ("sglang", TierSettings(kv_offloading_size_gib=256, kv_offloading_backend="native", engine_flag="--policy"),
     "--kv-offloading-size and --kv-offloading-backend are vLLM flags; with --policy sglang they"),
    ("vllm", TierSettings(enable_hierarchical_cache=True), "is an SGLang flag"),
    ("vllm", TierSettings(hicache_write_policy="write_through"), "--hicache-write-policy is an SGLang flag"),
    ("vllm", TierSettings(hicache_storage_prefetch_policy="wait_complete", hicache_ratio=1.0),
     "--hicache-ratio and --hicache-storage-prefetch-policy are SGLang flags"),
    ("sglang", TierSettings(enable_hierarchical_cache=True, hicache_storage_prefetch_policy="eager"),
     "must be one of best_effort, wait_complete, timeout"),
    ("vllm", TierSettings(kv_offloading_size_gib=64, nvme_gib=10, nvme_read_bytes_per_s=0.0), "bandwidth"),
    ("vllm", TierSettings(kv_offloading_backend="native"), "leaves offloading off without a size"),
    ("vllm", TierSettings(kv_offloading_size_gib=-1), "above 0"),
    ("sglang", TierSettings(hicache_ratio=2.0), "exists only with --enable-hierarchical-cache"),
    ("sglang", TierSettings(enable_hierarchical_cache=True, hicache_write_policy="lazy"), "write_back"),
])
def test_invalid_tier_settings_one_paragraph(engine, tiers, words):
    p = build_plan(load_model("meta-llama/Llama-3.1-8B"), get_gpu("H100"), make_settings(engine=engine),
                   with_advice=False, with_roofline=False)
    with pytest.raises(InputError, match=words) as e:
        build_tier_plan(p, tiers)
    assert "\n" not in str(e.value)


def test_version_rules_size_without_backend_and_before_0_11_1():
    m, g = load_model("meta-llama/Llama-3.1-8B"), get_gpu("H100")
    p012 = build_plan(m, g, make_settings(engine_version="0.12.0"), with_advice=False, with_roofline=False)
    with pytest.raises(InputError, match="silently leaves offloading off"):
        build_tier_plan(p012, TierSettings(kv_offloading_size_gib=64))
    with pytest.raises(InputError, match="You must set kv_offloading_size"):  # vLLM 0.12.0's own refusal
        build_tier_plan(p012, TierSettings(kv_offloading_backend="native"))
    p013 = build_plan(m, g, make_settings(engine_version="0.13.0"), with_advice=False, with_roofline=False)
    with pytest.raises(InputError, match="silently leaves offloading off"):  # 0.13.0's backend default is still None
        build_tier_plan(p013, TierSettings(kv_offloading_size_gib=64))
    p014 = build_plan(m, g, make_settings(engine_version="0.14.0"), with_advice=False, with_roofline=False)
    assert build_tier_plan(p014, TierSettings(kv_offloading_size_gib=64)).tier("host_dram") is not None
    p011 = build_plan(m, g, make_settings(engine_version="0.11.0"), with_advice=False, with_roofline=False)
    with pytest.raises(InputError, match="arrive in 0.11.1"):
        build_tier_plan(p011, TierSettings(kv_offloading_size_gib=64, kv_offloading_backend="native"))
    # 0.12.0 native: 64 GiB / 1 rank // 2,097,152 B per block = 32,768 CPU blocks (one per GPU block)
    tp = build_tier_plan(p012, TierSettings(kv_offloading_size_gib=64, kv_offloading_backend="native"))
    assert tp.tier("host_dram").capacity_blocks == 32768


def test_hybrid_ssm_model_refused_where_the_connector_turns_hma_off():
    # vLLM 0.12.0 turns the hybrid KV cache manager off whenever a KV connector is set; Jamba's Mamba layers then fail
    # at startup. 0.33.0's native OffloadingConnector supports the hybrid manager, LMCache's connector does not.
    m, g = load_model("ai21labs/Jamba-v0.1"), get_gpu("H200")
    for ver, backend in (("0.12.0", "native"), ("0.33.0", "lmcache")):
        p = build_plan(m, g, make_settings(engine_version=ver, tp=2), with_advice=False, with_roofline=False)
        with pytest.raises(InputError, match="hybrid KV cache manager"):
            build_tier_plan(p, TierSettings(kv_offloading_size_gib=64, kv_offloading_backend=backend))


def test_mla_keeps_one_host_copy_at_tp8_in_0_33():
    # DeepSeek-V3 bf16 MLA: 61 layers × 576 × 2 B = 70,272 B/token; 16-token blocks = 1,124,352 B, rounded up to the
    # 4,096 B page = 1,126,400 B. vLLM 0.33.0's replicated_layout (pure MLA, TP 8, no PP) stores one copy, not 8:
    # 1,024 GiB // 1,126,400 B = 976,128 chunks = 15,618,048 tokens. (Not a refusal: no version read refuses MLA.)
    p = build_plan(load_model("deepseek-ai/DeepSeek-V3"), get_gpu("H200"), make_settings(tp=8), with_advice=False,
                   with_roofline=False)
    host = build_tier_plan(p, TierSettings(kv_offloading_size_gib=1024)).tier("host_dram")
    assert p.memory.bytes_per_block == 1_124_352
    assert host.capacity_blocks == 976_128 and host.capacity_tokens == 15_618_048
