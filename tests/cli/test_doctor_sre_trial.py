"""`kvledger doctor` on an SRE's trial logs (vLLM 0.19.0, Llama-3.1-70B-Instruct-FP8, TP 4 on H100s; synthetic edits
of one real start-up, tests/fixtures/vllm_logs/README.md): earlier start-ups summarised, no advice the crash
contradicts, a log read from standard input, a --max-num-batched-tokens value for preemptions below a full cache, and
a log that contradicts itself."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.errors import InputError

FIX = Path(__file__).parents[1] / "fixtures"
LOGS = FIX / "vllm_logs"
MODEL = FIX / "configs" / "Llama-3.1-70B-Instruct-FP8.json"
runner = CliRunner(env={"COLUMNS": "250"})


def trial(name: str) -> Path:
    return LOGS / f"sre_trial_v0.19_llama70b_fp8_tp4_{name}.log"


def doctor(*args: object, stdin: bytes | None = None):
    return runner.invoke(app, ["doctor", *map(str, args), "--model", str(MODEL), "--gpu", "H100"], input=stdin,
                         catch_exceptions=False)


def test_a_dash_reads_the_log_from_standard_input():
    # `cat log | kvledger doctor -` said "-: no such file"; the piped log reads as the file does (same verdict, same
    # exit status 1: the CUDA OOM at line 486 of this copy), under the name <stdin>
    path = trial("crash")
    piped, named = doctor("-", stdin=path.read_bytes()), doctor(path)
    assert piped.exit_code == named.exit_code == 1
    assert piped.stdout.startswith("kvledger doctor <stdin>: vLLM 0.19.0")
    assert piped.stdout.split("\n", 1)[1] == named.stdout.split("\n", 1)[1]
    empty = runner.invoke(app, ["doctor", "-"], input=b"")  # main() turns an InputError into exit status 2
    assert isinstance(empty.exception, InputError) and str(empty.exception) == "<stdin>: standard input is empty"


def test_earlier_start_ups_say_their_preemptions_and_the_settings_the_restart_changed():
    # restarts.log (this copy): start-up #1, lines 1–510, crashes (CUDA OOM, line 486) after metrics lines 446, 451,
    # …, 476 print Preemptions 3 + 7 + 12 + 9 + 14 + 11 + 13 = 69 at GPU KV usage 100.0%; its args (line 25) say
    # gpu_memory_utilization 0.9 and its engine line (67) kv_cache_dtype=auto. #2 (lines 511–946) and #3 (from 947)
    # pass 0.95 and fp8 (args lines 515 and 951: the last start-up's is cited); #3 serves 3 metrics lines, peak KV usage
    # 72.5% (line 1,362), no preemptions. The report said only "ok capacity: no preemptions" (exit 0)
    r = doctor(trial("restarts"))
    assert r.exit_code == 0
    out = " ".join(r.stdout.split())
    assert ("earlier start-up #1 (lines 1–510, crashed): 69 preemption(s) in 7 line(s) (lines 446–476), GPU KV usage "
            "up to 100.0% (line 446); settings otherwise than the last start-up: gpu_memory_utilization 0.9 (line 25) "
            "→ 0.95 (line 951), kv_cache_dtype auto (line 67) → fp8 (line 951)") in out
    assert "earlier start-up #2 (lines 511–946, stopped): no preemptions in 0 metrics line(s); no setting" in out
    # 649,968 tokens (line 351) → 1,403,776 (line 841): fp8 halves the page, 0.95 adds 3.96 GiB per GPU
    assert ("did a restart fix it? start-up #2 (from line 511) changed gpu_memory_utilization 0.9→0.95, kv_cache_dtype "
            "auto→fp8 against #1 (GPU KV cache size 649,968 → 1,403,776 tokens, lines 351 and 841): no preemptions "
            "since (peak GPU KV usage 72.5%, line 1,362), in 3 metrics line(s) of start-up(s) #2–#3, against 69 "
            "preemption(s) before") in out
    d = json.loads(doctor(trial("restarts"), "--json").stdout)
    first = d["startups"][0]
    assert first["outcome"] == "crashed" and first["preemptions"] == {
        "count": 69, "report_lines": 7, "first_line": 446, "last_line": 476, "peak_gpu_kv_usage_pct": 100.0,
        "peak_line": 446, "metrics_lines": 10}
    assert first["changed_settings"] == [
        {"setting": "gpu_memory_utilization", "was": 0.9, "was_line": 25, "now": 0.95, "now_line": 951},
        {"setting": "kv_cache_dtype", "was": "auto", "was_line": 67, "now": "fp8", "now_line": 951}]
    assert d["startups"][1]["changed_settings"] == [] and d["startups"][2]["preemptions"]["count"] == 0


def test_preemptions_below_a_full_cache_offer_a_step_budget_and_no_shorter_limit():
    # pre74.log: 69 preemptions while every preempting metrics line prints 74.0% KV usage (lines 446–476; line 446:
    # 71 running). The pool as logged is 40,623 blocks, 40,622 usable (the null block), 16 tokens each; the free blocks
    # there are floor(0.26 × 40,622) = 10,561, less 71 running = 10,490 blocks × 16 = 167,840 tokens: more than half
    # the logged budget (8,192 // 2 = 4,096), so 4,096 it is (≥ max_num_seqs 1,024). A step then claims
    # ⌈4,096 ÷ 16⌉ = 256 + 71 blocks instead of 512 + 71. The finding listed only --max-model-len 16384, which frees no
    # block and is dropped here
    d = json.loads(doctor(trial("pre74"), "--json").stdout)
    cap = next(f for f in d["findings"] if f["name"] == "capacity")
    assert cap["verdict"] == "preemptions_below_full"
    actions = [o["action"] for o in cap["options"]]
    assert actions[:2] == ["as logged", "--max-num-batched-tokens 4096"]
    assert not any(a.startswith("--max-model-len") for a in actions)
    step = cap["options"][1]
    assert step["detail"].startswith("a step claims up to ⌈budget ÷ 16⌉ blocks of prompt tokens plus one per running "
                                     "request: 512 + 71 at 8,192 tokens, 256 + 71 at 4,096. The fullest preempting "
                                     "line (74.0% KV usage, 71 running, line 446) leaves ≈10,561 of 40,622 blocks free")
    # re-planned at 4,096 the profile run's hidden states shrink (8,192 → 4,096 tokens × 8,192 × 2 B = 64 MiB less,
    # the ledger's 1.95 → 1.89 GiB activation peak): 0.06 GiB more KV, 40,675 blocks
    assert step["num_gpu_blocks"] == 40675


def test_budget_rule_takes_the_free_blocks_where_they_hold_less_than_half_a_step():
    from kvledger.analyses.doctor.capacity_step import budget_tokens

    # 8,192-token budget, 16-token blocks, 300 blocks free and 100 running: (300 − 100) × 16 = 3,200 < 8,192 // 2
    assert budget_tokens(8192, 300, 100, 16, 256) == (3200, "the free blocks less one per running request × block_size")
    # 100 free, 50 running: (100 − 50) × 16 = 800, below max_num_seqs 1,000, which vLLM requires: 1,000 rounded up to
    # whole blocks, ⌈1,000 ÷ 16⌉ × 16 = 1,008
    assert budget_tokens(8192, 100, 50, 16, 1000)[0] == 1008


def test_a_log_that_contradicts_itself_is_warned_of_and_not_called_rounding():
    # base.log: line 25 (non-default args) says gpu_memory_utilization 0.9; line 334 (a worker's "Requested memory:
    # 0.950000 (util), 75.23 GiB") was edited; the device total is 79.19 GiB (line 190). 0.9 × 79.19 = 71.271 GiB, so
    # the request is 75.23 − 71.27 = +3.96 GiB off, and 75.23 / 79.19 = 0.950; 2-decimal rounding of the request
    # (±0.005) and of the total × 0.9 (±0.0045) allows ±0.0095 GiB. -v called the 3.96 GiB residual "2-decimal rounding"
    r = doctor(trial("base"), "-v")
    out = " ".join(r.stdout.split())
    assert ("WARNING: the log disagrees with itself: line 25 sets gpu_memory_utilization 0.9, but line 334 prints a "
            "requested memory of 75.23 GiB, 0.950 of the 79.19 GiB device total (line 190); 0.9 of it is 71.27 GiB "
            "(+3.96 GiB, more than the ±0.0095 GiB 2-decimal rounding allows)") in out
    d = json.loads(doctor(trial("base"), "--json").stdout)
    kv = next(row for row in d["startup"]["rows"] if row["term"] == "available KV memory")
    # 6 printed figures in the sum (available, requested, weights, activation peak, non-torch, CUDA graphs): ±0.030
    assert kv["explanation"].endswith("residual +3.96 GiB: more than 2-decimal rounding of these 6 printed figures "
                                      "can make (±0.030 GiB), so a term the log does not itemise, or printed figures "
                                      "that disagree with each other")


def test_the_residual_is_rounding_only_within_half_a_unit_per_printed_figure():
    from kvledger.analyses.doctor.log_consistency import residual_words

    gib = 2**30
    assert residual_words(0.02 * gib, 6) == ("residual +0.02 GiB (2-decimal rounding: at most ±0.030 GiB over these 6 "
                                             "printed figures)")
    assert residual_words(-0.04 * gib, 6).startswith("residual -0.04 GiB: more than 2-decimal rounding")


def test_after_an_oom_crash_the_capacity_options_do_not_raise_the_utilization():
    # crash.log: the engine dies of CUDA OOM at line 486 while serving; the crash finding says "lower
    # --gpu-memory-utilization", so the capacity finding must not offer 0.9 → 0.95 (the trial saw 43,867 blocks there
    # on the same start-up without the crash: sre70b.log)
    d = json.loads(doctor(trial("crash"), "--json").stdout)
    crash = next(f for f in d["findings"] if f["name"] == "crashed_while_serving")
    assert "lower --gpu-memory-utilization" in crash["message"]
    cap = next(f for f in d["findings"] if f["name"] == "capacity")
    assert not any(o["action"].startswith("--gpu-memory-utilization") for o in cap["options"])
    assert cap["options"][0]["notes"] == [
        "--gpu-memory-utilization is not raised: the server ran out of GPU memory (line 486), so it needs more room "
        "outside the KV cache, not less"]
