"""`plan --help` on --data-parallel-size, --enable-dp-attention and --moe-a2a-backend: vLLM's DP ranks of a MoE model
and SGLang's DP attention (at --dp-size = --ep-size = --tp, with --moe-a2a-backend none or deepep) are simulated too,
so the help says so instead of "plan only" (it said SGLang's DP attention and the all-to-all backend were plan only
after `simulate` had taken them)."""

from __future__ import annotations

from cli_run import run_cli


def test_the_dp_help_says_what_simulate_runs():
    sim = run_cli("simulate", "Qwen/Qwen3-30B-A3B", "--gpu", "H100", "-dp", "2", "--enable-expert-parallel", "--trace",
                  "azure-conv", "--num-requests", "20", "--rate", "2", "--max-model-len", "8K")
    assert sim.exit_code == 0 and "data parallel: 2 DP ranks in lock-step on 2 GPUs" in sim.stdout
    words = " ".join(run_cli("plan", "--help").stdout.split())
    assert "Plan only; the simulator refuses it" not in words
    assert "`simulate` runs vLLM's DP ranks too, and SGLang's DP attention at --dp-size = --ep-size = --tp" in words
    assert "plan only" not in words.lower()


def test_simulate_runs_the_sglang_dp_attention_the_plan_help_names():
    # DeepSeek-V3 on 8 H200s, SGLang 0.5.23: --enable-dp-attention --dp-size 8 with DeepEP, 8 ranks of attention TP 1
    # in the one TP group of 8 GPUs (not DP × TP = 64), each its own pool of 113,959 tokens (`plan` prints the same
    # 113,959 for these flags at --max-model-len 32768: 7.46 GiB ÷ 70,272 B per token; 143,086 before MLA's bfloat16
    # w_kc/w_vc copies, 128 heads × 256 × 512 × 2 B × 61 layers = 1.91 GiB a rank)
    sim = run_cli("simulate", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "--engine", "sglang", "--tp", "8",
                  "--ep-size", "8", "--enable-dp-attention", "--dp-size", "8", "--moe-a2a-backend", "deepep",
                  "--prompt-lengths", "2000", "--output-lengths", "300", "--rate", "4", "--num-requests", "40",
                  "--max-model-len", "32768")
    out = " ".join(sim.stdout.split())
    assert sim.exit_code == 0 and "data parallel: 8 DP ranks in lock-step on 8 GPUs" in out
    assert "8 × 113,959 = 911,672" in out
    words = " ".join(run_cli("plan", "--help").stdout.split())
    assert "deepep (EP = TP, shared experts whole on every GPU, DeepEP's reserve); simulate takes it" in words
