"""`kvledger doctor` through the CLI: JSON for scripts, the human report, and clear errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from kvledger.cli.main import app
from kvledger.errors import InputError, KvLedgerError

LOGS = Path(__file__).parents[1] / "fixtures" / "vllm_logs"
CONFIGS = Path(__file__).parents[1] / "fixtures" / "configs"
runner = CliRunner(env={"COLUMNS": "250"})


def run(*args):
    return runner.invoke(app, ["doctor", *map(str, args)], catch_exceptions=False)


def test_json_start_up_rows_for_the_o6_log():
    r = run(LOGS / "v0.10.2_qwen3-14b_lmcache.log", "--model", CONFIGS / "Qwen3-14B.json", "--json")
    assert r.exit_code == 1  # the excerpt ends at the capacity lines: it does not show that the server started
    d = json.loads(r.stdout)
    rows = {row["term"]: row for row in d["startup"]["rows"]}
    # 6.51 GiB / 2,621,440 B per block → 2,666 blocks → 42,656 tokens → 2,666 / 2,048 = 1.30x
    assert rows["GPU blocks"]["ledger_value"] == 2666 and rows["KV cache size (printed)"]["ledger_value"] == 42656
    assert rows["max concurrency at 32,768 tokens"]["ledger_value"] == 1.30 and d["startup"]["consistent"] is True
    assert rows["available KV memory"]["log_line"] == 1


def test_a_memory_plan_off_the_log_by_more_than_2pct_is_said_beside_the_reproduced_blocks():
    from kvledger.analyses.doctor.startup_verdicts import memory_miss
    from kvledger.analyses.doctor.types import ComparisonRow

    gib = 2**30
    # the figures of vLLM 0.19's Mixtral-8x7B TP 2 start-up on H100 (../shared vllm-startups-0.19) as planned for a
    # generic GPU of its device total, as a log that names no device is (this one names it, so doctor now prices it
    # as an H100 and there is no miss): the log's 28.44 GiB of KV memory against the plan's 30.06 GiB, +1.62 GiB =
    # +5.70% (> 2%), all of it the non-torch term (log 2.07 GiB, the generic GPU's 0.45 GiB); the block count is still
    # reproduced from the log's printed memory
    rows = [ComparisonRow.compared("non-torch memory", "B", 2.07 * gib, 760, 0.45 * gib, ""),
            ComparisonRow.compared("weights", "B", 43.51 * gib, 206, 43.51 * gib, ""),
            ComparisonRow.compared("available KV memory", "B", 28.44 * gib, 761, 30.06 * gib, "")]
    said = memory_miss(rows, gpu_known=False)
    # (rows alone, no context: no plan range to judge by, so the 2%, said so)
    assert said == ("the ledger's own memory plan gives 30.06 GiB of KV memory against the log's 28.44 GiB (+1.62 GiB, "
                    "+5.7%; outside the 2% the memory plan is validated to, used as no range applies: the plan gives "
                    "no range for it); most of it non-torch memory, 0.45 GiB in the ledger "
                    "against the log's 2.07 GiB: no --gpu and the log names no GPU, so this term was planned for a "
                    "generic GPU (pass --gpu)")
    assert memory_miss(rows, gpu_known=True).endswith("against the log's 2.07 GiB")
    # a term of the same sign as the miss does not explain it, nor one under half of it: no "most of it"
    rows[0] = ComparisonRow.compared("non-torch memory", "B", 2.07 * gib, 760, 2.50 * gib, "")
    assert "most of it" not in memory_miss(rows, gpu_known=True)
    # no generic GPU term explains the miss: nothing said of a generic GPU
    assert "generic" not in memory_miss(rows, gpu_known=False)
    # within 2% (28.44 → 29.00 GiB, +1.97%): nothing said
    rows[-1] = ComparisonRow.compared("available KV memory", "B", 28.44 * gib, 761, 29.0 * gib, "")
    assert memory_miss(rows, gpu_known=False) is None
    # the fixture logs the other tests read are within it: no "but" line, and memory_miss null in --json
    d = json.loads(run(LOGS / "v0.10.2_qwen3-14b_lmcache.log", "--model", CONFIGS / "Qwen3-14B.json", "--json").stdout)
    assert d["startup"]["consistent"] is True and d["startup"]["memory_miss"] is None


def test_human_report_shows_the_options_and_rules():
    # CONSTRUCTED metrics lines (tests/fixtures/vllm_logs/README.md)
    r = run(LOGS / "constructed_v1_preemptions_at_full_kv.log", "--gpu", "H100", "--replicas", "4", "--prefix-share",
            "0.5", "--verbose")
    assert r.exit_code == 0
    out = r.stdout
    assert "FOUND capacity (capacity_bound_preemptions)" in out and "--kv-cache-dtype fp8" in out and "52,613" in out
    assert "the ledger reproduces the log's block count" in out and "26.31x (L8)" in out
    assert "FOUND prefix_cache_routing (prefix_blind_routing)" in out and "rule:" in out
    # without --verbose: the verdicts and each remedy in a line apiece, the evidence and rules left to --verbose
    brief = run(LOGS / "constructed_v1_preemptions_at_full_kv.log", "--gpu", "H100", "--replicas", "4",
                "--prefix-share", "0.5").stdout
    assert (
        "FOUND capacity (capacity_bound_preemptions)" in brief
        and "→ --kv-cache-dtype fp8: 52,613 blocks per replica" in brief
    )
    assert "rule:" not in brief and "--verbose" in brief and len(brief.splitlines()) < len(out.splitlines()) // 2
    # a remedy that adds no capacity says so in the short report (a fresh user read "--max-model-len 8000: 26,306
    # blocks, 127 requests" as an option): halving max_model_len 16,000 → 8,000 frees no KV memory (paged blocks are
    # allocated as tokens arrive) and keeps the as-logged 26,306 blocks and 127 requests of the ≈3,290 tokens observed
    # (420,880 slots ÷ 3,290 ≈ 127). --max-num-seqs 127 caps the batch there, and re-planned at that cap the pool
    # grows: the ledger's activation peak (the sampler's warm-up over max_num_seqs requests) falls 5,104,926,719 →
    # 1,026,765,619 B, the log's 55,168,854,917 B budget + the ledger's 4,078,161,100 B = 28,251 blocks of 2 MiB,
    # +1,945 on 26,306 = +7.4% (test_doctor.py derives it)
    lines = {ln.split(":")[0].strip(): ln for ln in brief.splitlines() if ln.strip().startswith("→")}
    assert lines["→ --max-model-len 8000"].endswith(
        "127 requests of the size observed at saturation: no capacity added, as logged (it refuses or queues the "
        "excess instead of preempting it; --verbose says how)")
    # and the cap at which none can be preempted: 26,305 usable blocks ÷ 1,000 blocks a 16,000-token request = 26
    assert ("→ --max-num-seqs 127: 28,251 blocks per replica (+1,945 blocks, +7.4%, re-planned at this cap), 127 "
            "requests of the size observed at saturation; none can be preempted at --max-num-seqs 26 or fewer") \
        in " ".join(brief.split())
    assert not any("no capacity added" in lines[a] for a in ("→ --kv-cache-dtype fp8", "→ as logged"))


def test_the_short_report_says_when_the_start_up_comparison_was_skipped_and_what_to_pass():
    # v0.14_qwen3-1.7b.log has two start-up lines (available KV memory 18.78 GiB; KV cache size 175,856 tokens) and
    # names neither the model nor the device total: with no --model and no --gpu no row has a ledger figure, so
    # nothing is compared; the line names both flags (--gpu for the memory terms).
    log = LOGS / "v0.14_qwen3-1.7b.log"
    skipped = ("the log names no model; pass --model (a bundled name or a config.json) for the ledger comparison; "
               "no --gpu and the log prints no device total (pass --gpu to compare the memory terms)")
    assert f"start-up: comparison with the ledger skipped: {skipped}" in run(log).stdout
    d = json.loads(run(log, "--json").stdout)["startup"]
    assert d["consistent"] is None and d["skipped"] == skipped
    # v0.6.4_llama-3.1-8b_rtx3090_20k.log prints its device total (23.58 GiB, line 2) but no model: only --model is
    # asked for
    out = run(LOGS / "v0.6.4_llama-3.1-8b_rtx3090_20k.log").stdout
    assert ("start-up: comparison with the ledger skipped: the log names no model; pass --model (a bundled name or a "
            "config.json) for the ledger comparison\n") in out
    # with --model the printed size is compared: Qwen3-1.7B keeps 2 × 28 layers × 8 KV heads × 128 × 2 B = 114,688 B
    # per token, 1,835,008 B per 16-token block; 18.78 GiB (printed to 2 decimals) holds 10,986–10,991 blocks, and
    # 175,856 tokens = 10,991 × 16 is among them → reproduced, and no skipped line
    out = run(log, "--model", CONFIGS / "Qwen3-1.7B.json").stdout
    assert (
        "start-up: the ledger reproduces the log's" in out
        and "comparison with the ledger skipped" not in out
    )
    assert json.loads(run(log, "--model", CONFIGS / "Qwen3-1.7B.json", "--json").stdout)["startup"]["skipped"] is None


@pytest.mark.parametrize("args, text", [
    ((LOGS / "tgi_launcher.log",), "Hugging Face TGI"),
    ((LOGS / "absent.log",), "no such file"),
    ((LOGS / "v0.14_qwen3-1.7b.log", "--replicas", "0"), "--replicas 0 is out of range; allowed: [1, 4,096]"),
    ((LOGS / "v0.14_qwen3-1.7b.log", "--prefix-share", "1.5"), "--prefix-share 1.5 is out of range; allowed: [0, 1] "
                                                               "(fraction)"),
    ((LOGS / "v0.14_qwen3-1.7b.log", "--gpu", "h1000"), "unknown GPU"),
])
def test_errors_are_clear(args, text):
    with pytest.raises(KvLedgerError) as err:  # main.run() prints these without a traceback and exits 2
        run(*args)
    assert text in str(err.value)


def test_a_model_other_than_the_logs_is_named_up_front():
    log = LOGS / "constructed_v1_preemptions_at_full_kv.log"  # line 2: model='meta-llama/Llama-3.1-8B-Instruct'
    d = json.loads(run(log, "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--json").stdout)
    assert d["warnings"] == ["--model Qwen/Qwen3-8B is not the model this log serves: the log names "
                             "'meta-llama/Llama-3.1-8B-Instruct' (line 2). The comparison below is the ledger for "
                             "Qwen/Qwen3-8B, so it will not match the log's figures; drop --model to use the log's "
                             "model "
                             "(when bundled) or pass its config.json"]
    out = run(log, "--model", "Qwen/Qwen3-8B", "--gpu", "H100", "--verbose").stdout
    assert out.index("WARNING: --model Qwen/Qwen3-8B is not the model this log serves") < out.index("Settings used for "
        "the ledger")
    assert "--model Qwen/Qwen3-8B (the log names 'meta-llama/Llama-3.1-8B-Instruct')" in out
    # the base model of the Instruct the log serves is the same architecture: no warning
    assert json.loads(run(log, "--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100",
                          "--json").stdout)["warnings"] == []


def _error(*args) -> str:
    with pytest.raises(KvLedgerError) as err:  # main.run() prints these without a traceback and exits 2
        run(*args)
    return str(err.value)


def test_impossible_log_values_are_clear_errors_naming_the_line(tmp_path, cli_entry):
    fixture = (LOGS / "v0.18_cudagraph_estimate_override.log").read_text(encoding="utf-8")
    # the real 0.18 log with its budget line (line 4, "6.9 GiB") edited to 99,999.11 GiB: more than an H100's 79.19 GiB
    p = tmp_path / "edited.log"
    p.write_text(fixture.replace("Available KV cache memory: 6.9 GiB", "Available KV cache memory: 99999.11 GiB"),
                 encoding="utf-8")
    msg = _error(p, "--gpu", "H100")
    assert "line 4: available KV cache memory 99,999.11 GiB is more than the GPU's whole memory (79.19 GiB" in msg
    # no --gpu, no printed total
    assert "line 4: available KV cache memory 99,999.11 GiB is more than any GPU holds" in _error(p)
    code, _, err = cli_entry("doctor", str(p), "--gpu", "H100")  # the console entry point, in this process
    assert code == 2 and "line 4" in err
    assert "Traceback" not in err and "Input should be" not in err
    # CONSTRUCTED (vLLM 0.19 formats): a printed KV cache size whose block count no engine accepts
    # (99,999,999,999,984 tokens / 16 per block = 6,249,999,999,999 > 2**32 blocks)
    p.write_text("INFO 04-22 00:03:30 [api_server.py:1] vLLM API server version 0.19.0\n"
                 "(EngineCore pid=2) INFO 04-22 00:04:20 [v1/worker/gpu_worker.py:436] Available KV cache memory: "
                 "58.11 GiB\n"
                 "(EngineCore pid=2) INFO 04-22 00:04:20 [v1/core/kv_cache_utils.py:1319] GPU KV cache size: "
                 "99,999,999,999,984 tokens\n",
                 encoding="utf-8")
    msg = _error(p, "--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100")
    # the whole H100 as KV cache: 79.19 GiB = 85,029,027,840 B // 2,097,152 B per block (32 layers × 2 × 8 KV heads ×
    # 128 × 2 B × 16 tokens) = 40,545 blocks, printed by 0.19 as 40,545 × 16 = 648,720 tokens
    assert ("line 3: GPU KV cache size (tokens) 99,999,999,999,984 is more than the whole GPU could hold" in msg
            and "÷ 2,097,152 B per block = 40,545 blocks, printed by vLLM 0.19.0 as at most 648,720" in msg)
    # an echoed setting outside vLLM's range: gpu_memory_utilization 1.5 (line 1)
    p.write_text("(APIServer pid=1) INFO 04-22 00:03:35 [entrypoints/utils.py:233] non-default args: "
                 "{'gpu_memory_utilization': 1.5}\n"
                 + fixture, encoding="utf-8")
    assert "line 1: gpu memory utilization 1.5 is not a value vLLM prints or accepts" in _error(p, "--gpu", "H100")


def test_a_log_cut_off_after_the_kv_budget_says_what_was_compared(tmp_path):
    # the first 6 lines of constructed_v1_preemptions_at_full_kv.log (its start-up is a real H100 measurement): it
    # stops at "Available KV cache memory: 51.38 GiB". With --gpu H100 the memory terms are compared: ledger
    # ceil(79.19 GiB × 0.9) = 76,526,125,056 B − weights 16,094,076,928 − activation peak 5,104,926,720 − non-torch
    # 139,586,437 = 55,187,534,971 B = 51.40 GiB against the log's 51.38 GiB. No block count, KV cache size or
    # concurrency is printed, so there is no capacity figure to check — not "the ledger has no figure".
    log = tmp_path / "cut.log"
    log.write_text("".join((LOGS / "constructed_v1_preemptions_at_full_kv.log").read_text().splitlines(True)[:6]))
    out = " ".join(run(log, "--gpu", "H100").stdout.split())
    assert "has no figure" not in out and "comparison with the ledger skipped" not in out
    assert ("start-up: capacity figures not checked: the log prints no block count, KV cache size or concurrency, so "
            "only its memory terms were compared") in out
    assert "available KV memory: log 51.38 GiB (line 6), ledger 51.40 GiB (+0.02 GiB)" in out
    d = json.loads(run(log, "--gpu", "H100", "--json").stdout)["startup"]
    assert d["consistent"] is None and d["skipped"] is None and "51.40 GiB" in d["memory_only"]


def test_impossible_capacity_and_unreadable_figures_exit_2_without_a_traceback(tmp_path, cli_entry):
    # the real start-up of constructed_v1_preemptions_at_full_kv.log (its first 6 lines: Llama-3.1-8B-Instruct, vLLM
    # 0.11.0, 51.38 GiB available) and a printed KV cache size of 999,999,999,999 tokens: even the whole H100 holds
    # 40,545 blocks × 16 = 648,720 tokens of this model (see above), so vLLM cannot have printed it
    head = "".join((LOGS / "constructed_v1_preemptions_at_full_kv.log").read_text().splitlines(True)[:6])
    p = tmp_path / "edited.log"
    p.write_text(head + "(EngineCore_DP0 pid=312) INFO 11-04 14:58:40 [kv_cache_utils.py:1087] GPU KV cache size: "
                        "999,999,999,999 tokens\n")
    code, _, err = cli_entry("doctor", str(p), "--gpu", "H100")  # the console entry point, in this process
    assert code == 2 and "Traceback" not in err
    assert "line 7: GPU KV cache size (tokens) 999,999,999,999 is more than the whole GPU could hold" in err
    # "nan GiB" is no figure (Python formats a failed computation so): an error naming the line, not a silent skip
    p.write_text(head.replace("Available KV cache memory: 51.38 GiB", "Available KV cache memory: nan GiB"))
    assert "line 6: 'Available KV cache memory: nan' is not a figure" in _error(p, "--gpu", "H100")


def test_a_table_or_json_is_refused_as_not_a_log(tmp_path, cli_entry):
    # a CSV of start-ups (the shape of ../shared/data/vllm-startups-0.19/startups.csv): one cell quotes vLLM's
    # "151936 is not divisible by 5"; no line carries vLLM's logger header, and every row has the header's width
    p = tmp_path / "startups.csv"
    p.write_text("log_file,status,vllm_version,error\n"
                 "a.log,ok,v0.19.0,\n"
                 "b.FAILED.log,failed,v0.19.0,AssertionError: 151936 is not divisible by 5\n")
    code, out, err = cli_entry("doctor", str(p))  # the console entry point, in this process
    assert code == 2 and "Traceback" not in err and "not_divisible" not in out
    assert "this is a CSV table (2 rows of 4 columns under a header row: log_file, status, vllm_version, " \
           "error, …), not a vLLM server log" in " ".join(err.split())
    p.write_text('{"num_gpu_blocks": 26306}')
    assert "this is a JSON document, not a vLLM server log" in _error(p)
    # the real headerless posts (v0.6.4_*.log: the messages alone) are still logs
    # (exit 1, not 2: read, but the excerpt ends at the capacity lines, before the server shows it started)
    assert run(LOGS / "v0.6.4_llama-3.1-8b_rtx3090_20k.log", "--json").exit_code == 1


def test_the_not_a_log_check_never_raises_on_odd_text():
    # found by the fuzzer: JSON nested past Python's recursion limit, and a "CSV field" over csv's 131,072-character
    # limit, are read as lines (and then refused as holding no vLLM line), never a traceback
    from kvledger.evidence.vllm_log import parse_vllm_log

    assert parse_vllm_log("[" * 100_000).not_a_log is None
    assert parse_vllm_log("a,b,c\n" + "x" * 200_000 + ",1,2\n").not_a_log is None


def test_the_device_a_log_names_prices_the_gpus_own_terms_without_gpu():
    from kvledger.analyses.doctor.log_gpu import named_device
    from kvledger.evidence.vllm_log import parse_vllm_log

    # vLLM names a tuned kernel config after torch.cuda.get_device_name() (fused MoE, block-FP8 GEMMs): the line of
    # ../shared's Mixtral-8x7B TP 2 start-up (0.19), with its DEBUG device total (79.19 GiB, the catalog H100 SXM's)
    text = ("INFO 04-22 00:57:36 [fused_moe.py:1077] Using configuration from /x/configs/E=8,N=7168,"
            "device_name=NVIDIA_H100_80GB_HBM3.json for MoE layer.\n"
            "DEBUG 04-22 00:57:56 [gpu_worker.py:661] Free memory on device (77.18/79.19 GiB) on startup.\n")
    log = parse_vllm_log(text)
    assert log.startup.device_name == "NVIDIA H100 80GB HBM3" and log.startup.lines["device_name"] == 1
    g, said = named_device(log)
    assert g.name == "NVIDIA H100 80GB SXM5"
    assert said.startswith("the log's device 'NVIDIA H100 80GB HBM3' (line 1: a kernel config vLLM looked up for it)")
    # a name whose catalog memory disagrees with the log's device total (an 80 GB name on a 94 GB board) is not taken
    assert named_device(parse_vllm_log(text.replace("77.18/79.19", "90.00/93.14"))) is None
    # nor a device the catalog does not know
    assert named_device(parse_vllm_log(text.replace("NVIDIA_H100_80GB_HBM3", "ACME_Z9"))) is None


def test_engine_version_is_checked_and_named_in_the_header():
    # the header said the log's rules (0.11.0) while the ledger applied --engine-version 0.19.0; a version that is not
    # one, or one before 0.5, exited 0 with "the ledger has no figure for these settings"
    log = LOGS / "constructed_v1_preemptions_at_full_kv.log"
    d = json.loads(run(log, "--gpu", "H100", "--engine-version", "0.19.0", "--json").stdout)
    assert d["log"]["rules_version"] == "0.19.0" and d["log"]["rules_reason"] == "--engine-version 0.19.0"
    for bad, said in (("banana", "is not a version like 0.10.2"), ("0.3.0", "predates the rules this tool models")):
        res = runner.invoke(app, ["doctor", str(log), "--engine-version", bad])
        assert isinstance(res.exception, InputError) and said in str(res.exception)


def test_an_empty_a_compressed_and_a_binary_file_are_said_as_such(tmp_path):
    # they read "no vLLM log lines in 0 / 78 / 14 line(s)"; a rotated log is often gzip-compressed
    import gzip

    empty, gz, binary = tmp_path / "e.log", tmp_path / "r.log.gz", tmp_path / "b.log"
    empty.write_text("")
    gz.write_bytes(gzip.compress((LOGS / "v0.14_qwen3-1.7b.log").read_bytes()))
    binary.write_bytes(b"ab\x00cd" * 10)
    padded = tmp_path / "p.log"  # a log a crash padded with NULs still reads as a log (fuzz's mutated logs did)
    padded.write_bytes((LOGS / "v0.14_qwen3-1.7b.log").read_bytes() + b"\x00" * 64)
    assert runner.invoke(app, ["doctor", str(padded)]).exit_code == 1  # read (1: a start-up excerpt, not 2: refused)
    for path, said in ((empty, "the file is empty"), (gz, "the file is gzip-compressed; decompress it first"),
                       (binary, "the file is binary, not a text log")):
        res = runner.invoke(app, ["doctor", str(path)])
        assert isinstance(res.exception, InputError) and str(res.exception).startswith(f"{path}: {said}")


def test_an_extrapolated_usage_and_a_modelled_pool_say_so():
    # V0 0.6.3: the log samples KV usage at 73.8% and 86.1% (5 s apart) and warns of a swap 2 s later; doctor
    # extrapolates 86.1 + (86.1 − 73.8) × 2 / 5 = 91.0% to the warning's time. The one-screen answer printed "usage up
    # to 91.0%", a figure the log never printed, and called the ledger's modelled pool "as logged"
    log = LOGS / "v0.6.3_metrics_swap_preemption.log"
    out = " ".join(run(log).stdout.split())
    assert "(usage up to ≈91.0%, extrapolated to a preemption warning's time from the two samples before it)" in out
    out = run(log, "--model", "meta-llama/Llama-3.1-8B", "--gpu", "H100").stdout
    assert "→ as modelled: " in out and "→ as logged" not in out


def test_a_capacity_verdict_without_options_says_what_to_pass_on_one_screen():
    # v0.10: 260 running, 475 waiting at 100% KV usage; with no model named, the options' hint was in --json only
    out = run(LOGS / "v0.10_metrics_kv_full_waiting.log").stdout
    assert "  → pass --model for the options in numbers" in out


def test_a_traceback_without_an_exception_line_is_not_given_a_root_cause():
    # v0.5: a preemption warning, then an offline script's traceback (offline.py, test_llm) and the log ends: it named
    # "[rank0]: Traceback (most recent call last):" as the engine's death and told the user to read that exception
    out = " ".join(run(LOGS / "v0.5_recompute_preemption.log").stdout.split())
    assert ("a traceback begins at line 2, after the server was serving (from line 1), but no exception line follows "
            "it: the log stops before naming what failed") in out
    assert "the engine died" not in out


def test_the_tokens_per_request_name_the_lines_they_come_from():
    # ≈3,290 tokens is the median over the four metrics lines at ≥ 90% KV usage, lines 11–14 (the evidence table lists
    # only the preemption intervals, 12–14, so the figure could not be rebuilt from it)
    out = " ".join(run(LOGS / "constructed_v1_preemptions_at_full_kv.log", "--model", "meta-llama/Llama-3.1-8B",
                       "--gpu", "H100").stdout.split())
    assert ("each running request holds ≈3,290 tokens (usage × slots ÷ running, the median over the 4 metrics lines "
            "at ≥ 90% KV usage: lines 11, 12, 13, 14)") in out


STARTUPS_0_19 = Path(__file__).parents[1] / "fixtures" / "vllm_startups_0_19" / "logs"


def test_the_brief_remedy_lines_say_what_they_cost(tmp_path):
    # the Llama-3.1-8B start-up (29,751 blocks) and three metrics lines at ≥ 99.6% KV, 57–58 running: ≈8,182 tokens each
    line = ("(APIServer pid=1) INFO 04-22 00:10:{} [v1/metrics/loggers.py:259] Engine 000: Avg prompt throughput: "
            "18000.0 tokens/s, Avg generation throughput: 4300.0 tokens/s, Running: {} reqs, Waiting: 60 reqs, "
            "{}GPU KV cache usage: {}%, Prefix cache hit rate: 0.0%\n")
    log = tmp_path / "preempted.log"
    log.write_text((STARTUPS_0_19 / "meta-llama-llama-3-1-8b---h100-80gb--tp1pp1dp1--8192.log").read_text()
                   + line.format(10, 58, "", 99.6) + line.format(20, 57, "Preemptions: 14, ", 99.8)
                   + line.format(30, 58, "Preemptions: 11, ", 99.7))
    r = run(log)
    assert r.exit_code == 0
    out = r.stdout
    assert ("→ --max-model-len 4096: would refuse the requests observed (they hold more than 4,096 tokens each at "
            "saturation): no remedy for this traffic") in out
    # TP 2: the log's 62,395,137,393 B budget moved by the ledger's own change from TP 1 to TP 2 on this H100 (its plan
    # with the log's settings: 62,388,428,768 → 68,462,116,504 B available; weights 16,094,076,928 → 8,066,179,072 B,
    # non-torch memory 268,435,456 → 2,222,645,575 B): 68,468,825,129 B / 1 MiB = 65,296.4 → 65,296
    assert "→ --tensor-parallel-size 2: 65,296 blocks per replica of 2 GPUs (1 as logged), 127 requests" in out
    # the remedies start from the log's 29,751 blocks, not the 29,752 the ledger gets from the printed 58.11 GiB (the
    # headline names that one, as the rounding of the print)
    assert "→ as logged: 29,751 blocks per replica, 58 requests" in out
    assert [ln for ln in out.splitlines() if ln.lstrip().startswith("→") and "29,752" in ln] == []


def test_a_stand_in_config_and_a_contradicting_gpu_are_said_in_the_brief_reading():
    logs = STARTUPS_0_19
    out = run(logs / "deepseek-ai-deepseek-v2---h100-80gb--tp1pp1dp1--8192.log").stdout
    assert "model: 'deepseek-ai/DeepSeek-V2-Lite-Chat' (log line 3) is not bundled; the bundled " \
           "deepseek-ai/DeepSeek-V2-Lite stands in for it" in out
    out = run(logs / "meta-llama-llama-3-1-8b---h100-80gb--tp1pp1dp1--8192.log", "--gpu", "A100-80GB").stdout
    assert "WARNING: --gpu A100-80GB (NVIDIA A100 80GB SXM4) is not the GPU this log ran on" in out
    assert "kvledger 58.17 GiB (+0.06 GiB, +0.1%; inside the plan's range" in out
