"""`plan --help` on --data-parallel-size: vLLM's DP ranks of a MoE model are simulated too (`simulate -dp 2
--enable-expert-parallel` runs two lock-step ranks), so the help no longer says the simulator refuses them; only
SGLang's DP attention is plan only."""

from __future__ import annotations

from cli_run import run_cli


def test_the_dp_help_says_what_simulate_runs():
    sim = run_cli("simulate", "Qwen/Qwen3-30B-A3B", "--gpu", "H100", "-dp", "2", "--enable-expert-parallel", "--trace",
                  "azure-conv", "--num-requests", "20", "--rate", "2", "--max-model-len", "8K")
    assert sim.exit_code == 0 and "data parallel: 2 DP ranks in lock-step on 2 GPUs" in sim.stdout
    words = " ".join(run_cli("plan", "--help").stdout.split())
    assert "Plan only; the simulator refuses it" not in words
    assert "`simulate` runs vLLM's DP ranks too; SGLang's DP attention is plan only" in words
