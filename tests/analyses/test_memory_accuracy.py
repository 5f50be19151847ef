"""Every vLLM 0.19 start-up of the corpus that kvledger can read, replayed: available KV within 2% of the log."""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from kvledger.analyses.doctor.memory_accuracy import exact_from_logged, replay
from kvledger.analyses.doctor.public_startups import (
    SMALLEST_NOT_PRINTED,
    flag_settings,
    load_rows,
    rank_status,
    replay_row,
)

D = Path(__file__).parents[1] / "fixtures" / "vllm_startups_0_19"
ORACLE = Path(__file__).parents[2] / "benchmarks" / "data" / "oracle_configs"
# transformers' default GemmaConfig / Qwen2MoeConfig, documented as gemma-7b's and Qwen1.5-MoE-A2.7B's (no config of
# theirs here)
STANDINS = {"google/gemma-7b": ORACLE / "gemma.json", "Qwen/Qwen1.5-MoE-A2.7B": ORACLE / "qwen2_moe.json"}
ROWS = list(csv.DictReader((D / "startups_trimmed.csv").open()))
REPLAYS = {r["log_file"]: replay(r, D / "configs", standins=STANDINS) for r in ROWS}


def test_every_start_up_that_ran_is_replayed_at_tp_1_2_4_and_pp_2_4():
    # 34 of the 40: the 6 others failed to start. CodeLlama-7b and phi-2 are read from the bundled catalog, the 4
    # RedHatAI quantized checkpoints from their base release's config with the reconstructed quantization_config,
    # gemma-7b and Qwen1.5-MoE from transformers' default configs of their architectures.
    done = [x for x in REPLAYS.values() if not x.skipped]
    shapes = {(r["tp"], r["pp"]) for r in ROWS if not REPLAYS[r["log_file"]].skipped}
    assert {r["model"] for r in ROWS if not REPLAYS[r["log_file"]].skipped} >= {
        "codellama/CodeLlama-7b-hf", "microsoft/phi-2", "google/gemma-7b", "Qwen/Qwen1.5-MoE-A2.7B",
        "RedHatAI/Meta-Llama-3.1-8B-Instruct-quantized.w4a16", "RedHatAI/Qwen2.5-7B-Instruct-fp8-dynamic"}
    assert len(done) == 34 and all(x.skipped == "start-up failed" for x in REPLAYS.values() if x.skipped)
    assert {("1", "1"), ("2", "1"), ("4", "1"), ("1", "2"), ("1", "4")} <= shapes


@pytest.mark.parametrize("row", [r for r in ROWS if not REPLAYS[r["log_file"]].skipped],
                         ids=lambda r: r["log_file"][:60])
def test_available_kv_within_2_percent(row):
    x = REPLAYS[row["log_file"]]
    t = x.term("available KV")
    assert abs(t.rel_error) < 0.02, (x.label, t)
    # the profile terms alone (weights taken as logged) hold too
    assert abs(t.error + x.term("weights").error) / t.logged < 0.02


def test_binding_stage_of_pp_runs_is_the_last():
    x = next(v for v in REPLAYS.values() if "PP4" in v.label)
    # PP3: requested 75.23 − non-KV 6.34 = 68.89 GiB (the log's 2,257,264 tokens = 141,079 blocks of 0.5 MiB);
    # predicted 75.23 − 4.26 − 2.013 − 0.07 = 68.89.
    assert x.rank == "Worker_PP3" and x.term("available KV").predicted == pytest.approx(68.89, abs=0.01)


@pytest.mark.parametrize("row", [r for r in ROWS if r["status"] == "ok"], ids=lambda r: r["log_file"][:60])
def test_blocks_tokens_and_concurrency_exact_from_the_logged_memory(row):
    e = exact_from_logged(row, D / "configs", STANDINS)
    if e is None:
        return
    lo, hi = e["blocks_range"]
    assert lo <= e["logged_blocks"] <= hi
    assert (e["tokens"], e["concurrency"]) == (e["logged_tokens"], e["logged_concurrency"])


PUBLIC_ROWS = load_rows(Path(__file__).resolve().parents[2] / "benchmarks" / "data" / "vllm_public_startups.csv")
PUBLIC = {r["id"]: replay_row(r, Path(__file__).resolve().parents[2]) for r in PUBLIC_ROWS}


def test_every_public_startup_figure_lies_in_the_printed_range():
    # benchmarks/data/vllm_public_startups.csv: each printed figure (term, available KV, blocks, tokens, concurrency)
    # must fall in the plan's low–high for its version, GPU and topology.
    terms = [(k, t) for k, x in PUBLIC.items() for t in x.terms]
    assert len(terms) >= 18 and all(t.inside for _, t in terms), [(k, t) for k, t in terms if not t.inside]


def test_rtx3090_v0_startup_predicted_within_1_percent():
    # vllm#10517: Llama-3.1-8B-Instruct on an RTX 3090 (23.58 GiB), V0 0.6.4 (its "Memory profiling results:" line),
    # util 0.9, max_model_len 20,000: printed peak_torch_memory 17.06 GiB (weights 14.99 + 2.07 activation),
    # non_torch_memory 0.35, 3.81 GiB, 1,952 blocks, 1.56x. No chunked prefill below 32K, so the profile forward runs
    # 20,000 tokens; V0 holds 3 hidden copies (norms in place): 20,000 × (3·4,096 + 3·14,336) × 2 B = 2.06 GiB + 0.05
    # fixed = 2.11; 0.6.4 subtracts all non-torch memory (0.35, CUDA context included);
    # 23.58 × 0.9 − 14.99 − 2.11 − 0.35 = 3.77 GiB (−1.0%).
    x = PUBLIC["P01"]
    avail = next(t for t in x.terms if t.term == "available KV")
    assert abs(avail.rel_error) < 0.01 and avail.predicted == pytest.approx(3.77, abs=0.01)


def test_hybrid_tokens_line_inverted_by_the_versions_rule():
    # dennislee22/vLLM-benchmarking, gpt-oss-120b at TP 4 on vLLM 0.10.1.1: "GPU KV cache size: 2,640,144 tokens" and
    # the API server's "num_gpu_blocks is: 330018". 0.10 prints (blocks // 2 groups) × 16: 330,018 // 2 × 16 =
    # 2,640,144, so the printed tokens hold 2,640,144 / 16 × 2 = 330,018 blocks (not 165,009), inside the range
    # 45.32 GiB allows, and the printed 284.25x follows from them.
    blocks, conc = (next(t for t in PUBLIC["P30"].from_printed if t.term.startswith(w)) for w in ("blocks", "conc"))
    assert blocks.printed == 330_018 and blocks.inside
    assert conc.predicted == conc.printed == 284.25


def test_public_rows_printed_from_memory_are_exact():
    # LMCache#1739 (0.10.2): 6.51 GiB printed → 42,656 tokens, 1.30x, exactly as the plan prints them.
    toks = next(t for t in PUBLIC["P07"].terms if t.term == "KV tokens")
    assert toks.predicted == toks.printed == 42_656


VME_ROWS = {r["id"]: r for r in load_rows(Path(__file__).resolve().parents[2] / "benchmarks" / "data"
                                          / "vme_startups.csv")}


def test_launch_flags_become_plan_settings():
    # "kv-cache-dtype=fp8;enable-expert-parallel;enforce-eager" → three plan settings (expert parallelism is `plan
    # --enable-expert-parallel`: without it an FP8 Qwen3-235B at TP 8 cannot start, 1,536 / 8 = 192 not a multiple of
    # the 128 block); checkpoint-quantization is recorded for the reader only.
    assert flag_settings("kv-cache-dtype=fp8;enable-expert-parallel;enforce-eager;checkpoint-quantization=fp8") == {
        "kv_cache_dtype": "fp8", "enable_expert_parallel": True, "enforce_eager": True}
    assert flag_settings("distributed-executor-backend=ray;nnodes=2") == {"distributed_executor_backend": "ray",
                                                                         "nnodes": 2}


def test_vme_h200_tp4_startup_exact_from_printed_memory():
    # vllm-memory-estimator record 18297adf (vLLM 0.18.0, Llama-3.3-70B on 4 × H200, max_model_len 8,192): printed
    # 91.58 GiB, 1,200,400 tokens, 146.53x. Per rank a block is 80 layers × 2 × (8/4 KV heads) × 128 × 2 B × 16 tokens
    # = 1,310,720 B, so 91.575–91.585 GiB allows blocks 75,018–75,026; the printed tokens are 75,025 blocks; and
    # 75,025 / (8,192 / 16) = 146.53 requests.
    x = replay_row(VME_ROWS["V18297adf"], Path(__file__).resolve().parents[2])
    blocks, conc = x.from_printed
    assert (blocks.printed, blocks.low, blocks.high, blocks.inside) == (75_025, 75_018, 75_026, True)
    assert conc.predicted == conc.printed == 146.53
    assert blocks.rank_spread is None


def test_vme_mi300x_tp8_pool_is_the_smallest_ranks():
    # vme record 5f389286 (vLLM 0.11.2+rhai1, DeepSeek-R1-0528 on 8 × MI300X, max_model_len 10,000): rank 0 printed
    # 87.09 GiB, which holds 83,165–83,174 blocks of 16 × 61 × 576 × 2 B = 1,124,352 B; the engine printed 1,324,304
    # tokens = 82,769 blocks, the smallest of the 8 ranks' counts (0.11.2 kv_cache_utils.py::get_kv_cache_configs),
    # which only that rank's memory (never printed in 0.11.2) would pin: 0.4137–0.4247 GiB less than rank 0's.
    # The concurrency follows from the printed tokens either way: 82,769 blocks × 16 / 10,000 = 132.43.
    x = replay_row(VME_ROWS["V5f389286"], Path(__file__).resolve().parents[2])
    blocks, conc = x.from_printed
    assert (blocks.printed, blocks.low, blocks.high, blocks.inside) == (82_769, 83_165, 83_174, False)
    assert blocks.rank_spread is not None
    assert (round(blocks.rank_spread[0], 4), round(blocks.rank_spread[1], 4)) == (0.4137, 0.4247)
    assert blocks.rank_status == SMALLEST_NOT_PRINTED  # the record keeps one rank's line (rank_memory)
    assert conc.predicted == conc.printed == 132.43


def test_vme_multi_gpu_rows_record_that_one_rank_is_printed():
    # validation_db.json keeps one "Available KV cache memory" figure per record (the first line of the log), so every
    # multi-GPU row says so and none gives the smallest rank's figure; one-GPU rows leave both columns empty.
    for r in VME_ROWS.values():
        multi = int(r["tp"]) > 1
        assert r["rank_memory"].startswith("one rank") == multi and r["available_kv_gib_min_rank"] == ""


def test_smallest_rank_figure_makes_the_row_exact_or_a_miss():
    # V5f389286 again, with the smallest rank's line given (CONSTRUCTED: the source has none). 86.67 GiB: 86.665 GiB
    # = 93,055,835,177 B (rounded up) to 86.675 GiB − 1 B = 93,066,572,595 B hold 82,763–82,773 blocks of 1,124,352 B;
    # the printed 1,324,304 tokens / 16 = 82,769 lie inside: exact, no spread. 86.66 GiB holds 82,754–82,763, below
    # the printed count: a genuine miss (the pool cannot exceed the smallest rank's), not "smallest rank".
    base = VME_ROWS["V5f389286"]
    root = Path(__file__).resolve().parents[2]
    x = replay_row(base | {"available_kv_gib_min_rank": "86.67"}, root)
    blocks = x.from_printed[0]
    assert (blocks.low, blocks.high, blocks.inside, blocks.rank_status, blocks.rank_spread) == (
        82_763, 82_773, True, "exact", None)
    blocks = replay_row(base | {"available_kv_gib_min_rank": "86.66"}, root).from_printed[0]
    assert (blocks.low, blocks.high, blocks.inside, blocks.rank_status) == (82_754, 82_763, False, "miss")


def test_below_range_is_a_miss_unless_the_row_says_one_rank_was_printed():
    # The same figures without the row's note that the source kept one rank's line: counted as a miss, not explained.
    root = Path(__file__).resolve().parents[2]
    blocks = replay_row(VME_ROWS["V5f389286"] | {"rank_memory": ""}, root).from_printed[0]
    assert (blocks.rank_status, blocks.rank_spread) == ("miss", None)
    # rank_status itself: the verdicts of vllm_rank_print.check_printed_pool, the row's two columns.
    assert rank_status("exact", False, "") == "exact"
    assert rank_status("smallest rank", False, "one rank: …") == SMALLEST_NOT_PRINTED
    assert rank_status("smallest rank", True, "one rank: …") == "miss"
    assert rank_status("miss", False, "one rank: …") == "miss"


def test_ray_two_node_pp_startup_planned_on_its_binding_stage():
    # rwood-97/multi_node_inference (P15): vLLM 0.10.1 dev, Ray over 2 GH200 nodes, TP 4 × PP 2, Qwen3-30B-A3B-2507
    # at 262,144 tokens, 16,384 batched tokens and 1,024 sequences (the LLM class defaults). The last stage binds:
    # budget 0.9 × 95.14 GiB (GH200 nvidia-smi 97,871 − 450 MiB = 97,421 MiB) = 85.62; weights 7.33 (24 layers a
    # stage, and the embedding and LM head on both stages: qwen3_moe.py builds them everywhere; 7.3272 printed);
    # activation 5.74 (sort sampler 1,024 × 151,936 × 37.95 B = 5.50 GiB + hidden 16,384 × 2,048 × 2 B = 0.06 + PP
    # hidden and residual 0.13 + 0.05 fixed); non-torch 2.13 + 0.016 (custom all-reduce on: each TP group sits in one
    # node, ceil(2 / 2) = 1; 0.10.1 counts its meta + buffer, 2 × 8 MiB, as its init snapshot precedes the TP set-up)
    # + NCCL's start-up in the same window (vllm_nccl_init.py: NCCL 2.26 connects the ring at the warm-up, 16 channels
    # × 9.1875 MiB = 147 MiB = 0.1436 GiB). 70.432 − 0.016 − 0.144 = 70.273 GiB against 70.58 printed (−0.44%; was
    # 70.416, −0.23%, before the NCCL term); 24 of 48 layers × 1 KV head × 128 × 2 × 2 B = 12,288 B a token.
    x = PUBLIC["P15"]
    avail = next(t for t in x.terms if t.term == "available KV")
    assert avail.predicted == pytest.approx(70.273, abs=0.005) and avail.inside and abs(avail.rel_error) < 0.005
    weights = next(t for t in x.terms if t.term == "weights")
    assert weights.predicted == pytest.approx(7.325, abs=0.001) and weights.inside
    assert x.topology == "TP4 PP2 NVLink all-to-all"


def test_ray_tp2_rocm_startups_within_half_a_percent():
    # ROCm blogs (P16 vLLM 0.9.2 dev, P17 0.11.1 dev): DeepSeek-R1-Distill-Qwen-14B, TP 2 under Ray, 4,096 tokens:
    # 0.9 × 191.98 GiB (HIP's total, gpu_cuda.csv) = 172.79; weights 13.95 (computed); activation 5.63 (sampler 1,024 ×
    # 152,064 × 37.95 B = 5.50 + 8,192 × 5,120 × 2 B = 0.08 + 0.05); MI300X non-torch at TP 2 1.42 (log2 between TP 1
    # and 4) → 151.78 GiB, against 151.25 and 152.07 printed (the two builds bracket the point). 0.9.2 also counts
    # custom all-reduce's meta + buffer (on: gfx942; its snapshot precedes the TP set-up): 2 × 8 MiB = 0.016 GiB less,
    # 151.767.
    for rid, printed, planned in (("P16", 151.25, 151.767), ("P17", 152.07, 151.783)):
        avail = next(t for t in PUBLIC[rid].terms if t.term == "available KV")
        assert avail.printed == printed and avail.predicted == pytest.approx(planned, abs=0.005) and avail.inside
