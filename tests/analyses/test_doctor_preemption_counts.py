"""Whether a log can show its preemptions (``evidence/vllm_log/preemption_counts.py``): a V1 log from before 0.11.1
never does, one from 0.11.1 on prints ``Preemptions: N`` whenever N > 0, so doctor must not read a quiet 0.10 log as
"no preemptions", nor a quiet 0.19 log as "preemptions may have happened".

The metrics lines below are CONSTRUCTED in vLLM's own formats: 0.10.1's ``v1/metrics/loggers.py`` (line 123,
``LoggingStatLogger.log``: "Engine %03d: Avg prompt throughput: %.1f tokens/s, Avg generation throughput: %.1f
tokens/s, Running: %d reqs, Waiting: %d reqs, GPU KV cache usage: %.1f%%, Prefix cache hit rate: %.1f%%", no
preemption field) and 0.19.0's (line 259, the same fields, with "Preemptions: %d" after Waiting only when > 0); the
version lines are ``api_server.py``'s "vLLM API server version %s" (0.10.1 line 1805).
"""

from __future__ import annotations

from pathlib import Path

from kvledger.analyses.doctor.diagnose import diagnose, diagnose_file
from kvledger.evidence.vllm_log import parse_vllm_log
from kvledger.evidence.vllm_log.preemption_counts import preemption_counting

LOGS = Path(__file__).parents[1] / "fixtures" / "vllm_logs"


def _log(version: str, src: str) -> str:
    head = f"(APIServer pid=1) INFO 04-22 01:39:38 [api_server.py:1805] vLLM API server version {version}\n"
    rows = [(296, 0, 93.8), (305, 12, 99.1), (320, 37, 100.0), (318, 51, 100.0)]
    return head + "".join(
        f"(APIServer pid=1) INFO 04-22 01:4{k}:00 [{src}] Engine 000: Avg prompt throughput: 18000.0 tokens/s, "
        f"Avg generation throughput: 4100.0 tokens/s, Running: {r} reqs, Waiting: {w} reqs, GPU KV cache usage: "
        f"{u:.1f}%, Prefix cache hit rate: 0.0%\n" for k, (r, w, u) in enumerate(rows))


def test_a_010_log_cannot_show_preemptions_and_doctor_says_so():
    log = parse_vllm_log(_log("0.10.1", "loggers.py:123"))
    assert preemption_counting(log)[0] == "never"
    rep = diagnose(log)
    f = rep.finding("capacity")
    # KV 100.0% with 37 and 51 waiting (lines 4-5): admission is capacity-bound; the log could not show preemptions,
    # and at 100.0% (under 0.05% of the blocks free) growth takes blocks from other running requests
    assert (f.triggered, f.verdict) == (True, "capacity_bound_admission")
    assert "up to 51 waiting — and preemptions cannot show in this log: vLLM 0.10.1 logs no preemption at all" \
        in f.message
    assert "vllm:num_preemptions_total" in f.message and "at the 100.0% usage of line 4" in f.message
    assert rep.log_summary["preemption_counting"] == "never"


def test_a_019_log_without_the_field_had_no_preemptions():
    # 0.19.0 prints "Preemptions: N" whenever N > 0: the same queue with no such field means none in these intervals,
    # not "may have happened"
    log = parse_vllm_log(_log("0.19.0", "v1/metrics/loggers.py:259"))
    f = diagnose(log).finding("capacity")
    assert (f.verdict, preemption_counting(log)[0]) == ("capacity_bound_admission", "when_nonzero")
    assert "cannot show" not in f.message
    assert any("none in these metrics intervals: vLLM 0.19.0 prints 'Preemptions: N'" in n for n in f.notes)


def test_a_log_that_counts_them_is_read_as_counting():
    # the 0.11.0-format constructed log with "Preemptions: 9/14/11" in its metrics lines
    rep = diagnose_file(LOGS / "constructed_v1_preemptions_at_full_kv.log")
    assert rep.log_summary["preemption_counting"] == "counted"
    assert "cannot show" not in rep.finding("capacity").message


def test_the_max_num_seqs_option_says_where_no_request_can_be_preempted():
    # constructed_v1_preemptions_at_full_kv.log: "GPU KV cache size: 420,896 tokens" = 26,306 blocks of 16, 26,305
    # usable (block 0 is the null block); a 16,000-token request holds cdiv(16,000, 16) = 1,000 blocks, so 26 whole
    # ones fit (the log prints 26.31x). V1 admits a request on its prompt's blocks, so the cap at the observed size
    # (127) still preempts when requests grow; at 26 no request, even at max_model_len, can run out of blocks
    rep = diagnose_file(LOGS / "constructed_v1_preemptions_at_full_kv.log", model="meta-llama/Llama-3.1-8B", gpu="H100")
    row = next(o for o in rep.finding("capacity").options if o["action"].startswith("--max-num-seqs"))
    assert (row["action"], row["no_preemption_max_num_seqs"]) == ("--max-num-seqs 127", 26)
    assert "still preempt when they grow past it" in row["detail"]


def test_a_long_exception_is_cut_at_a_word_and_marked():
    from kvledger.evidence.vllm_log.failures import clip

    # PyTorch's CUDA OOM message wrapped by vLLM V1's worker (the SRE trial's crash line, 394 characters): whole under
    # the 500-character limit (at 300 it was cut to "… and 1.12 GiB i")
    msg = ("RuntimeError: Worker failed with error 'CUDA out of memory. Tried to allocate 2.32 GiB. GPU 0 has a total "
           "capacity of 79.19 GiB of which 1.02 GiB is free. Including non-PyTorch memory, this process has 78.16 GiB "
           "memory in use. Of the allocated memory 74.80 GiB is allocated by PyTorch, and 1.12 GiB is reserved by "
           "PyTorch but unallocated.', please check the stack trace above for the root cause")
    assert clip(msg) == msg and len(msg) == 394
    # past the limit: cut at the last space before it, and marked
    assert clip(msg, 300) == msg[:msg[:300].rfind(" ")] + " …" and clip(msg, 300).endswith("and 1.12 GiB …")


def test_a_startup_only_log_says_whether_preemption_is_possible():
    # v0.10.2_qwen3-14b_lmcache.log (a posted start-up, no serving lines): "GPU KV cache size: 42,656 tokens" = 2,666
    # blocks, 2,665 usable = 42,640 token slots; a 32,768-token request holds 2,048 blocks, so 1 whole one fits (the
    # log's 1.30x); max_num_seqs is not printed, so the version's default (256 here) is named with its source. The
    # printed 42,656 tokens count the null block, which the 42,640 slots do not: said, as the metrics case says it
    rep = diagnose_file(LOGS / "v0.10.2_qwen3-14b_lmcache.log",
                        model=str(LOGS.parent / "configs" / "Qwen3-14B.json"))
    f = rep.finding("capacity")
    assert (f.verdict, f.triggered) == ("no_metrics", False)
    assert f.message.endswith("; from its start-up: the pool holds 1 request of max_model_len 32,768 tokens at once "
                              "(42,640 token slots; the 1 null block vLLM counts in its printed size holds none) "
                              "and max_num_seqs 256 (vLLM default for this version (ledger "
                              "rule)) lets more run, so under load vLLM preempts once the running requests need more "
                              "blocks than are free; none can at --max-num-seqs 1 or fewer")
