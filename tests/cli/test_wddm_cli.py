"""plan --wddm from the command line: the one-line refusal on a server module and the start-up line of a vLLM plan."""

from __future__ import annotations

from cli_run import MODEL, refused, run_cli


def test_wddm_on_a_server_module_is_one_line_and_the_cli_prints_the_start_up():
    msg = refused("plan", MODEL, "--gpu", "H100", "--wddm")
    assert msg.startswith("--wddm: the NVIDIA H100 80GB SXM5 is a server module (SXM5)") and "\n" not in msg
    out = run_cli("plan", MODEL, "--gpu", "rtx5090", "--engine-version", "0.19.0", "--max-model-len", "32768",
                  "--wddm", "--gpu-memory-utilization", "0.95").output
    assert "warning (--wddm): gpu_memory_utilization 0.95 asks 30.25 GiB" in out


def test_a_start_the_engine_would_refuse_exits_3_as_a_plan_that_does_not_fit():
    # RTX 5090 under WDDM, vLLM 0.19: free at start-up 31.84 − 1.29 (hold) − 0.45 (this process) = 30.10 GiB.
    # 0.95 asks ceil(0.95 × 31.84) = 30.25 GiB, above the point: vLLM refuses to start (init_device), so the plan is
    # printed with the warning and the command ends with status 3, as a plan that does not fit does; 0.88 asks
    # 28.02 GiB, under even the low end (28.34): status 0.
    r = run_cli("plan", MODEL, "--gpu", "rtx5090", "--engine-version", "0.19.0", "--max-model-len", "32768",
                "--wddm", "--gpu-memory-utilization", "0.95")
    assert r.exit_code == 3 and "refuses to start" in r.output
    ok = run_cli("plan", MODEL, "--gpu", "rtx5090", "--engine-version", "0.19.0", "--max-model-len", "32768",
                 "--wddm", "--gpu-memory-utilization", "0.88")
    assert ok.exit_code == 0
