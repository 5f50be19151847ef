"""`kvledger doctor` on preemptions at gpu_memory_utilization 0.95: the options do not raise it (they step by 0.05 up
to 0.95), and the summary says what raising it could still give, so "should we raise it?" has an answer."""

from __future__ import annotations

import json
from pathlib import Path

from cli_run import run_cli

LOG = (Path(__file__).parents[1] / "fixtures" / "vllm_startups_0_19" / "logs"
       / "meta-llama-llama-3-1-8b---h100-80gb--tp1pp1dp1--8192.log")
# vLLM 0.19.0's metrics line (v1/metrics/loggers.py): 83 preemptions with the KV cache 99.1–99.9 % full
_METRICS = [(196, 61, 12, 99.1), (190, 88, 30, 99.8), (188, 102, 41, 99.9)]


def _incident(tmp_path: Path) -> Path:
    lines = [f"(APIServer pid=1) INFO 04-22 00:{8 + i:02d}:00 [v1/metrics/loggers.py:259] Engine 000: Avg prompt "
             f"throughput: 7000.0 tokens/s, Avg generation throughput: 3500.0 tokens/s, Running: {r} reqs, Waiting: "
             f"{w} reqs, Preemptions: {p}, GPU KV cache usage: {kv:.1f}%, Prefix cache hit rate: 0.0%"
             for i, (r, w, p, kv) in enumerate(_METRICS)]
    path = tmp_path / "incident.log"
    path.write_text(LOG.read_text() + "\n".join(lines) + "\n")
    return path


def test_the_utilization_not_raised_says_what_raising_it_could_give(tmp_path):
    res = run_cli("doctor", str(_incident(tmp_path)))
    assert res.exit_code == 0, res.output
    text = " ".join(res.stdout.split())
    # 79.19 GiB × (1 − 0.95) = 3.96 GiB outside the budget; 0.19 captures the CUDA graphs there after sizing the KV
    # cache (0.91 GiB, line 56): the ledger's bound is 3.05 GiB = 3.05 GiB ÷ 2 MiB = 1,561 blocks, 5.2 % of the log's
    # 29,751. vLLM's own DEBUG line 58 (0.19 gpu_worker.py::compile_or_warm_up_model) measures it: --kv-cache-memory=
    # 64,959,076,352 B to fully use the memory free at start-up, against 58.11 GiB = 62,395,137,393 B in use:
    # 2,563,938,959 B = 2.39 GiB = 1,222 blocks of 2,097,152 B, 1,222 ÷ 29,751 = 4.1 % (it also keeps the 0.51 GiB
    # the CUDA context held at start-up and a 150 MiB buffer)
    assert ("→ --gpu-memory-utilization is not raised past 0.95 (the options step it by 0.05 up to 0.95): 0.95 leaves "
            "3.96 GiB of the 79.19 GiB device outside vLLM's budget, 0.91 GiB of it the CUDA graphs captured after the "
            "KV cache was sized, line 56; the rest also holds the CUDA context and the allocator's slack (the ledger's "
            "upper bound: at most 3.05 GiB = 1,561 blocks (+5.2% on 29,751)); vLLM's own DEBUG line 58 (gpu_worker.py) "
            "measures it: '--kv-cache-memory=64959076352' (60.50 GiB) would fully use the memory free at start-up "
            "after the weights, activation peak, non-torch memory, CUDA graphs and a 150 MiB buffer, against 58.11 GiB "
            "of KV cache in use, so raising it gives the KV cache 2.39 GiB = 1,222 blocks (+4.1% on 29,751; source: "
            "that line, not the ledger's bound), against twice the blocks for --kv-cache-dtype fp8") in text
    assert "→ --kv-cache-dtype fp8: 59,504 blocks per replica" in text
    d = json.loads(run_cli("doctor", str(_incident(tmp_path)), "--json").stdout)
    cap = next(f for f in d["findings"] if f["name"] == "capacity")
    assert not any(o["action"].startswith("--gpu-memory-utilization") for o in cap["options"])
    assert any("2.39 GiB = 1,222 blocks (+4.1% on 29,751; source: that line" in n for n in cap["options"][0]["notes"])


def test_without_vllm_debug_line_the_figure_is_the_ledgers_upper_bound_and_says_so(tmp_path):
    # the same incident with line 58 (vLLM's DEBUG '--kv-cache-memory=… to fully utilize gpu memory') cut out, as a
    # server at INFO level logs it: the 3.05 GiB bound of the test above, named as an upper bound from the ledger
    path = _incident(tmp_path)
    path.write_text("".join(x for x in path.read_text().splitlines(keepends=True) if "to fully utilize" not in x))
    text = " ".join(run_cli("doctor", str(path)).stdout.split())
    assert ("the rest also holds the CUDA context and the allocator's slack, so raising it gives the KV cache at most "
            "3.05 GiB = 1,561 blocks (+5.2% on 29,751): an upper bound (source: the ledger; the log has no vLLM DEBUG "
            "'--kv-cache-memory=… to fully utilize gpu memory' line") in text


def test_the_capacity_summary_names_the_queue_behind_the_preemptions(tmp_path):
    # 12 + 30 + 41 = 83 preemptions (vLLM V1 prints each interval's count); the most waiting among those lines is 102,
    # on the third appended line: the fixture's 66 lines + 3 = line 69. V1's scheduler puts a preempted request back at
    # the head of the waiting queue (0.19 scheduler.py::_preempt_request, prepend_request), ahead of the new arrivals
    res = run_cli("doctor", str(_incident(tmp_path)))
    text = " ".join(res.stdout.split())
    assert ("FOUND capacity (capacity_bound_preemptions): 83 preemption(s) with the KV cache full (usage up to 99.9%) "
            "and up to 102 requests waiting for a first token (line 69; behind the preempted ones, which vLLM puts "
            "back at the head of the queue to recompute: that wait is the TTFT that grows): a capacity problem") in text


def test_one_more_server_is_set_beside_tensor_parallel_2(tmp_path):
    # the requests at saturation: usage × 476,000 slots ÷ running on the 3 lines, 2,407 / 2,500 / 2,529 tokens, median
    # 2,500. "Add a GPU" either way on 2 GPUs: --tensor-parallel-size 2 holds 1,044,720 slots (the ledger's TP 2
    # re-plan) ÷ 2,500 = 417 such requests; two servers as logged hold 2 × (476,000 ÷ 2,500 = 190) = 380
    res = run_cli("doctor", str(_incident(tmp_path)))
    text = " ".join(res.stdout.split())
    assert "→ --tensor-parallel-size 2: 65,296 blocks per replica of 2 GPUs (1 as logged), 417 requests" in text
    assert ("→ more servers instead: 2 servers as logged on the 2 GPUs of --tensor-parallel-size 2, the traffic split "
            "between them: 2 × 190 = 380 requests of the size observed at saturation (each keeps its 29,751 blocks), "
            "against 417 for --tensor-parallel-size 2; no all-reduce in their steps, but each preempts again once its "
            "share of the traffic outgrows 190 such requests") in text
