"""``kvledger doctor``'s analyses on real posted logs: the start-up comparison with the ledger (arithmetic in comments),
and each diagnosis triggered and not triggered. Logs marked CONSTRUCTED are built from documented line formats
(tests/fixtures/vllm_logs/README.md)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from kvledger.analyses.doctor.capacity import usage_at
from kvledger.analyses.doctor.checks import ImpossibleLogValueError
from kvledger.analyses.doctor.context import build_context
from kvledger.analyses.doctor.diagnose import diagnose, diagnose_file
from kvledger.evidence.vllm_log import UnsupportedLogError, parse_vllm_log, read_vllm_log
from kvledger.units import GiB, MiB

LOGS = Path(__file__).parents[1] / "fixtures" / "vllm_logs"
CONFIGS = Path(__file__).parents[1] / "fixtures" / "configs"


def doc(name: str, **kw):
    return diagnose_file(LOGS / name, **kw)


def test_o6_qwen3_14b_blocks_tokens_concurrency():
    rep = doc("v0.10.2_qwen3-14b_lmcache.log", model=str(CONFIGS / "Qwen3-14B.json"))
    c = rep.startup
    # bytes per block = 16 tokens × 40 layers × 8 KV heads × (128 + 128) × 2 B = 2,621,440 B
    assert c.row("bytes per block").ledger_value == 2_621_440
    # 6.51 GiB = 6,990,059,274 B; / 2,621,440 = 2,666.49 → 2,666 blocks; the log's 42,656 tokens / 16 = 2,666 as well
    b = c.row("GPU blocks")
    assert (b.log_value, b.ledger_value, b.difference) == (2666, 2666, 0)
    # vLLM 0.10.2 prints (n // 1 group) × 16 = 42,656 tokens
    assert (c.row("KV cache size (printed)").log_value, c.row("KV cache size (printed)").ledger_value) == (42656, 42656)
    # R(32,768) = cdiv(32,768, 16) = 2,048 blocks; 2,666 / 2,048 = 1.3018 → printed 1.30x
    r = c.row("max concurrency at 32,768 tokens")
    assert (r.log_value, r.ledger_value) == (1.30, 1.30) and "2,666 / 2,048" in r.explanation
    assert c.consistent is True and c.settings["engine_version"]["value"] == "0.10.2"


def test_v0_rtx3090_blocks_inside_the_printed_rounding_and_terms():
    rep = doc("v0.6.4_llama-3.1-8b_rtx3090_20k.log", model="meta-llama/Llama-3.1-8B-Instruct")
    c = rep.startup
    b = c.row("GPU blocks")
    # ledger: floor(3.81 GiB / 2 MiB) = floor(1,950.72) = 1,950; 3.805–3.815 GiB allows 1,948–1,953 blocks; the log says
    # 1,952
    assert (b.log_value, b.ledger_value) == (1952,
                                             1950) and "1,948–1,953" in b.explanation and "inside" in b.explanation
    # V0: concurrency = n × block_size / L = 1,952 × 16 / 20,000 = 1.5616 → 1.56x
    assert c.row("max concurrency at 20,000 tokens").ledger_value == 1.56
    assert c.consistent is True
    # device total comes from the log (no --gpu), so the ledger uses 23.58 GiB itself
    assert c.row("device total").difference == 0 and "from the log" in c.row("device total").explanation
    # weights: 8,030,261,248 params × 2 B + 33,554,432 B RoPE cache = 16,094,076,928 B = 14.98878 GiB vs the log's
    # 14.9888 "GB"
    w = c.row("weights")
    assert w.ledger_value == 16_094_076_928 and abs(w.difference) < 0.0001 * GiB
    # non-torch: 0.6.4 subtracts all non-torch memory, CUDA context included (worker.py): the ledger's 0.35 GiB is the
    # log's; activation: V0 forward over 20,000 tokens × (3·4,096 + 3·14,336) × 2 B = 2.06 GiB + 0.05 fixed = 2.11
    # vs the log's 17.06 − 14.99 = 2.07
    assert round(c.row("non-torch memory").difference / GiB, 2) == 0.0
    assert round(c.row("activation peak").ledger_value / GiB, 2) == 2.11
    # every term is itemised in this log, so Δavailable = Δrequested − Σ Δterms leaves only rounding
    avail = c.row("available KV memory")
    terms = sum(c.row(t).difference for t in ("weights", "activation peak", "non-torch memory"))
    assert abs(avail.difference - (c.row("requested = total × utilization").difference - terms)) < 0.01 * GiB


def test_v0_start_up_error_agrees_with_the_ledger():
    c = doc("v0.6.4_llama-3.1-8b_rtx3090_29k_too_long.log", model="meta-llama/Llama-3.1-8B-Instruct").startup
    r = c.row("KV capacity (V0 start-up check)")
    # 1,478 blocks × 16 = 23,648 tokens < 29,000: one max_model_len request does not fit, as the log's error says
    assert (r.log_value, r.ledger_value) == (23648, 23648) and "does not fit" in r.explanation


def test_v0_engine_h100_term_by_term_against_the_catalog_gpu():
    c = doc("v0.8-v0engine_llama-2-7b_h100.log", model="meta-llama/Llama-2-7b-hf", gpu="H100").startup
    # device total: catalog 81,090 MiB = 79.19 GiB (what the vLLM 0.19 H100 corpus prints) vs this log's 85,029,615,043
    # B
    # → ledger − log = −587,203 B, 0.00 GiB
    dt = c.row("device total")
    assert dt.ledger_value == 81_090 * MiB and dt.difference == 85_029_027_840 - 85_029_615_043
    # blocks from the log's own 56.18 GiB: floor(56.18 × 1,024 MiB / 8 MiB) = floor(7,191.04) = 7,191 (Llama-2-7b MHA:
    # 16 × 32 layers × 32 heads × 256 × 2 B = 8 MiB per block) — exactly the log's "# cuda blocks: 7191"
    assert c.row("bytes per block").ledger_value == 8 * MiB
    assert (c.row("GPU blocks").log_value, c.row("GPU blocks").ledger_value) == (7191, 7191)
    # the activation model (0.41 GiB for a 4,096-token forward) is the largest difference: 2.38 GiB in the log
    a = c.row("activation peak")
    assert a.log_value == round(2.38 * GiB) and a.difference < -1.9 * GiB
    avail = c.row("available KV memory")
    explained = c.row("requested = total × utilization").difference - sum(
        c.row(t).difference for t in ("weights", "activation peak", "non-torch memory"))
    assert abs(avail.difference - explained) < 0.01 * GiB and "residual" in avail.explanation


def test_early_v1_concurrency_from_printed_blocks_without_a_gpu():
    c = doc("v0.7-v1_llama-3.1-70b-w8a8.log", model="meta-llama/Llama-3.1-70B").startup
    # 1,381 × 16 / 2,048 = 10.789 → 10.79x (the V1 0.7 rule, ledger era v1-0.8); no GPU needed for this check
    r = c.row("max concurrency at 2,048 tokens")
    assert (r.log_value, r.ledger_value) == (10.79, 10.79) and c.consistent is True
    assert c.row("weights").ledger_value is None and "pass --gpu" in c.row("weights").explanation


def test_capacity_triggered_with_options_from_the_ledger():
    # CONSTRUCTED metrics lines (README); start-up figures are the llm-d H100 measurement for Llama-3.1-8B
    f = doc("constructed_v1_preemptions_at_full_kv.log", gpu="H100").finding("capacity")
    assert f.triggered and f.verdict == "capacity_bound_preemptions" and "34 preemption(s)" in f.message  # 9 + 14 + 11
    opts = {o["action"]: o for o in f.options}
    # as logged: 26,306 blocks, 26,305 usable × 16 = 420,880 slots; usage in the 4 full intervals:
    # 0.968×420,880/128 = 3,182.9, 0.996×…/127 = 3,300.8, 0.998×…/126 = 3,333.6, 0.997×…/128 = 3,278.2 → median 3,289.5
    # tokens
    base = opts["as logged"]
    assert (base["num_gpu_blocks"], base["token_slots"], base["max_concurrency"]) == (26306, 420880, 26.31)
    assert base["requests_of_observed_size"] == 127  # 420,880 / 3,289.5 = 127.9
    # fp8: floor(51.38 GiB / 1 MiB) = floor(52,613.1) = 52,613 blocks; 52,612 × 16 / 3,289.5 = 255.9 → 255; 52,613 /
    # 1,000 = 52.61x
    fp8 = opts["--kv-cache-dtype fp8"]
    assert (fp8["num_gpu_blocks"], fp8["requests_of_observed_size"], fp8["max_concurrency"]) == (52613, 255, 52.61)
    # utilization 0.95: + 5% × 85,029,027,840 B = 4,251,451,392 B → (55,168,854,917 + 4,251,451,392) / 2 MiB = 28,333.6
    assert opts["--gpu-memory-utilization 0.95"]["num_gpu_blocks"] == 28333
    # TP 2: the log's budget 55,168,854,917 B moved by the ledger's own change in available KV from its plan as
    # logged (55,187,534,971 B) to `kvledger plan meta-llama/Llama-3.1-8B-Instruct --gpu H100 --max-model-len 16000
    # --engine-version 0.11.0 --tp 2`'s (61,132,373,688 B: weights 16,094,076,928 → 8,066,179,072 B, not exactly
    # half; non-torch memory 139,586,437 → 2,222,645,575 B, NCCL on the NVSwitch board): 55,168,854,917 +
    # 5,944,838,717 = 61,113,693,634 B / 1 MiB (4 KV heads per GPU) = 58,282.6 → 58,282 (the plan itself says 58,300
    # on its own budget; the log's is 18,680,054 B below the ledger's at TP 1, 17.8 blocks of 1 MiB)
    tp2 = opts["--tensor-parallel-size 2"]
    assert (tp2["num_gpu_blocks"], tp2["gpus_per_replica"]) == (58282, 2)
    assert "weights 14.99 → 7.51 GiB, non-torch memory 0.13 → 2.07 GiB; available KV +5.54 GiB" in tp2["detail"]
    assert (
        opts["--max-model-len 8000"]["max_concurrency"] == 52.61
        and opts["--max-model-len 8000"]["num_gpu_blocks"] == 26306
    )
    # --max-num-seqs 127 re-planned: the ledger's activation peak (the sampler's warm-up over max_num_seqs requests)
    # falls 5,104,926,719 → 1,026,765,619 B, so its available KV rises 55,187,534,971 → 59,265,696,071 B (the same
    # `kvledger plan` with --max-num-seqs 127: 28,260 blocks on its own budget); the log's budget moved by that:
    # (55,168,854,917 + 4,078,161,100) / 2 MiB = 28,251.5 → 28,251 blocks, +1,945 on 26,306 = +7.39%
    seqs = opts["--max-num-seqs 127"]
    assert seqs["requests_of_observed_size"] == 127
    assert (seqs["num_gpu_blocks"], seqs["num_gpu_blocks_change"], seqs["num_gpu_blocks_change_pct"]) == (28251, 1945,
                                                                                                          7.39)
    assert [e["line"] for e in f.evidence] == [12, 13, 14]


def test_capacity_v0_swap_preemption_uses_the_usage_trend():
    log = read_vllm_log(LOGS / "v0.6.3_metrics_swap_preemption.log")
    # 86.1% at 11:16:39, rising 12.3 points per 5 s from 73.8%: at 11:16:41 ≈ 86.1 + 12.3 / 5 × 2 = 91.02%
    assert usage_at(log.preemptions[0], log.stats) == pytest.approx(91.02)
    f = diagnose(log).finding("capacity")
    assert f.triggered and f.verdict == "capacity_bound_preemptions" and "91.0%" in f.message
    assert any("pass --model" in n for n in f.notes) and f.options == ()


def test_capacity_recompute_warning_without_usage():
    f = doc("v0.5_recompute_preemption.log").finding("capacity")
    assert f.triggered and any("not enough KV cache space" in n for n in f.notes)


def test_capacity_full_with_queue_but_no_preemption_field():
    f = doc("v0.10_metrics_kv_full_waiting.log").finding("capacity")  # Running 260, Waiting 475, KV 100.0%
    assert (f.triggered, f.verdict) == (True, "capacity_bound_admission") and "475 waiting" in f.message
    # no version printed: 'Preemptions: N' is printed when N > 0 from 0.11.1 and never before, so the log cannot tell
    # none from unseen, and at the 100.0% usage of line 1 growth takes blocks from other running requests
    assert "preemptions cannot show in this log: none printed, and the log's version is not known" in f.message
    # said once, in the message: the notes do not repeat it (a fresh-user trial read it twice)
    assert f.message.count("so none or unseen") == 1 and not any("so none or unseen" in n for n in f.notes)
    assert "at the 100.0% usage of line 1" in f.message


@pytest.mark.parametrize("name", ["v0.10_metrics_kv_near_full.log", "v0-fork_metrics_kv_near_full_no_queue.log",
                                  "v1_metrics_prefill_queue.log"])
def test_capacity_not_triggered(name):
    # KV 93.9–95.8% but nobody waiting and no preemption; or a queue with KV ≤ 65.4%
    f = doc(name).finding("capacity")
    assert (f.triggered, f.verdict) == (False, "kv_not_binding")


def test_capacity_preemptions_below_full():
    # CONSTRUCTED from the V1 loggers.py format: preemptions while the sampled usage stays at 60%
    text = "\n".join(f"INFO 01-01 00:00:{10 * i:02d} [loggers.py:1] Engine 000: Avg prompt throughput: 9000.0 "
                     f"tokens/s, "
                     f"Avg generation throughput: 100.0 tokens/s, Running: 10 reqs, Waiting: 5 reqs, Preemptions: 2, "
                     f"GPU KV cache usage: 60.0%, Prefix cache hit rate: 0.0%" for i in range(3))
    f = diagnose(parse_vllm_log(text)).finding("capacity")
    assert (f.triggered, f.verdict) == (True, "preemptions_below_full") and "max_num_batched_tokens" in f.message


def test_prefix_routing_rule():
    # CONSTRUCTED: one of 4 replicas, hit rate 12.4% (latest line 4) vs 50% shared → 50% ÷ 4 = 12.5%: prefix-blind
    # routing
    f = doc("constructed_v1_four_replicas_low_hit_rate.log", prefix_share=0.5,
            replicas=4).finding("prefix_cache_routing")
    assert (f.triggered, f.verdict) == (True, "prefix_blind_routing") and "12.5%" in f.message
    one = doc("constructed_v1_four_replicas_low_hit_rate.log", prefix_share=0.5).finding("prefix_cache_routing")
    assert (one.triggered, one.verdict) == (True, "single_replica_low_hits")
    # real log: latest hit rate 77.5% ≥ 0.5 × 90% → consistent
    ok = doc("v1_metrics_prefix_hits_rising.log", prefix_share=0.9).finding("prefix_cache_routing")
    assert (ok.triggered, ok.verdict) == (False, "consistent") and "77.5%" in ok.message
    # real log: 0.0% with 60% shared over 4 replicas is below even 60% ÷ 4 × 0.5 = 7.5%
    low = doc("v1_metrics_prefill_queue.log", prefix_share=0.6, replicas=4).finding("prefix_cache_routing")
    assert (low.triggered, low.verdict) == (True, "below_routing_expectation")
    none = doc("v1_metrics_prefill_queue.log").finding("prefix_cache_routing")
    # no traffic share given: the hit rate is printed but not judged, so neither "FOUND" nor "ok"
    assert (none.triggered, none.verdict, none.diagnosed) == (False, "no_expected_share", False)
    assert ok.diagnosed and low.diagnosed
    lm = doc("v0.10.2_qwen3-14b_lmcache.log").finding("prefix_cache_routing")
    assert (lm.verdict, lm.diagnosed) == ("no_hit_rate", False)


def test_prefix_routing_with_a_full_cache_says_capacity_first():
    # CONSTRUCTED: hit rate 11.9% matches 50% ÷ 4, but the last intervals are ≥ 99.6% full
    f = doc("constructed_v1_preemptions_at_full_kv.log", gpu="H100", prefix_share=0.5,
            replicas=4).finding("prefix_cache_routing")
    assert f.verdict == "prefix_blind_routing" and "fix capacity first" in f.message


def test_batching_itl_hurt_by_prefill_real_log():
    f = doc("v1_metrics_mtp_kv_near_full_queue.log").finding("batching_ttft_itl")
    # with prefill: 18/734.9 = 24.49 ms, 21/589.8 = 35.61 ms → median 30.05 ms;
    # without: 18/1,055.3 = 17.06, 18/1,226.3 = 14.68, 20/1,242.7 = 16.09 ms → median 16.09 ms; 30.05 / 16.09 = 1.87× ≥
    # 1.5
    assert (f.triggered, f.verdict) == (True, "itl_hurt_by_prefill")
    assert "30.0 ms" in f.message and "16.1 ms" in f.message and "1.87×" in f.message
    assert any("capacity" in n for n in f.notes)  # part of its queue waits on a ≥ 90% full cache


def test_batching_ttft_prefill_bound_real_log():
    f = doc("v1_metrics_prefill_queue.log", model="meta-llama/Llama-3.1-8B", gpu="H100").finding("batching_ttft_itl")
    # 5 intervals with 90 → 66 waiting, prompt ≈ 24,000 tokens/s (≥ 80% of the peak 24,000.7), KV 19–65%;
    # default budget on an H100 is 8,192 tokens → one full chunk ≈ 8,192 / 23,999.8 = 341 ms
    assert (f.triggered, f.verdict) == (True, "ttft_prefill_bound")
    assert "90→66" in f.message and "≈341 ms" in f.message and "16,384" in f.message


def test_batching_not_triggered_and_tradeoff():
    near_full = doc("v0.10_metrics_kv_near_full.log")
    assert near_full.finding("batching_ttft_itl").verdict == "no_batching_signal"
    # that log has metrics lines, so "no signal" is a judgement (ok), unlike a start-up-only log (not diagnosed)
    assert near_full.finding("batching_ttft_itl").diagnosed and near_full.log_summary["metrics_lines"] == 6
    # CONSTRUCTED: prefill intervals double the implied ITL and the queue sits behind flat-out prefill → trade-off
    rows = [(8000.0, 200.0, 10, 4), (0.0, 500.0, 10, 3), (8000.0, 200.0, 10, 5), (0.0, 500.0, 10, 0), (7900.0, 190.0,
        10, 6),
            (8000.0, 210.0, 10, 7), (7950.0, 205.0, 10, 8)]
    text = "\n".join(f"INFO 01-01 00:0{i}:00 [loggers.py:1] Engine 000: Avg prompt throughput: {p} tokens/s, Avg "
                     f"generation "
                     f"throughput: {g} tokens/s, Running: {r} reqs, Waiting: {w} reqs, GPU KV cache usage: 40.0%, "
                     f"Prefix cache hit rate: 0.0%" for i, (p, g, r, w) in enumerate(rows))
    f = diagnose(parse_vllm_log(text)).finding("batching_ttft_itl")
    assert (f.triggered, f.verdict) == (True, "tradeoff")


def test_context_reads_settings_model_and_tp():
    ctx = build_context(read_vllm_log(LOGS / "constructed_v1_preemptions_at_full_kv.log"))
    # bundled Llama-3.1-8B-Instruct named in the args line
    assert ctx.model is not None and "line 2" in ctx.model_source
    assert ctx.settings["max_model_len"] == 16000 and ctx.gpu is None and ctx.log_blocks[:2] == (26306, 26306)
    ctx = build_context(read_vllm_log(LOGS / "v0.24.0_hybrid_fp8_rtx5090.log"))
    assert ctx.model is None and "not a bundled model" in ctx.model_source
    with pytest.raises(Exception, match="--replicas"):
        build_context(read_vllm_log(LOGS / "v0.14_qwen3-1.7b.log"), replicas=0)


def test_unsupported_engine_and_json():
    with pytest.raises(UnsupportedLogError, match="SGLang"):
        doc("sglang_server.log")
    d = json.loads(json.dumps(doc("v0.10.2_qwen3-14b_lmcache.log", model=str(CONFIGS / "Qwen3-14B.json")).to_dict()))
    assert d["log"]["version"] == "0.10.2" and [f["name"] for f in d["findings"]] == ["capacity",
                                                                                      "prefix_cache_routing",
                                                                                          "batching_ttft_itl"]


def test_one_line_hybrid_tokens_inverted_to_blocks():
    # CONSTRUCTED from docs/engine-model.md §1.11 (worked vector, vLLM 0.33): gpt-oss-20b, 12 sliding (W=128) + 12 full
    # layers, block 16:
    # R(131,072) = 8,192 + cdiv(127 + 2 × 8,192, 16) + 1 = 9,225 blocks; n = 149,358 → C = 16.19x, tokens int(C × L) =
    # 2,122,130
    text = ("(EngineCore pid=9) INFO 01-05 10:00:00 [kv_cache_utils.py:1400] GPU KV cache size: 2,122,130 tokens, "
            "Maximum concurrency for 131,072 tokens per request: 16.19x")
    rep = diagnose(parse_vllm_log(text), model="openai/gpt-oss-20b", gpu="H100")
    c = rep.startup
    assert c.row("GPU blocks").log_value == 149358 and "int(n / R(L) × L)" in c.row("GPU blocks").explanation
    assert "149,358 / 9,225" in c.row("max concurrency at 131,072 tokens").explanation
    assert c.row("KV cache size (printed)").ledger_value == 2122130 and c.consistent is True
    # without a KV budget in the log the block row compares with the ledger's own memory model (H100, 0.92, 0.33 terms):
    # floor(modelled available / 393,216 B per block), 393,216 = 12 layers per group × 16 × 8 heads × 128 × 2 B
    assert c.row("bytes per block").ledger_value == 393_216
    assert c.row("GPU blocks").ledger_value == c.row("available KV memory").ledger_value // 393_216
    assert "memory model" in c.row("GPU blocks").explanation
    # a start-up log with no metrics lines: capacity and batching cannot be judged — "not diagnosed", never "ok"
    assert (rep.finding("capacity").verdict, rep.finding("capacity").diagnosed) == ("no_metrics", False)
    assert rep.log_summary["metrics_lines"] == 0 and not rep.finding("batching_ttft_itl").diagnosed


def test_018_profiling_override_is_not_the_block_count():
    # L1 "Overriding num_gpu_blocks=0 with num_gpu_blocks_override=512" is 0.18's CUDA-graph profiling pass (version
    # inferred from L5's notice): no setting, and no block count of 512 (the log prints none; its model is not named)
    c = doc("v0.18_cudagraph_estimate_override.log").startup
    assert "num_gpu_blocks_override" not in c.settings and c.row("GPU blocks") is None
    assert any(n.startswith("line 1: 'Overriding num_gpu_blocks=0") for n in c.notes)


def test_multi_gpu_pool_below_rank_0s_memory_is_the_smallest_ranks():
    # CONSTRUCTED from vllm-memory-estimator record 88462985 (benchmarks/data/vme_startups.csv V88462985: vLLM
    # 0.13.0+rhai0, Llama-3.3-70B on 4 × MI300X, max_model_len 8,192, utilization 0.92): rank 0 printed 137.30 GiB;
    # 137.295–137.305 GiB hold 112,472–112,480 blocks of 16 × 80 layers × 2 × (8 / 4) heads × 128 × 2 B = 1,310,720 B.
    # The engine printed 1,799,360 tokens = 112,460 blocks: the smallest of the 4 ranks' counts
    # (kv_cache_utils.py::get_kv_cache_configs), below rank 0's by 12–20 blocks, so that rank held 0.0135–0.0247 GiB
    # less, printed 0.014–0.025 (tests/accounting/test_vllm_rank_print.py). 112,460 / 512 blocks per request = 219.65x.
    text = "\n".join([
        "(APIServer pid=1) INFO 12-01 10:00:01 [api_server.py:1] vLLM API server version 0.13.0",
        "(APIServer pid=1) INFO 12-01 10:00:01 [utils.py:1] non-default args: {'model': "
        "'meta-llama/Llama-3.3-70B-Instruct', 'max_model_len': 8192, 'tensor_parallel_size': 4, "
        "'gpu_memory_utilization': 0.92}",
        "(Worker_TP0 pid=11) INFO 12-01 10:05:00 [gpu_worker.py:375] Available KV cache memory: 137.30 GiB",
        "(EngineCore_DP0 pid=9) INFO 12-01 10:05:00 [kv_cache_utils.py:1291] GPU KV cache size: 1,799,360 tokens",
        "(EngineCore_DP0 pid=9) INFO 12-01 10:05:00 [kv_cache_utils.py:1295] Maximum concurrency for 8,192 tokens per "
        "request: 219.65x"])
    c = diagnose(parse_vllm_log(text), model="meta-llama/Meta-Llama-3.1-70B", gpu="MI300X").startup
    b = c.row("GPU blocks")
    assert (b.log_value, b.ledger_value) == (112_460, 112_476)
    assert "inside 1–112,480" in b.explanation and "0.014–0.025 GiB less" in b.explanation
    assert c.row("max concurrency at 8,192 tokens").ledger_value == 219.65 and c.consistent is True
    # The same figures from one GPU cannot be: at TP 1 a block is 4 × 1,310,720 = 5,242,880 B, and the whole
    # 191.98 GiB MI300X holds at most 39,318 of them (629,088 tokens), far below the 1,799,360 printed.
    with pytest.raises(ImpossibleLogValueError, match="more than the whole GPU could hold"):
        diagnose(parse_vllm_log(text.replace("'tensor_parallel_size': 4", "'tensor_parallel_size': 1")),
                 model="meta-llama/Meta-Llama-3.1-70B", gpu="MI300X")


def test_consistent_is_decided_by_each_rows_agrees_not_by_its_words():
    # the RTX 3090 log: ledger 1,950 blocks, the log's 1,952 lies inside the 1,948–1,953 its 2-decimal 3.81 GiB allows
    # (see test_v0_rtx3090_blocks_inside_the_printed_rounding_and_terms), and 1.56x is reproduced exactly
    text = (LOGS / "v0.6.4_llama-3.1-8b_rtx3090_20k.log").read_text()
    c = diagnose(parse_vllm_log(text), model="meta-llama/Llama-3.1-8B-Instruct").startup
    assert c.row("GPU blocks").agrees is True and c.row("GPU blocks").difference == -2
    assert c.row("max concurrency at 20,000 tokens").agrees is True
    assert c.row("weights").agrees is None and c.consistent is True  # a memory term is not a capacity check
    # the JSON keeps every key it had and adds the boolean
    row = json.loads(json.dumps(c.to_dict()))["rows"][0]
    assert list(row) == ["term", "unit", "log_value", "log_line", "ledger_value", "difference", "explanation",
                         "agrees"]
    # 1,960 blocks lie OUTSIDE 1,948–1,953 (the concurrency line changed to match: 1,960 × 16 / 20,000 = 1.568 → 1.57x)
    text = text.replace("GPU blocks: 1952", "GPU blocks: 1960").replace("1.56x", "1.57x")
    c = diagnose(parse_vllm_log(text), model="meta-llama/Llama-3.1-8B-Instruct").startup
    b = c.row("GPU blocks")
    assert "OUTSIDE" in b.explanation and b.agrees is False and c.consistent is False


def test_prefix_caching_off_is_judged_only_against_a_traffic_share(tmp_path):
    # a V1 log whose args turn prefix caching off: with no --prefix-share the finding is "not diagnosed" (nothing to
    # judge the off switch against); with a share of 0.5 it is FOUND (half the prompt tokens repeat, none can hit)
    log = tmp_path / "off.log"
    log.write_text("(APIServer pid=1) INFO 07-02 21:27:25 [utils.py:253] non-default args: {'model': 'm', "
                   "'enable_prefix_caching': False}\n")
    off = diagnose_file(log).finding("prefix_cache_routing")
    assert (off.verdict, off.triggered, off.diagnosed) == ("prefix_caching_off", False, False)
    shared = diagnose_file(log, prefix_share=0.5).finding("prefix_cache_routing")
    assert (shared.triggered, shared.diagnosed) == (True, True)


def test_a_hit_rate_from_an_interval_without_prefill_is_not_called_one_with_prefill():
    # v0.10_metrics_kv_full_waiting.log: line 1 prints "Avg prompt throughput: 0.0 tokens/s" and a 0.2% hit rate, and
    # no interval shows prefill: the rate is quoted from "the latest interval that prints it"
    f = doc("v0.10_metrics_kv_full_waiting.log").finding("prefix_cache_routing")
    assert "0.2% in the latest interval that prints it (no interval shows prefill) (line 1" in f.message



def test_a_gpu_that_contradicts_the_log_is_named_first():
    # an RTX 3090 log (device total 23.58 GiB) checked with --gpu H100 (79.19 GiB): the ledger's KV is 50 GiB off, and
    # the summary names the device before any term
    rep = doc("v0.6.4_llama-3.1-8b_rtx3090_20k.log", model="meta-llama/Llama-3.1-8B", gpu="H100")
    assert ("first of all the device: the log's total is 23.58 GiB, the planned GPU's 79.19 GiB — not the device that "
            "ran (another card than --gpu names, or a slice or variant of it)") in rep.startup.memory_miss


def test_the_pool_sentence_names_the_null_block():
    # the constructed log's pool: 26,306 blocks printed as 420,896 tokens (26,306 × 16); vLLM V1's null block holds no
    # token, so 26,305 × 16 = 420,880 slots, and the sentence says why the two differ by 16
    f = doc("constructed_v1_preemptions_at_full_kv.log").finding("capacity")
    assert ("The pool is 26,306 blocks (420,880 token slots; the 1 null block vLLM counts in its printed size holds "
            "none)") in f.message


def _relabelled(version: str):
    """The bundled 0.19.0 Llama-3.1-8B H100 start-up with its two version lines relabelled ``version`` (constructed)."""
    text = (Path(__file__).resolve().parents[1] / "fixtures" / "vllm_startups_0_19" / "logs" /
            "meta-llama-llama-3-1-8b---h100-80gb--tp1pp1dp1--8192.log").read_text(encoding="utf-8")
    return parse_vllm_log(text.replace("version 0.19.0", f"version {version}").replace("(v0.19.0)", f"(v{version})"))


def test_a_profiling_override_line_in_a_log_labelled_020_is_not_the_pool():
    # line 43 'Overriding num_gpu_blocks=0 with num_gpu_blocks_override=512' is 0.19's profiling pass; relabelled
    # 0.20 it is no longer the profiling pass by version, but a computed count of 0 never sets the pool, so the GPU
    # blocks come from the printed 'GPU KV cache size: 476,016 tokens' (line 54) = 29,751 blocks × 16 tokens,
    # as on the unedited log, not 512
    rep = diagnose(_relabelled("0.20.0"))
    assert "num_gpu_blocks_override" not in rep.startup.settings
    assert rep.startup.row("GPU blocks").log_value == 29751 and rep.startup.consistent
    assert any(n.startswith("line 43: 'Overriding num_gpu_blocks=0") for n in rep.startup.notes)


def test_a_log_newer_than_the_newest_release_read_says_so_as_plan_does():
    from kvledger.accounting.notes import vllm_newer_than_read
    from kvledger.accounting.vllm_rules import LATEST

    major, minor, _ = LATEST.split(".")
    newer = f"{major}.{int(minor) + 1}.0"  # one minor release past the newest read
    note = vllm_newer_than_read(newer, LATEST)
    assert note in diagnose(_relabelled(newer)).notes
    assert not any("newer than" in n for n in diagnose(_relabelled("0.19.0")).notes)


def test_a_logs_online_fp8_is_planned_as_vllm_loads_it_not_warned_as_unmodelled():
    # Llama-3.1-70B-Instruct-FP8 on 4 H100s, vLLM 0.19.0 (quantization=fp8, line 25; "Loading weights took 16.95 GiB",
    # line 264), doctored with the unquantized 70B config: vLLM quantizes its linear weights to FP8 on load, so the
    # ledger plans quantization=fp8 as `kvledger plan -q fp8` (70,553,706,496 params: linear weights 1 B + scales,
    # embeddings and norms 2 B, over TP 4) and gives the log's 16.95 GiB, not the 32.89 GiB of bf16 weights it gave
    # when the warning said doctor "does not model" on-load FP8.
    rep = doc("sre_trial_v0.19_llama70b_fp8_tp4_base.log", model="meta-llama/Llama-3.1-70B", gpu="H100")
    weights = rep.startup.row("weights")
    assert round(weights.log_value / GiB, 2) == round(weights.ledger_value / GiB, 2) == 16.95
    assert rep.startup.settings["quantization"] == {"value": "fp8", "source": "log line 25"}
    assert not any("does not model" in w or "weight quantization" in w for w in rep.warnings)
