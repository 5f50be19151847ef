"""SGLang's flag names in plan, simulate and search (cli/sglang_names.py): read as kvledger's own under SGLang, refused
with the vLLM name under vLLM."""

from __future__ import annotations

import pytest
from cli_run import cli_json, refused

from kvledger.cli.search_flags import SearchAxesFlags

L70 = "meta-llama/Llama-3.3-70B-Instruct"


def test_sglangs_names_plan_what_kvledgers_names_plan():
    # search's SGLang launch line, back into plan: the same settings as --tp 4 --max-model-len 32768
    # --max-num-seqs 256 --max-num-batched-tokens 16384 --block-size 16
    ours = cli_json("plan", L70, "--gpu", "h200-sxm", "--engine", "sglang", "--tp", "4", "--max-model-len", "32768",
                    "--max-num-seqs", "256", "--max-num-batched-tokens", "16384", "--block-size", "16")
    theirs = cli_json("plan", L70, "--gpu", "h200-sxm", "--engine", "sglang", "--tp-size", "4", "--context-length",
                      "32768", "--max-running-requests", "256", "--chunked-prefill-size", "16384", "--page-size", "16")
    assert theirs["memory"] == ours["memory"] and theirs["settings"] == ours["settings"]
    s = theirs["settings"]
    assert (s["tp"], s["max_model_len"], s["max_num_seqs"], s["max_num_batched_tokens"], s["block_size"]) == (
        4, 32768, 256, 16384, 16)
    # the given chunk enters the reserve, the given cap of 256 running requests cuts the decode graphs (512 → 256):
    # 512 + 1.5 × 16,384 + 2 × 256 + 592 (74 prefill graph sizes up to 16,384 × 8 MiB) + 4/8 × 1,024 = 26,704 MiB
    # → round(117,067 / 143,771, 3) = round(0.81426, 3) = 0.814
    assert theirs["memory"]["fraction"] == 0.814


@pytest.mark.parametrize("args,words", [
    (("--tp-size", "4"), "--tp-size is SGLang's flag; vLLM's is --tp: pass --tp 4, or --engine sglang"),
    (("--engine", "trtllm", "--context-length", "8192"),
     "--context-length is SGLang's flag; TensorRT-LLM's is --max-model-len: pass --max-model-len 8192"),
    (("--chunked-prefill-size", "4096"), "vLLM's is --max-num-batched-tokens"),
    (("--engine", "sglang", "--tp-size", "4", "--tp", "2"), "--tp-size 4 and --tp 2 name the same setting"),
])
def test_sglang_names_under_another_engine_are_refused_with_its_name(args, words):
    msg = refused("plan", L70, "--gpu", "h200-sxm", *args)
    assert words in msg and "\n" not in msg, msg


def test_simulate_takes_them_with_policy_sglang_only():
    msg = refused("simulate", "meta-llama/Llama-3.1-8B", "--gpu", "h100-sxm", "--max-running-requests", "64")
    assert msg.startswith("--max-running-requests is SGLang's flag; vLLM's is --max-num-seqs: pass --max-num-seqs 64")


def test_search_takes_its_sglang_lines_names_as_its_axes():
    # search writes a vLLM and an SGLang line per candidate: the SGLang spellings of its three axes are its axes
    ax = SearchAxesFlags(tp_size="1,2", max_running_requests="128", chunked_prefill_size="4096")
    assert (ax.tp, ax.max_num_seqs, ax.max_num_batched_tokens) == ("1,2", "128", "4096")


def test_nnodes_is_sglangs_flag_too():
    # TP 16 over two 8-GPU H100 nodes, as SGLang runs DeepSeek-V3 (--nnodes 2): planned, not refused
    d = cli_json("plan", "deepseek-ai/DeepSeek-V3", "--gpu", "h100-sxm", "--engine", "sglang", "--tp", "16",
                 "--nnodes", "2")
    assert (d["settings"]["tp"], d["settings"]["nnodes"]) == (16, 2)
