"""The report's concurrency line states the workload's own lengths (its mean and max prompt + output) where the
report runs a synthetic workload, not the fixed 8K/128K levels (a long-context trial's finding); a trace keeps them
(the report golden)."""

from __future__ import annotations

import re
import shlex
from types import SimpleNamespace

from cli_run import MODEL, cli_json

from kvledger.analyses.serving.report_workload import plan_contexts, workload_contexts


def test_a_synthetic_reports_concurrency_is_at_its_mean_and_max_context(tmp_path):
    out = tmp_path / "r.html"
    d = cli_json("report", MODEL, "--gpu", "H100", "--slo", "ttft=20s,tpot=100ms", "--api", "OpenAI:gpt-4.1",
                 "--prompt-lengths", "fixed:100000", "--output-lengths", "fixed:1000", "--num-requests", "50",
                 "--utilization", "0.5", "--out", str(out), "--json")
    # every request is 100,000 + 1,000 = 101,000 tokens: mean and max alike
    assert d["inputs"]["workload_contexts"] == {"mean_tokens": 101000, "max_tokens": 101000}
    assert " --context 1K,2K,4K,8K,16K,32K,64K,101000,128K " in d["commands"]["plan"]
    assert cli_json(*shlex.split(d["commands"]["plan"])[1:]) == d["plan"]  # the line as printed: the section again
    # Llama-3.1-8B on one H100: 28,160 blocks of 16 tokens, 28,159 usable (block 0 is vLLM's null block);
    # 101,000 tokens = ⌈101,000 / 16⌉ = 6,313 blocks → 28,159 // 6,313 = 4 requests at once
    assert d["plan"]["memory"]["num_gpu_blocks"] == 28160
    row = next(r for r in d["plan"]["concurrency"] if r["context_tokens"] == 101000)
    assert row["blocks_per_request"] == 6313 and row["max_requests"] == 4
    text = re.sub(r"<[^>]+>", "", out.read_text()).replace("&#x27;", "'")
    assert ("Concurrency at this workload's lengths (prompt + output per request): 4 requests at its 101,000 tokens "
            "(every request's) (KV capacity).") in text
    assert "requests at 8K tokens" not in text


def test_the_workloads_mean_and_max_context_from_its_drawn_requests():
    # prompts of 30,000 or 90,000 tokens (half each, drawn), outputs 1,000: the largest context is 91,000, and the
    # mean is 31,000 + 60,000 × k / 50 for the k long prompts drawn, so a multiple of 1,200 above 31,000
    req = SimpleNamespace(prompt_lengths="mix:1*fixed:30000,1*fixed:90000", output_lengths="fixed:1000",
                          arrival_cv=None, num_requests=50, seed=0)
    w = workload_contexts(req)
    assert w["max_tokens"] == 91000 and (w["mean_tokens"] - 31000) % 1200 == 0 and 31000 < w["mean_tokens"] < 91000
    assert plan_contexts(req) == tuple(sorted({1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072,
                                               w["mean_tokens"], 91000}))
    # a trace: no workload lengths given, the fixed levels alone
    trace = SimpleNamespace(prompt_lengths=None, output_lengths=None, arrival_cv=None, num_requests=50, seed=0)
    assert workload_contexts(trace) is None and plan_contexts(trace) == (1024, 2048, 4096, 8192, 16384, 32768, 65536,
                                                                         131072)
