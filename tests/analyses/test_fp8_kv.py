"""FP8 KV cache: the vLLM docs' capacity golden test, the L4 calibration, the break-even closed form, the verdict
words."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvledger.accounting.plan import build_plan
from kvledger.accounting.settings import make_settings
from kvledger.analyses.judgments.fp8_calibration import (
    DEFAULT_FP8_OVERHEAD,
    VLLM_DOCS_L4_QWEN3_4B,
    VLLM_DOCS_L4_SOURCE,
    Fp8Overhead,
    fit_fp8_overhead,
)
from kvledger.analyses.judgments.fp8_kv import analyse_fp8_kv, max_context_holding
from kvledger.analyses.judgments.fp8_measurements_csv import read_fp8_measurements
from kvledger.catalog.gpus import get_gpu
from kvledger.catalog.models import load_model
from kvledger.errors import FormatError, InputError

QWEN3_4B = str(Path(__file__).parents[1] / "fixtures" / "configs" / "Qwen3-4B.json")

# The vLLM docs printed "11.47 GiB" of KV memory for both runs. Qwen3-4B: 2 × 36 layers × 8 KV heads × 128 × 2 B
# = 147,456 B/token, so a 16-token page is 2,359,296 B in bf16 and 1,179,648 B in fp8. 83,488 tokens = 5,218 blocks
# needs available ∈ [5,218, 5,219) × 2,359,296 = [12,310,806,528, 12,313,165,824) B; 166,992 tokens = 10,437 blocks
# needs [10,437, 10,438) × 1,179,648 = [12,312,086,976, 12,313,266,624) B. Both hold on
# [12,312,086,976, 12,313,165,824) B = 11.4666–11.4676 GiB (prints as 11.47). We take a value inside it.
L4_AVAILABLE_BYTES = 12_312_600_000


@pytest.fixture(scope="module")
def llama_h100():
    return load_model("meta-llama/Llama-3.1-8B"), get_gpu("H100-SXM")


def test_capacity_doubles_on_the_vllm_docs_l4_setup():
    m, g = load_model(QWEN3_4B), get_gpu("L4")
    pb = build_plan(m, g, make_settings(available_kv_memory_bytes=L4_AVAILABLE_BYTES, contexts=(32768,)))
    pf = build_plan(m, g, make_settings(available_kv_memory_bytes=L4_AVAILABLE_BYTES, contexts=(32768,),
                                        kv_cache_dtype="fp8"))
    assert pb.kv.bytes_per_token == 147_456 and pf.kv.bytes_per_token == 73_728
    assert pb.memory.num_gpu_blocks * 16 == 83_488 and pf.memory.num_gpu_blocks * 16 == 166_992
    # docs: maximum concurrency for 32k-token requests 2.55x → 5.10x (5,218 / 2,048 = 2.548; 10,437 / 2,048 = 5.096)
    assert round(pb.concurrency[0].max_concurrency, 2) == 2.55 and round(pf.concurrency[0].max_concurrency, 2) == 5.10
    r = analyse_fp8_kv(m, g, make_settings(available_kv_memory_bytes=L4_AVAILABLE_BYTES), contexts=[32768])
    assert r.capacity.bf16["pool_tokens"] == 83_488 and r.capacity.fp8["pool_tokens"] == 166_992
    assert r.capacity.fp8["bytes_per_block"] * 2 == r.capacity.bf16["bytes_per_block"] == 2_359_296


def test_default_overhead_is_the_fit_to_the_l4_table():
    cal = fit_fp8_overhead(VLLM_DOCS_L4_QWEN3_4B, load_model(QWEN3_4B), get_gpu("L4"), source=VLLM_DOCS_L4_SOURCE)
    # the default is this fit rounded to two significant figures
    assert cal.overhead.per_layer_s == pytest.approx(DEFAULT_FP8_OVERHEAD.per_layer_s, rel=0.02)
    assert cal.overhead.ns_per_element == pytest.approx(DEFAULT_FP8_OVERHEAD.ns_per_element, rel=0.02)
    # the four fp8 rows are reproduced within 0.2%; the bf16 baseline fit gives 264 GB/s = 88% of the L4's 300 GB/s
    # and a 2.8 ms fixed step. Qwen3-4B ties its LM head to the embedding, which every decode step reads
    # (151,936 × 2,560 × 2 B = 0.778 GB, 2.95 ms at 264 GB/s): e.g. 1/29.1 tok/s = 34.36 ms at 2k =
    # (7.57 + 0.778) GB / 264 GB/s + 2.79 ms. Without the head read the same fit put 5.74 ms in the fixed step.
    assert cal.max_abs_error_pct < 0.2
    assert cal.bandwidth_fraction == pytest.approx(0.88, abs=0.01) and cal.step_fixed_s == pytest.approx(2.79e-3,
        rel=0.01)


def test_calibrated_model_reproduces_the_docs_gains_on_l4():
    m, g = load_model(QWEN3_4B), get_gpu("L4")
    cal = fit_fp8_overhead(VLLM_DOCS_L4_QWEN3_4B, m, g)
    s = make_settings(available_kv_memory_bytes=L4_AVAILABLE_BYTES,
                      achievable_bandwidth_fraction=cal.bandwidth_fraction,
                      cpu_overhead_s=cal.step_fixed_s)
    r = analyse_fp8_kv(m, g, s, concurrency=1, contexts=[2048, 8192, 16384, 32768], overhead=cal.overhead,
                       fitted="the docs' fit")  # priced as fitted: the fixed step in series, no host term on top
    # docs: 29.1→29.4, 26.4→27.9, 23.6→26.2, 19.4→23.4 tok/s; step-time gain = 1 − bf16 rate / fp8 rate
    docs = [100 * (1 - b / f) for b, f in ((29.1, 29.4), (26.4, 27.9), (23.6, 26.2), (19.4, 23.4))]
    assert [round(p.fp8_gain_pct, 1) for p in r.curve] == pytest.approx(docs, abs=0.3)
    assert r.break_even.kind == "above" and r.break_even.context_tokens < 2048  # the docs saw +1% already at 2k


def test_break_even_matches_the_closed_form_for_llama_8b_on_h100(llama_h100):
    # c* = L·f / (B·(Δbytes/token / BW − x·elements/token)) with L = 32 layers, f = 6.5 µs, BW = 0.8 × 3.35 TB/s,
    # Δbytes = 131,072 − 65,536 = 65,536 B, elements = 65,536, x = 5.3e-5 ns:
    # 208 µs / (65,536 / 2.68e12 − 65,536 × 5.3e-14) = 208e-6 / (2.4454e-8 − 3.473e-9) = 208e-6 / 2.0981e-8 = 9,914.05
    r = analyse_fp8_kv(*llama_h100, concurrency=1)
    assert r.break_even.closed_form_tokens == pytest.approx(9914.05, abs=0.5)
    assert r.break_even.kind == "above" and r.break_even.context_tokens == 9915  # first whole token past c*
    by = {b.batch: b.context_tokens for b in r.break_even_by_batch}
    assert by[8] == 1240 and by[64] == 155  # c*/8 = 1,239.3; c*/64 = 154.9: it falls as 1/B
    assert any("leave it off" in v for v in r.verdict)
    assert any("no source" in v and "7,000" in v for v in r.verdict)


def test_capacity_point_is_where_bf16_stops_holding_the_batch(llama_h100):
    r = analyse_fp8_kv(*llama_h100, concurrency=64, contexts=[8192])
    # usable blocks (vLLM 0.33 rules, 59,056,859,546 B available, see test_analyses_cli): bf16 28,159, fp8 56,320
    # (block 0 is the null block); 28,159 // 64 = 439 blocks = 7,024 tokens, 56,320 // 64 = 880 blocks = 14,080 tokens
    assert r.capacity.bf16_max_context_tokens == 7024 and r.capacity.fp8_max_context_tokens == 14080
    p = r.curve[0]
    assert (p.fits_bf16, p.fits_fp8) == (False, True)
    assert any("Capacity matters from 7,025 tokens" in v for v in r.verdict)


def test_without_concurrency_the_capacity_sentence_states_fp8s_gain(llama_h100):
    # no --concurrency: the batch is what bf16 holds at 8,192 tokens, so "bf16 already holds them" would be true by
    # construction. 8,192 tokens = 512 blocks of 16; usable blocks bf16 28,159 // 512 = 54, fp8 56,320 // 512 = 110
    # (max_num_seqs 1,024 on H100 caps neither): 54 → 110, 110 / 54 = 2.037 → 2.04×
    r = analyse_fp8_kv(*llama_h100, contexts=[8192])
    assert (r.concurrency, r.headline["concurrency_given"]) == (54, False)
    assert ("Capacity at 8,192 tokens per request: FP8 KV raises what one replica runs at once from 54 to 110 "
            "requests (2.04×; vLLM memory plan)") in r.verdict[2]
    assert not any("already holds" in v or "Capacity matters" in v for v in r.verdict)
    given = analyse_fp8_kv(*llama_h100, concurrency=54, contexts=[8192])  # the same load, asked: bf16 holds it
    assert given.headline["concurrency_given"] and any("Capacity matters from" in v for v in given.verdict)


def test_overhead_extremes_give_always_and_never(llama_h100):
    zero = analyse_fp8_kv(*llama_h100, concurrency=4, contexts=[1024], overhead=Fp8Overhead(0.0, 0.0, "test"))
    assert zero.break_even.kind == "always"
    # 1 ns per element costs more than the 0.37 ps one byte of HBM traffic takes at 2.68 TB/s: never faster
    slow = analyse_fp8_kv(*llama_h100, concurrency=4, contexts=[1024], overhead=Fp8Overhead(0.0, 1.0, "test"))
    assert slow.break_even.kind == "never" and slow.break_even.closed_form_tokens is None
    assert any("never makes decode steps faster" in v and "leave it off" in v.lower() for v in slow.verdict)


def test_max_context_holding_edges(llama_h100):
    p = build_plan(*llama_h100, make_settings(), with_roofline=False, with_advice=False)
    assert max_context_holding(p, 1) == 131072  # one request fits even at max_model_len
    assert max_context_holding(p, 10**6) == 0  # 26,940 usable blocks cannot hold a million requests


def test_bad_inputs_are_clear_errors(llama_h100, tmp_path):
    with pytest.raises(InputError, match=r"^--concurrency 0 is out of range; allowed: \[1, 1,048,576\] sequences$"):
        analyse_fp8_kv(*llama_h100, concurrency=0)  # fp8-kv's range in kvledger.ranges: 2^20 sequences at most
    with pytest.raises(InputError, match="whole number of sequences, got 2.5"):
        analyse_fp8_kv(*llama_h100, concurrency=2.5)
    with pytest.raises(InputError, match="exceeds max_model_len"):
        analyse_fp8_kv(*llama_h100, contexts=[1 << 20])
    with pytest.raises(InputError, match="≥ 0"):
        Fp8Overhead(-1.0, 0.0, "test")
    bad = tmp_path / "m.csv"
    bad.write_text("context_tokens,batch,bf16_tok_per_s_per_seq\n2048,1,29.1\n")
    with pytest.raises(FormatError, match="are not a bf16-vs-fp8 decode table.*fp8_tok_per_s_per_seq"):
        read_fp8_measurements(str(bad))
    bad.write_text("context_tokens,batch,bf16_tok_per_s_per_seq,fp8_tok_per_s_per_seq\n2048,1,29.1,29.4\n"
                   "8192,1,fast,27.9\n")
    with pytest.raises(FormatError, match="line 3"):
        read_fp8_measurements(str(bad))
    with pytest.raises(InputError, match="at least 2"):
        fit_fp8_overhead(VLLM_DOCS_L4_QWEN3_4B[:1], load_model(QWEN3_4B), get_gpu("L4"))


def test_the_capacity_sentence_states_the_plans_own_ratios():
    # DeepSeek-V3.2-Exp-16L64E (16 sparse-MLA layers) under vLLM 0.28: on an RTX PRO 6000 (SM120) `auto` is already
    # the packed fp8_ds_mla cache, so both plans store 16 × (656 + 132) = 12,608 B a token — no change, said so; on an
    # H100 `auto` is the plain bf16 latent, 16 × (1,152 + 132) = 20,544 B, and fp8 the packed one: the page shrinks
    # 20,544 / 12,608 = 1.63×, not the 2× one byte per element alone would give
    cfg = Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "public-runs" / \
        "llmservingsim-rtxpro6000-deepseek-v32-16l64e" / "model" / "config.json"
    model = load_model(str(cfg))
    for gpu, want in (("RTX PRO 6000 Blackwell Server Edition", "Capacity: no change — the engine stores the same "
                       "cache either way"), ("H100", "Capacity: FP8 KV shrinks the page 1.63×")):
        r = analyse_fp8_kv(model, get_gpu(gpu), make_settings(engine_version="0.28.0"))
        (line,) = [x for x in r.verdict if x.startswith("Capacity:")]
        assert line.startswith(want), line
        if "no change" in want:  # one cache, one kernel: no FP8 overhead, equal step times, and the verdict says so
            assert r.verdict[1].startswith("Speed: no change either") and len(r.verdict) == 2
            assert all(p.fp8_overhead_s == 0.0 and p.bf16_step_s == p.fp8_step_s for p in r.curve)
