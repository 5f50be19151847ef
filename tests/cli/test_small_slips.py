"""Small slips a fresh-user trial found: T4's bf16 rate, and the two weights figures of ``plan --verbose``."""

from __future__ import annotations

from typer.testing import CliRunner

from kvledger.catalog.gpus import get_gpu
from kvledger.cli.main import app

runner = CliRunner(env={"COLUMNS": "250"})


def test_t4_shows_no_bf16_and_its_fp16_rate():
    # T4 is sm75: vLLM refuses bfloat16 below compute capability 8.0 and serves in float16; gpus.csv keeps its FP16
    # dense rate (65 TFLOPS, NVIDIA's T4 datasheet) in the bf16 column for the roofline
    t4, h100 = get_gpu("T4"), get_gpu("H100")
    assert t4.bf16_supported is False and h100.bf16_supported is True
    out = runner.invoke(app, ["gpus"]).stdout
    row = next(line for line in out.splitlines() if "nvidia_t4" in line)
    assert "no bf16 (FP16 65)" in row
    assert "below compute capability 8.0 vLLM serves in float16" in " ".join(out.split())


def test_plan_verbose_labels_both_weights_figures():
    # Llama-3.1-8B: 8,030,261,248 params × 2 B = 16,060,522,496 B = 14.96 GiB of checkpoint tensors; the memory plan
    # adds vLLM's RoPE cos/sin buffer, 33,554,432 B (32 MiB): 16,094,076,928 B = 14.99 GiB
    out = " ".join(runner.invoke(app, ["plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--verbose"]).stdout.split())
    assert "weights (checkpoint tensors, whole model)" in out and "14.96 GiB" in out
    assert "the memory plan's weights term (14.99 GiB) is per GPU, as vLLM allocates them, with its RoPE cos/sin" in out
    assert "− weights (+ RoPE buffer)" in out
