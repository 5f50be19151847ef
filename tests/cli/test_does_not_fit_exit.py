"""A deployment that cannot start because its memory plan does not fit ends every command with exit status 3, as
``plan`` does (README, "exit status"), with the same one-paragraph error; ``--json`` says 3 in its error object too."""

from __future__ import annotations

import json

import pytest

QWEN = "Qwen/Qwen3-32B"
# Qwen3-32B on one L40S (vLLM 0.33): device total 47,833,939,968 B = 44.55 GiB × gpu_memory_utilization 0.92 = 40.99
# GiB, less weights 61.03 + activation peak 0.66 + non-torch 0.25 + CUDA graphs 0.73 = 62.67 GiB: short by 21.68 GiB
SHORT = "the model does not fit: the memory plan is short by 21.68 GiB before any KV cache"



@pytest.mark.parametrize("argv", [
    ["simulate", QWEN, "--gpu", "L40S"],
    ["goodput", "--simulate", QWEN, "--gpu", "L40S", "--slo", "ttft=200ms,tpot=50ms"],
    ["cost", "--simulate", QWEN, "--gpu", "L40S", "--slo", "ttft=200ms,tpot=50ms"],
    ["report", QWEN, "--gpu", "L40S", "--slo", "ttft=200ms,tpot=50ms", "--out", "never-written.html"],
])
def test_weights_too_big_exit_3_in_every_command_as_plan_does(monkeypatch, capsys, tmp_path, argv, cli_entry):
    monkeypatch.chdir(tmp_path)  # report's --out: refused before anything is written
    code, _, err = cli_entry(*argv)
    assert code == 3 and SHORT in err and err.count("\n") == 1  # one line: the one-paragraph error
    assert not (tmp_path / "never-written.html").exists()


def test_a_max_model_len_no_pool_holds_exits_3_with_3_in_the_json_error(monkeypatch, capsys, cli_entry):
    # Qwen3-32B on one H100 SXM: 8.61 GiB of KV per GPU = 2,204 blocks of 16 tokens × 256 KiB/token (4 MiB each),
    # 2,203 usable after the null block; one 40,960-token request needs 40,960 / 16 = 2,560 blocks: vLLM would not
    # start, and `plan` exits 3 for it ("max_model_len does not fit")
    code, out, err = cli_entry("simulate", QWEN, "--gpu", "H100-SXM", "--json")
    assert code == 3 and "2,203 usable blocks" in err and "needs 2,560 blocks" in err
    e = json.loads(out)["error"]
    assert e["exit_code"] == 3 and e["type"] == "DoesNotFitError" and "--max-model-len 35248" in e["message"]
    code, _, _ = cli_entry("plan", QWEN, "--gpu", "H100-SXM")
    assert code == 3


def test_a_judgment_on_a_plan_without_kv_memory_exits_3(monkeypatch, capsys, cli_entry):
    # fp8-kv weighs the KV pool: none is left (available −21.68 GiB, the shortfall above)
    code, _, err = cli_entry("fp8-kv", QWEN, "--gpu", "L40S")
    assert code == 3 and "leaves no KV cache memory on NVIDIA L40S at TP 1 (available -21.68 GiB)" in err


def test_a_bad_flag_still_exits_2(monkeypatch, capsys, cli_entry):
    # only the memory-fit refusal is reclassified: --num-gpu-blocks-override 1 leaves no usable block, but the model
    # fits (the message says so): a bad value, exit 2
    code, _, err = cli_entry("simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100",
                          "--num-gpu-blocks-override", "1")
    assert code == 2 and "--num-gpu-blocks-override 2 or more" in err


def test_sglang_pool_without_kv_exits_3_not_a_traceback(cli_entry):
    # DeepSeek-V2-Lite on 2 L4, SGLang TP 2 --ep-size 2: free before the weights load 21.63 GiB less weights 14.66 +
    # RoPE buffer 0.04 + segment tails 0.04 + MLA w_kc/w_vc copies 8 heads × 256 × 512 × 2 B × 27 layers = 0.05 + load
    # overhead 0.07 + reserve (1 − mem_fraction_static 0.629) × 21.63 = 8.03 GiB is 22.88 GiB: short by 1.25 GiB, so
    # max_running_requests is 0 for want of KV, not for Mamba state slots
    # (the simulator raised StopIteration looking for that note before)
    code, _, err = cli_entry("simulate", "deepseek-ai/DeepSeek-V2-Lite", "--gpu", "L4", "--policy", "sglang",
                             "--tp", "2", "--ep-size", "2", "--num-requests", "10", "--rate", "1")
    assert code == 3 and "the model does not fit: the memory plan is short by 1.25 GiB before any KV cache" in err
