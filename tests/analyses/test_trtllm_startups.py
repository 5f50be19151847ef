"""The public TensorRT-LLM start-ups replayed through the TensorRT-LLM plan
(benchmarks/data/trtllm_public_startups.csv), worked by hand from the printed lines."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvledger.accounting.plan_other import trtllm_blocks_round_up, trtllm_runtime
from kvledger.analyses.doctor.engine_startups import bucket_counts
from kvledger.analyses.doctor.trtllm_startups import load_rows, replay_trtllm_row

ROOT = Path(__file__).resolve().parents[2]
ROWS = {r["id"]: r for r in load_rows(ROOT / "benchmarks" / "data" / "trtllm_public_startups.csv")}


def _term(x, name):
    return next(t for t in x.terms + x.from_printed if t.term == name)


def test_tr03_engine_takes_the_fraction_of_the_printed_free_memory_and_rounds_blocks_up():
    # https://github.com/NVIDIA/TensorRT-LLM/issues/4275#issuecomment-2941155249 (0.19.0, RTX 5090, Llama-3.1-8B FP8
    # engine with FP8 KV): "total: 31.84 GiB, available: 17.83 GiB", fraction 0.9 → 16.047 GiB; the print's ± 0.005
    # gives 16.0425–16.0515 ∋ the printed "Allocated 16.05 GiB". Blocks: 32 layers × 2 × 8 heads × 128 × 1 B = 65,536 B
    # per token → floor(16.0425 × 16,384) = 262,840 to floor(16.0515 × 16,384) = 262,987 tokens → ceil(/32) = 8,214 to
    # 8,219 ∋ the printed 8,219 (263,008 = 8,219 × 32 tokens).
    x = replay_trtllm_row(ROWS["TR03"], ROOT)
    f = _term(x, "KV memory from printed free memory")
    assert (f.predicted, f.low, f.high) == pytest.approx((16.047, 16.0425, 16.0515)) and f.inside
    b = _term(x, "blocks from printed memory")
    assert (b.low, b.high, b.printed, b.inside) == (8_214, 8_219, 8_219, True)


def test_tr04_qwen15_7b_blocks_need_the_executors_round_up():
    # https://github.com/NVIDIA/TensorRT-LLM/issues/2268 (0.13, A100 40GB): "available: 21.89 GiB" × 0.9 (default) =
    # 19.6965–19.7055 GiB; 32 layers × 2 × 32 heads × 128 × 2 B = 524,288 B per token → 40,338–40,356 tokens; 64 per
    # block: ceil → 631 at both ends, the printed "Number of blocks in KV cache primary pool: 631" (floor would be 630).
    b = _term(replay_trtllm_row(ROWS["TR04"], ROOT), "blocks from printed memory")
    assert (b.low, b.high, b.printed) == (631, 631, 631)


def test_tr06_pytorch_backend_before_1_0_rounds_blocks_up():
    # https://github.com/NVIDIA/TensorRT-LLM/issues/6294 (0.20.0, PyTorch backend, H100): the estimate printed
    # max_tokens 860,308; "Allocated 52.51 GiB for max tokens in paged KV cache (860320)": 860,320 = 26,885 × 32 and
    # ceil(860,308 / 32) = 26,885, where floor gives 26,884 (860,288 tokens).
    assert trtllm_blocks_round_up("pytorch", "0.20.0") and not trtllm_blocks_round_up("pytorch", "1.2.1")
    assert trtllm_blocks_round_up("tensorrt", "0.13.0")
    b = _term(replay_trtllm_row(ROWS["TR06"], ROOT), "blocks from printed max_tokens")
    assert (b.predicted, b.printed) == (26_885, 26_885)
    # the release ships both runtimes, so the row names its backend
    assert trtllm_runtime("0.20.0", "pytorch")[0] == "pytorch" and trtllm_runtime("0.20.0")[0] == "tensorrt"
    # no version: the label names the runtime asked for as a version's label does (was "tensorrt backend rules")
    assert trtllm_runtime(None, "tensorrt") == ("tensorrt", "TensorRT-engine executor rules (newest read)")
    assert trtllm_runtime(None, "pytorch") == ("pytorch", "PyTorch backend rules (newest read)")
    assert trtllm_runtime(None) == ("pytorch", "PyTorch backend rules (newest read)")
    assert trtllm_runtime("0.19.0", "tensorrt")[1] == "0.19.0 (TensorRT-engine executor rules)"


def test_tr01_tr02_same_free_memory_at_two_fractions():
    # https://github.com/lmontigny/lm7/blob/main/docs/tensorrt-llm.md (1.2.1, RTX 4070 SUPER 12 GiB, SmolLM2-135M): 9.06
    # GiB at the default 0.9 and 2.52 GiB at --free_gpu_memory_fraction 0.25: 2.52 / 9.06 = 0.2781 against 0.25 / 0.9 =
    # 0.2778, one free memory after the dry run (10.07 GiB) times each fraction. Given 9.055–9.065 GiB: 30 layers × 2 ×
    # 3 heads × 64 × 2 B = 23,040 B per token → 421,993–422,459 tokens → // 32 = 13,187–13,201 ∋ 13,189 printed.
    x1, x2 = (replay_trtllm_row(ROWS[i], ROOT) for i in ("TR01", "TR02"))
    a1, a2 = _term(x1, "available KV"), _term(x2, "available KV")
    assert a2.predicted / a1.predicted == pytest.approx(0.25 / 0.9)
    assert a2.printed / a1.printed == pytest.approx(0.25 / 0.9, abs=0.001)
    b = _term(x1, "blocks from printed memory")
    assert (b.low, b.high, b.printed) == (13_187, 13_201, 13_189)
    # from the config alone (https://github.com/lmontigny/lm7/blob/main/docs/tensorrt-llm.md, TR01; WSL2, so WDDM: the
    # total is not printed; the whole board, nvidia-smi 12,282 MiB = 12,878,610,432 B, is the total):
    # weights 269,030,016 B (134,515,008 params × 2 B), the
    # forward over 8,192 tokens 8,192 × (2·576 + 15·64 + 3·1,536) × 2 B = 110,100,480 B, the 139,586,437 B non-torch
    # term, the CUDA-graph pool of the default largest graph (128: CudaGraphConfig) 128 × 6,720 × 2 B = 1,720,320 B of
    # activations + 128 × 49,152 vocab × 2 B = 12,582,912 B of logits = 14,303,232 B, the WDDM hold on this 11.994 GiB
    # board 0.393 + 0.0283 × 11.994140625 = 0.732434 GiB = 786,445,212.06 B (wddm.WDDM_HOLD_FIT) and the fitted 0.86 GiB
    # = 923,417,968.64 B: 2,242,883,345.70 B in all. Point: (12,878,610,432 − 2,242,883,345.70) × 0.9 =
    # 9,572,154,377.67 B = 8.9148 GiB, −1.60 % against 9.06. Low: the terms' highs — weights × 1.0025 =
    # 269,702,591.04 and forward × 1.11 = 122,211,532.80 and non-torch 0.25 GiB = 268,435,456 (transferred_ranges.py),
    # 21,454,848 (1.5 × the pool), 2,611,806,312.86 (the hold + 1.70 GiB), 1,460,288,880.64 (1.36 GiB fitted) —
    # 4,753,899,621.34 B in all → (12,878,610,432 − 4,753,899,621.34) × 0.9 = 7,312,239,729.59 B = 6.810 GiB; high:
    # the lows — weights × 0.999 = 268,760,985.98, forward × 0.9 = 99,090,432, non-torch 0.03 GiB = 32,212,254.72,
    # 12,582,912, 464,322,664.86 (the hold − 0.30 GiB), 386,547,056.64 (0.36 GiB) — 1,263,516,306.20 B →
    # (12,878,610,432 − 1,263,516,306.20) × 0.9 = 10,453,584,713.22 B = 9.736 GiB ∋ 9.06. Tokens: ÷ 23,040 → 317,371
    # → 9,917 blocks → 317,344 to 453,714 → 14,178 blocks → 453,696 ∋ 422,048 printed.
    assert a1.predicted == pytest.approx(9_572_154_377.67 / 2**30)
    assert a1.rel_error == pytest.approx(-0.0160, abs=0.0005)
    assert (a1.low, a1.high) == pytest.approx((7_312_239_729.59 / 2**30, 10_453_584_713.22 / 2**30)) and a1.inside
    t = _term(x1, "KV tokens")
    assert (t.low, t.high, t.printed, t.inside) == (317_344, 453_696, 422_048, True)


def test_fitted_extra_term_is_the_pytorch_residuals():
    # residual = what the log implies beyond the sized terms (weights, forward, 0.13 GiB, CUDA-graph pool, WDDM hold) =
    # the fitted term + (planned − printed KV) ÷ fraction (trtllm_startups.trtllm_residual_gib): TR01
    # 0.86 + (8.9148 − 9.06) / 0.9 = 0.699 GiB, TR02 0.86 + (2.4763 − 2.52) / 0.25 = 0.685 GiB (one set-up: 0.692),
    # TR06 0.86 + (52.6482 − 52.51) / 0.8 = 1.033 GiB (https://github.com/NVIDIA/TensorRT-LLM/issues/6294; its graph
    # pool at trtllm-bench's 4,096: 4,096 × 57,344 × 2 B + 4,096 × 128,256 × 2 B = 1.416 GiB); mean of the two set-ups
    # (0.692 + 1.033) / 2 = 0.8625 → 0.86 GiB; leave-one-out (each set-up predicted by the other) 0.341 GiB, all inside
    # 0.36–1.36 GiB. TR01/TR02 are lower than TR06 since the WDDM hold fitted on the board (0.732 GiB on the 4070 SUPER,
    # benchmarks/data/wddm_holds.csv) takes 0.293 GiB more of their total than the 450 MiB it was before.
    # The TensorRT-engine rows fit nothing any more (their runtime buffers and decoder come from the code).
    from kvledger.accounting.trtllm_terms import TRTLLM_EXTRA_GIB
    from kvledger.analyses.doctor.trtllm_startups import trtllm_leave_one_out, trtllm_residual_gib

    r1, r2, r6 = (trtllm_residual_gib(ROWS[i], ROOT) for i in ("TR01", "TR02", "TR06"))
    assert (r1, r2, r6) == pytest.approx((0.699, 0.685, 1.033), abs=0.002)
    assert ((r1 + r2) / 2 + r6) / 2 == pytest.approx(TRTLLM_EXTRA_GIB[1], abs=0.005)
    lo, _, hi = TRTLLM_EXTRA_GIB
    assert lo < min(r1, r2, r6) and max(r1, r2, r6) < hi
    # leave-one-out: TR01/TR02 share a set-up, so each is left out with its twin: the term is then TR06's 1.033 GiB;
    # TR06's is the set-up mean (0.699 + 0.685) / 2 = 0.692
    loo = {i: held for i, _, _, held in trtllm_leave_one_out(list(ROWS.values()), ROOT)}
    assert set(loo) == {"TR01", "TR02", "TR06"}
    assert (loo["TR01"], loo["TR02"], loo["TR06"]) == pytest.approx((r6, r6, (r1 + r2) / 2))


def test_tr03_out_of_sample_from_the_code_sized_terms():
    # TR03 (0.19.0, RTX 5090 under WDDM, Llama-3.1-8B FP8 engine by quantize.py, so float16 logits — ModelOpt's export
    # writes logits_dtype "float16" for a bfloat16 model —, max_batch_size 2,048 — the Triton backend passes no max
    # batch size to the executor, so the engine's holds — max_seq_len 2,048, max_num_tokens 1,024), B:
    #   total (printed 31.84 GiB)                          34,187,939,676
    #   weights                                             9,081,201,536
    #   the engine's rotary table 131,072 × 128 × 4 B          67,108,864
    #   engine activations (forward over 1,024 tokens)        117,440,512
    #   runtime buffers 2,048 × 128,256 × 2 + 24 × 2,048²     625,999,872
    #   decoder 10 × 2,048 × 128,256 + 49,152 × 2,048 + 16 × 2,048²   2,794,455,040
    #   uncounted rest 0.773 GiB (the memory FAQ's log)       830,002,429.95
    #   WDDM hold on the 31.84 GiB board 0.393 + 0.0283 × 31.8427734375 = 1.294150 GiB  1,389,583,505.82
    #   the engine's float32 rotary table 131,072 × 128 × 4 B                          67,108,864
    # free = 19,282,147,916.23; × 0.9 = 17,353,933,124.61 B = 16.162 GiB against the printed 16.05: +0.70%, out of
    # sample (the hold is fitted on benchmarks/data/wddm_holds.csv, which has no TensorRT-LLM record; with Linux's 450
    # MiB reserve as the hold and no rotary table it was +5.84%). The printed free memory 17.83 GiB leaves
    # 0.963 − 0.0625 = 0.900 GiB for the rest (the memory FAQ's C++ executor on H100: 0.773; range 0.3–3.1).
    from kvledger.analyses.doctor.trtllm_startups import trtllm_residual_gib

    a = _term(replay_trtllm_row(ROWS["TR03"], ROOT), "available KV")
    assert a.predicted == pytest.approx(17_353_933_124.61 / 2**30, abs=1e-3)
    assert a.rel_error == pytest.approx(0.0070, abs=0.0005)
    assert a.low <= a.printed <= a.high
    assert trtllm_residual_gib(ROWS["TR03"], ROOT) == pytest.approx(0.900, abs=0.002)


def test_tr07_runtime_buffers_and_decoder_as_printed():
    # https://github.com/NVIDIA/TensorRT-LLM/issues/1188 (Qwen2.5-Coder-0.5B int8, RTX A4000, every default: max batch
    # 2,048, max_seq_len 32,768): "Allocated 2.66 GB GPU memory for runtime buffers" against 2,855,272,448 B = 2.6592
    # GiB and "Allocated 5.76 GB GPU memory for decoder" against 6,186,598,400 B = 5.7617 GiB (worked in
    # tests/accounting/test_trtllm_engine_buffers.py); "Allocated 4.53 GiB for max tokens in paged KV cache (395776)":
    # 24 layers × 2 × 2 heads × 64 × 2 B = 12,288 B per token, 4.525–4.535 GiB → 395,400–396,274 tokens → ceil(/64)
    # 6,179–6,192 blocks ∋ 6,184 (395,776 = 6,184 × 64).
    x = replay_trtllm_row(ROWS["TR07"], ROOT)
    r, d = _term(x, "runtime buffers"), _term(x, "decoder buffers")
    assert (r.predicted, d.predicted) == pytest.approx((2_855_272_448 / 2**30, 6_186_598_400 / 2**30))
    assert abs(r.rel_error) < 0.001 and abs(d.rel_error) < 0.001 and r.inside and d.inside
    b = _term(x, "blocks from printed memory")
    assert (b.low, b.high, b.printed, b.inside) == (6_179, 6_192, 6_184, True)


def test_tr08_tp2_int4_awq_engine_out_of_sample():
    # https://github.com/triton-inference-server/tensorrtllm_backend/issues/577 (the first post; #576 holds the
    # same log): 0.13.0.dev2024081300, Meta-Llama-3-8B-Instruct int4 AWQ by quantize.py (float16, so float16 logits),
    # TP 2, max_batch 8, max_seq_len 8,000, max_num_tokens 4,096; per rank, B:
    #   total (printed 79.14 GiB)                                          84,975,927,951
    #   weights: int4 + float16 scales and (vLLM's layout) 4-bit zeros per 128, embedding and lm_head split over the
    #     2 ranks = 2,864,193,536; + rotary table 8,192 × 128 × 4 = 4,194,304         2,868,387,840
    #   engine activations (forward over 4,096 tokens at TP 2)                 268,435,456
    #   runtime buffers 8 × (128,256 × 2 + 24 × 8,000)                           3,588,096
    #   decoder 10 × 8 × 128,256 + 49,152 × 8 + 16 × 8 × 8,000                  11,677,696
    #   custom all-reduce 2 × align2MiB(2 × min(8 × 8,000 × 4,096 × 4, 16,000,000)) + 2 × 2 MiB   71,303,168
    #   uncounted rest 0.773 GiB                                              830,002,429.95
    # free = 80,922,533,265.05; × 0.9 = 72,830,279,938.5 B = 67.8285 GiB against the printed free memory × 0.9 =
    # 74.69 × 0.9 = 67.221 GiB: +0.90%. 65,536 B per token per rank (32 layers × 2 × 4 heads × 128 × 2 B): 1,111,302
    # tokens → ceil(/64) 17,365 blocks = 1,111,360 tokens against 17,210 × 64 = 1,101,440.
    x = replay_trtllm_row(ROWS["TR08"], ROOT)
    a, t = _term(x, "available KV"), _term(x, "KV tokens")
    assert a.predicted == pytest.approx(72_830_279_938.5 / 2**30, abs=1e-4) and a.printed == pytest.approx(67.221)
    assert a.rel_error == pytest.approx(0.0090, abs=0.0005) and a.inside
    assert (t.predicted, t.printed) == (1_111_360, 1_101_440)
    # blocks from the printed free memory: 74.685–74.695 × 0.9 GiB × 16,384 tokens per GiB → 1,101,275–1,101,422 tokens
    # → ceil(/64) 17,208–17,210 ∋ 17,210 (the fraction 0.9 is the executor's default; the blocks fit it)
    b = _term(x, "blocks from printed memory")
    assert (b.low, b.high, b.printed, b.inside) == (17_208, 17_210, 17_210, True)
    # "Allocated 3.44 MB GPU memory for runtime buffers" (MiB): 3,588,096 B = 3.4219 MiB, 19 KiB short, outside the
    # print's ± 0.005 MiB; "15.05 MB … for decoder": 11,677,696 B = 11.137 MiB, −26%, above even the 12-B high end
    # (13.09 MiB): the 0.13.0.dev decoder holds more at float16 logits than any layout read (14 B per entry would give
    # 15.051 MiB, a float32 buffer among the float16 ones; not read, so not used)
    r, d = _term(x, "runtime buffers"), _term(x, "decoder buffers")
    assert r.predicted * 2**10 == pytest.approx(3.4219, abs=1e-4) and not r.inside
    assert d.predicted * 2**10 == pytest.approx(11.137, abs=1e-3) and d.rel_error == pytest.approx(-0.26, abs=0.005)
    assert not d.inside
    # what the printed free memory leaves for the rest: 84,975,927,951 − 74.69 GiB (80,198,087,311) − the sized terms
    # (3,223,392,256) = 1,554,448,384 B = 1.448 GiB (fit 0.773 at TP 1; range 0.3–3.1): NCCL and the second rank's
    # share of the node are in it
    from kvledger.analyses.doctor.trtllm_startups import trtllm_residual_gib

    assert trtllm_residual_gib(ROWS["TR08"], ROOT) == pytest.approx(1.448, abs=0.002)


def test_bucket_counts_by_engine():
    # TR01–TR08: every check from the printed memory holds (10 of 10); the five KV memories planned from the config
    # alone are within 2 % (TR01 −1.60 %, TR02 −1.73 %, TR03 +0.70 % out of sample, TR06 +0.26 %, TR08 +0.90 %); 12 of
    # the 14 ranged figures lie inside (TR08's runtime buffers and decoder do not)
    trt = [replay_trtllm_row(r, ROOT) for r in ROWS.values()]
    (c,) = bucket_counts(trt, "engine")
    assert (c.key, c.startups, c.within, c.available, c.inside, c.ranged, c.exact, c.from_printed) == (
        "TensorRT-LLM", 8, 5, 5, 12, 14, 10, 10)
    # mean |error| of the five: (1.60 + 1.73 + 0.70 + 0.26 + 0.90) / 5 = 1.04 %
    assert c.mean_abs_error == pytest.approx(0.0104, abs=0.0005)
