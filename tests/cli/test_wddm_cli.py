"""plan --wddm from the command line: the one-line refusal on a server module and the start-up line of a vLLM plan."""

from __future__ import annotations

from cli_run import MODEL, refused, run_cli


def test_wddm_on_a_server_module_is_one_line_and_the_cli_prints_the_start_up():
    msg = refused("plan", MODEL, "--gpu", "H100", "--wddm")
    assert msg.startswith("--wddm: the NVIDIA H100 80GB SXM5 is a server module (SXM5)") and "\n" not in msg
    out = run_cli("plan", MODEL, "--gpu", "rtx5090", "--engine-version", "0.19.0", "--max-model-len", "32768",
                  "--wddm", "--gpu-memory-utilization", "0.95").output
    assert "warning (--wddm): gpu_memory_utilization 0.95 asks 30.25 GiB" in out
