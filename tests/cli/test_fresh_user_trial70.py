"""What a fresh user's trial found: two short plans past 26 lines at 80 columns (gpt-oss-120b at TP 8, whose verdict
said the sliding-window clause its concurrency line had just said; Llama-3.1-405B under SGLang at TP 8, whose title
explained an empty max_running_requests at length)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cli_run import MODEL, cli_json, refused, run_cli

GPT_OSS_120B = "src/kvledger/catalog/data/models/openai--gpt-oss-120b.json"  # the bundled config, by its path


def _short(*args: str) -> tuple[list[str], str]:
    """The short plan's stdout lines at 80 columns, and the whole of it on one line (the words as wrapped)."""
    res = run_cli("plan", *args, columns=80)
    assert res.exit_code in (0, 3), res.output
    return res.stdout.splitlines(), " ".join(res.stdout.split())


@pytest.mark.parametrize("model", [GPT_OSS_120B, "openai/gpt-oss-120b"])
@pytest.mark.parametrize("gpu", ["H100", "H200"])
def test_gpt_oss_120b_tp8_short_plan_says_the_window_once(model, gpu):
    # the config file's path makes the title 3 lines (the repo id 2): 28 and 27 lines before, on H100
    lines, flat = _short(model, "--gpu", gpu, "--tp", "8")
    assert len(lines) <= 26 and max(len(line) for line in lines) <= 80, "\n".join(lines)
    assert flat.count("sliding layers hold ≤ 128 tokens + a block") == 1  # the concurrency line's, not the verdict's
    if gpu == "H100":
        # 852,538 blocks of 16 tokens (852,537 usable: vLLM's null block). At 131,072 tokens a request counts 8,192
        # full-attention blocks + 1,033 sliding ones at start-up (its window plus the tokens in flight): 9,225 →
        # 852,538 / 9,225 = 92.42x, 852,537 // 9,225 = 92; while decoding 8,192 + (128 / 16 + 1 block) = 8,201 →
        # 852,537 // 8,201 = 103. The range's low end, 89.15x, holds 89.
        assert ("fits: 92 concurrent 131,072-token requests at start-up (92.42x — the range's low end holds 89.15x, so "
                "as few as 89); ≈103 at once while decoding") in flat
        # the cap said once, with its contexts; each ≈ figure on its row: 852,537 // (128 + 9) = 6,222 at 2,048 tokens
        assert "max_num_seqs = 1,024 still caps what runs while decoding at 2,048 and 8,192 tokens" in flat
        # the short plan: the rows' ≈ figures in one list (852,537 // (2,048 + 9) = 414 at 32,768 tokens); each on its
        # row under --verbose
        assert "2,048 tokens: 3,317 requests (3,317.27x, range 3,200.15–3,446.00x);" in flat
        assert "≈6,222/1,636/414/103 at once while decoding (sliding layers hold ≤ 128 tokens + a block)" in flat
        full = " ".join(run_cli("plan", model, "--gpu", gpu, "--tp", "8", "--verbose").stdout.split())
        assert ("at vLLM's start-up check (the engine's printed 92.42x — the range's low end holds 89.15x, so as few "
                "as 89); ≈103 at once while decoding (sliding layers hold ≤ 128 tokens + a block)") in full
        assert "at 2,048 tokens (≈6,222 would fit) and 8,192 tokens (≈1,636 would fit)" in full
        assert "2,048 tokens: 3,317 requests (3,317.27x, range 3,200.15–3,446.00x), ≈6,222 while decoding;" in full


def test_llama_405b_sglang_tp8_short_plan_within_26_lines():
    # 405.9e9 parameters × 2 B ÷ TP 8 = 94.50 GiB of weights a GPU against SGLang's 76.52 GiB free before the load:
    # no KV pool, so SGLang's max_running_requests (min(…, pool tokens // 2)) is 0, said in the title; 27 lines before
    lines, flat = _short("meta-llama/Llama-3.1-405B", "--engine", "sglang", "--tp", "8", "--gpu", "H100")
    assert len(lines) <= 26 and max(len(line) for line in lines) <= 80, "\n".join(lines)
    assert "max_running_requests — (sized from the KV pool, which is empty), cuda_graph_max_bs 512" in flat
    assert "weights 94.50 GiB (94.41–94.74), no memory left for the KV cache (short by 32.50 GiB" in flat
    assert "  → --gpu h200-sxm: 3 concurrent 131,072-token requests (3.55x)" in lines
    full = " ".join(run_cli("plan", "meta-llama/Llama-3.1-405B", "--engine", "sglang", "--tp", "8", "--gpu", "H100",
                            "--verbose").stdout.split())
    assert "max_running_requests — (SGLang sizes max_running_requests from the KV pool, which is empty)" in full


AIPERF = Path(__file__).resolve().parents[1] / "fixtures" / "bench_public" / "aiperf_0_11_profile_export_aiperf.json"


def test_goodput_target_on_one_file_asks_for_a_sweep():
    # AIPerf's concurrency_16 export: one closed-loop run with no request rate. --target looks for the largest rate
    # that meets the target, which one run at one load cannot show: the refusal says so, not "no finite request_rate"
    msg = refused("goodput", str(AIPERF), "--slo", "ttft=1s", "--target", "0.9")
    assert msg == (f"{AIPERF}: one run: a capacity search over measured files needs a "
                   "sweep, several runs at different request rates (their files together, or one file holding the "
                   "sweep); or search by simulation: --simulate MODEL --gpu GPU")
    # the same file without --target is one run's goodput: all 200 requests have TTFT ≤ 900 ms (its max), so 100 %
    assert cli_json("goodput", str(AIPERF), "--slo", "ttft=1s")["attainment"] == 1.0


@pytest.mark.parametrize("value, said", [
    ("0", "--context-length: '0' must be a whole, positive number of tokens"),
    ("abc", "--context-length: cannot read 'abc' as a token count"),
    ("32.5K", "--context-length: '32.5K': vLLM refuses a decimal with a binary suffix (K = 1,024)"),
    # 2T = 2 × 2^40 tokens, above the settings' bound of 2^26 = 67,108,864
    ("2T", "--context-length 2T is out of range; allowed: [1, 67,108,864] tokens"),
])
def test_a_bad_context_length_is_named_as_typed(value, said):
    for cmd in (("plan", MODEL, "--gpu", "H100-SXM"), ("simulate", MODEL, "--gpu", "H100-SXM", "--rate", "1")):
        msg = refused(*cmd, "--engine", "sglang", "--context-length", value)
        assert msg.startswith(said) and "--max-model-len" not in msg, msg
    msg = refused("plan", MODEL, "--gpu", "H100-SXM", "--engine", "sglang", "--chunked-prefill-size", "0")
    assert msg == "--chunked-prefill-size: '0' must be a whole, positive number of tokens"


def test_a_context_length_past_the_model_names_sglangs_flag():
    # Llama-3.1-8B's config: max_position_embeddings 131,072; 1M = 1,048,576 tokens
    msg = refused("plan", MODEL, "--gpu", "H100-SXM", "--engine", "sglang", "--context-length", "1M")
    assert msg.startswith("--context-length (--max-model-len) 1,048,576 exceeds the 131,072 tokens")
    # a good count reads as before: 32K = 32,768 under either spelling
    assert cli_json("plan", MODEL, "--gpu", "H100-SXM", "--engine", "sglang", "--context-length", "32K")[
        "memory"]["max_model_len"] == 32768


def test_round_robin_typed_with_one_replica_is_said_to_do_nothing():
    note = ("--router round_robin: one replica (--replicas 1), so every request goes to it and the router does "
            "nothing; --replicas N (N ≥ 2) puts it to work")
    args = ("simulate", MODEL, "--gpu", "H100-SXM", "--rate", "2", "--num-requests", "50")
    typed = cli_json(*args, "--router", "round_robin")
    assert note in typed["notes"] and typed["summary"]["num_finished"] == 50  # all 50 served, by the one replica
    assert not any(n.startswith("--router") for n in cli_json(*args)["notes"])  # the default, untyped: no note
    two = cli_json(*args, "--router", "round_robin", "--replicas", "2")  # two replicas: the router routes
    assert not any(n.startswith("--router") for n in two["notes"]) and two["replicas"] == 2
    # the run is the same whether the default is typed or not: 50 requests, one replica, the same mean TTFT
    assert typed["summary"]["ttft_s"] == cli_json(*args)["summary"]["ttft_s"]


def test_search_says_up_front_how_much_it_will_simulate():
    # Llama-3.2-3B on L4 and H100 at TP 1: two candidates planned, neither settled by its plan or bounds, so both are
    # simulated; each probe a run of the 60 requests asked; the operating points at 25, 50 and 75 % of the capacity
    res = run_cli("search", "meta-llama/Llama-3.2-3B", "--slo", "ttft=2s,tpot=100ms", "--gpus", "L4,H100", "--tp", "1",
                  "--max-model-len", "8K", "--num-requests", "60", "--utilization", "0.5", "--backend", "serial",
                  "--json")
    assert res.exit_code == 0, res.output
    assert len(json.loads(res.stdout)["candidates"]) == 2  # stdout: the document alone
    assert res.stderr.splitlines()[0] == (
        "search: 2 of 2 candidates to simulate; each a capacity search: one simulation of 60 requests per probed rate "
        "(doubling to a bracket, then bisecting to 1 %), then 3 operating points at 25/50/75 % of the capacity found")


def test_search_of_sessions_names_them_per_probe():
    # --workload agent: each probe simulates at least --sessions 20 agent sessions; said before the first simulation
    res = run_cli("search", "meta-llama/Llama-3.2-3B", "--slo", "ttft=2s,tpot=100ms", "--gpus", "H100", "--tp", "1",
                  "--workload", "agent", "--sessions", "20", "--utilization", "0.5", "--backend", "serial", "--json")
    assert res.stderr.splitlines()[0].startswith(
        "search: 1 of 1 candidate to simulate; each a capacity search: one simulation of ≥ 20 agent sessions per "
        "probed rate"), res.stderr
    assert "search:" not in res.stdout


def _stage(tmp_path, rate: float, n: int, e2e) -> str:
    """A per-request run of ``n`` requests sent 1/``rate`` s apart (500 prompt, 200 output tokens, TTFT 0.2 s), the
    i-th finishing ``e2e(i)`` s after it arrived, Llama-3.1-8B on one H100 at ``rate`` req/s; its records file."""
    from kvledger.evidence import write_records
    from kvledger.records import RequestRecord, RunMetadata, RunRecords

    recs = [RequestRecord(f"r{i}", i / rate, 500, 200, i / rate + 0.2, i / rate + e2e(i)) for i in range(n)]
    meta = RunMetadata("bench", "kvledger-records", model="meta-llama/Llama-3.1-8B", hardware="NVIDIA H100 80GB SXM5",
                       num_gpus=1, request_rate=rate)
    return str(write_records(RunRecords(recs, meta), tmp_path / f"rate{rate:g}" / "records.json"))


def test_validate_sweep_allows_the_drain_as_goodput_does(tmp_path):
    # 2 req/s: 20 requests over 9.5 s of arrivals, each E2E 4 s: the last finishes at 13.5 s, 20 ÷ 13.5 = 1.481 req/s
    # served, 74% of 2 (the plain share called it saturated). A server keeping up completes 20 ÷ (20/2 + 4) = 1.429
    # req/s (the first quarter's median E2E, 4 s, is the drain): 1.481 ÷ 1.429 = 104%, kept up. 4 req/s: 20 ÷ 8.75 =
    # 2.286 served (57%), 20 ÷ (5 + 4) = 2.222 kept up: 103%. 8 req/s: 40 requests whose E2E grows 1 + 0.5 i s: the
    # first quarter's median 3.25 s, 40 ÷ (5 + 3.25) = 4.848 req/s kept up; served 40 ÷ 25.375 = 1.576: 32.5%, behind
    files = [_stage(tmp_path, 2.0, 20, lambda i: 4.0), _stage(tmp_path, 4.0, 20, lambda i: 4.0),
             _stage(tmp_path, 8.0, 40, lambda i: 1.0 + 0.5 * i)]
    d = cli_json("validate", "--sweep", *files, "--gpu", "H100")
    bands = d["error_bands"]
    # latency bands where the stage kept up (as goodput and cost judge it), none on the stage that fell behind
    assert [b is not None for b in bands["ttft_mean"]] == [True, True, False]
    assert [r["saturated"] is None for r in d["runs"]] == [True, True, False]
    assert round(bands["saturation_throughput"]["measured"], 3) == 2.286  # the largest served: 20 ÷ 8.75


def test_the_stage_rule_is_the_fell_behind_function():
    from kvledger.calibration.sweep import Stage
    from kvledger.calibration.sweep_bands import below_saturation, stage_saturation_words
    from kvledger.ledgers.fell_behind import fell_behind

    # the 2 req/s stage above, as its record gives it: 20 requests, 1.481 served, a 4 s typical E2E
    st = Stage("s", 2.0, 20, 9.5, {}, [], [], 20 / 13.5, 0.0, 0, 2.0, typical_e2e_s=4.0)
    assert below_saturation(st) and fell_behind(2.0, 20 / 13.5, num_requests=20, drain_s=4.0) is None
    slow = Stage("s", 2.0, 20, 9.5, {}, [], [], 1.2, 0.0, 0, 2.0, typical_e2e_s=4.0)  # 1.2 ÷ 1.429 = 84% < 90%
    assert not below_saturation(slow)
    assert stage_saturation_words(slow) == (
        "stage was at saturation (client achieved 2 and engine served 1.2 of 2 req/s requested; a server keeping up "
        "completes 1.429 req/s: its 20 requests arrive over 10 s, then a typical E2E of 4 s; below it needs ≥ 95% and "
        "≥ 90% of that)")
    # aggregates (no typical E2E): the plain share, 1.481 ÷ 2 = 74%, as before
    assert not below_saturation(Stage("s", 2.0, 20, 9.5, {}, [], [], 20 / 13.5, 0.0, 0, 2.0))


def test_kimi_k2_tp8_on_h200_short_plan_within_26_lines():
    # found sweeping the large models × vLLM/SGLang × TP 4/8 × H100/H200: 29 lines. 344 blocks of 16 tokens (343
    # usable: vLLM's null block); one 131,072-token request needs 131,072 ÷ 16 = 8,192 blocks; vLLM's estimate 343 ×
    # 16 = 5,488 tokens is the fix below, so the short verdict does not say it again (--verbose does), nor the null
    # block's source file; the alias note names the other H200 by its --gpu name
    lines, flat = _short("moonshotai/Kimi-K2-Instruct", "--gpu", "H200", "--tp", "8")
    assert len(lines) <= 26 and max(len(line) for line in lines) <= 80, "\n".join(lines)
    assert ("max_model_len does not fit: one 131,072-token request needs 8.58 GiB of KV cache (8,192 blocks), more "
            "than the 0.36 GiB its 343 usable blocks hold (344 less vLLM's null block); short by 8.22 GiB.") in flat
    assert "  → --max-model-len 5488: 1 concurrent 5,488-token request (1.00x)" in lines
    assert lines[-1] == "note: --gpu H200 → NVIDIA H200 141GB SXM5 (also --gpu h200-nvl)"
    full = " ".join(run_cli("plan", "moonshotai/Kimi-K2-Instruct", "--gpu", "H200", "--tp", "8",
                            "--verbose").stdout.split())
    assert "the estimated maximum model length is 5,488" in full and "(also: H200 NVL 141GB (--gpu h200-nvl)" in full


def test_the_short_verdict_leaves_engine_files_to_verbose():
    # Kimi-K2 under SGLang at TP 8 on H200: a pool of 7,064 token slots, so max_req_len = min(131,072, 7,064) − 1 =
    # 7,063 and prompts of 7,063 − 5 = 7,058 tokens or more are aborted; the files that say so under --verbose only
    args = ("moonshotai/Kimi-K2-Instruct", "--engine", "sglang", "--gpu", "H200", "--tp", "8")
    _, flat = _short(*args)
    # the short plan keeps the figures; SGLang's rules that give them, under --verbose
    assert ("so max_req_len = 7,063: prompts of 7,058 tokens or more are aborted and outputs are capped, so no request "
            "longer than 7,062 tokens runs, as with --context-length 7064.") in flat
    assert ".py" not in flat and "min(context_len" not in flat
    full = " ".join(run_cli("plan", *args, "--verbose").stdout.split())
    assert ("prompts of 7,058 tokens or more (max_req_input_len = max_req_len − 5) are aborted and outputs are capped "
            "at max_req_len − prompt − 1 (managers/utils.py validate_input_length, scheduler.py), so no request longer "
            "than 7,062 tokens runs, as with --context-length 7064.") in full
    assert "so max_req_len = min(context_len − 1, pool tokens − 1) = 7,063" in full
    assert "= 7,063 (managers/tp_worker.py, every release 0.4.0–0.5.23; 0.5.23 logs a warning): prompts" in full
