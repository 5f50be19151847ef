"""``kvledger doctor`` on logs that end during start-up: cut before the server shows it started (exit 1, not 0), and
a CUDA out-of-memory error in vLLM's profile run (its device total read, the batch limits among the fixes).

Logs (tests/fixtures/vllm_logs/README.md, "Constructed logs"):
- constructed_v1_startup_cut_after_loading.log: a vLLM 0.9.2 start-up cut after "Model loading took" (line 14);
- constructed_v1_startup_oom_in_profile_run.log: the same start-up, then a traceback through
  determine_available_memory (line 23) → profile_run (line 24) ending in PyTorch's OOM line (line 25).
"""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from kvledger.analyses.doctor.diagnose import diagnose, diagnose_file
from kvledger.cli.main import app
from kvledger.evidence.vllm_log import parse_vllm_log
from kvledger.units import GiB

LOGS = Path(__file__).parents[1] / "fixtures" / "vllm_logs"
CUT = LOGS / "constructed_v1_startup_cut_after_loading.log"
OOM = LOGS / "constructed_v1_startup_oom_in_profile_run.log"
runner = CliRunner()


def test_a_log_cut_during_start_up_exits_1_in_text_and_json():
    # no "Starting vLLM API server", uvicorn ready line or metrics line: the log does not show that the server
    # started, so a script must not take the answer as a healthy server's (README: exit 1)
    for args in ([], ["--json"]):
        res = runner.invoke(app, ["doctor", str(CUT), *args])
        assert res.exit_code == 1, args
    d = json.loads(runner.invoke(app, ["doctor", str(CUT), "--json"]).output)
    assert d["unfinished"] is True and d["failed"] is False and d["not_started"] is False
    assert any("it ends during start-up — still starting, or cut" in w for w in d["warnings"])


def test_a_complete_healthy_log_still_exits_0():
    # v0.10.2_qwen3-next-80b_h200_tp2.log prints "Starting vLLM API server" (line 30) and no failure
    res = runner.invoke(app, ["doctor", str(LOGS / "v0.10.2_qwen3-next-80b_h200_tp2.log"), "--json"])
    d = json.loads(res.output)
    assert res.exit_code == 0 and d["unfinished"] is False and d["failed"] is False
    # a log that begins with metrics lines (serving from its first line) is not unfinished either
    res = runner.invoke(app, ["doctor", str(LOGS / "v0.10_metrics_kv_near_full.log")])
    assert res.exit_code == 0


def test_the_oom_line_gives_the_device_total_where_no_other_line_does():
    # line 25: "GPU 0 has a total capacity of 79.19 GiB" (PyTorch's format_size: GiB = 2**30 B, 2 decimals)
    log = parse_vllm_log(OOM.read_text())
    st = log.startup
    assert st.total_gpu_memory_bytes == round(79.19 * GiB) and st.lines["total_gpu_memory_bytes"] == 25
    # requested = total × the args' utilization 0.9 (line 3): 79.19 × 0.9 = 71.271 GiB
    assert st.requested_memory_bytes == int(round(79.19 * GiB) * 0.9)
    assert any(n.startswith("device total 79.19 GiB: from line 25, the CUDA out-of-memory error's 'total capacity'")
               for n in st.notes)
    rep = diagnose_file(OOM)
    # no FlashAttention version line: 79.19 GiB is both the A100 80GB's and the H100 80GB's measured total, so
    # log_gpu plans a generic GPU of that total (as for any other device-total line), saying where it came from
    assert rep.gpu == "GPU with 79.19 GiB"
    src = rep.startup.settings["gpu"]["source"]
    assert src.startswith("device total 79.19 GiB from the log (line 25, the total capacity its CUDA out-of-memory "
                          "error prints)")
    assert rep.startup.row("device total").log_value == round(79.19 * GiB)


def test_another_device_total_line_wins_over_the_oom_line():
    # the V0 0.7–0.8 budget line prints total_gpu_memory (79.19 GiB) on line 1; an OOM line later printing 80.00 GiB
    # (another process's view) does not replace it
    text = ("INFO 03-21 20:15:45 [worker.py:267] the current vLLM instance can use total_gpu_memory (79.19GiB) x "
            "gpu_memory_utilization (0.90) = 71.27GiB\n"
            "ERROR 03-21 20:15:46 [core.py:1] torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 1.00 GiB. "
            "GPU 0 has a total capacity of 80.00 GiB of which 0.10 GiB is free.\n")
    st = parse_vllm_log(text).startup
    assert st.total_gpu_memory_bytes == round(79.19 * GiB) and st.lines["total_gpu_memory_bytes"] == 1
    assert not any("out-of-memory" in n for n in st.notes)


def test_an_oom_in_the_profile_run_names_the_batch_limits_among_the_fixes():
    # vLLM's profile run (gpu_model_runner.profile_run → _dummy_run(max_num_batched_tokens) → _dummy_sampler_run
    # over min(max_num_tokens, max_num_seqs) requests) sets the activation and sampler peak: lowering either shrinks it
    log = parse_vllm_log(OOM.read_text())
    assert log.failure_in_profile == (23, "determine_available_memory")
    f = diagnose_file(OOM).finding("startup_failure")
    assert f.verdict == "cuda_oom"
    assert ("; or lower --max-num-seqs / --max-num-batched-tokens (a smaller profile run): the allocation failed in "
            "vLLM's profile run (line 23: determine_available_memory)") in f.message
    res = runner.invoke(app, ["doctor", str(OOM), "--json"])
    assert res.exit_code == 1 and json.loads(res.output)["failed"] is True


def test_an_oom_in_cuda_graph_capture_is_not_called_the_profile_run():
    # _dummy_run also captures CUDA graphs after the KV cache is allocated (capture_model): not the profile run
    text = OOM.read_text().replace("in determine_available_memory", "in compile_or_warm_up_model").replace(
        "self.model_runner.profile_run()", "self.model_runner.capture_model()")
    log = parse_vllm_log(text)
    assert log.failure_in_profile is None
    assert "a smaller profile run" not in diagnose(log).finding("startup_failure").message
