"""Issue 20's fresh-user trial of `kvledger plan`: impossible topologies refused, MI250X planned as one GCD."""

from __future__ import annotations

import subprocess
import sys

import pytest
from cli_run import MODEL, refused, run_cli


def run(*args):
    return run_cli("plan", MODEL, *args)


@pytest.mark.parametrize("args,words", [
    # TP 2 is 2 GPUs: 8 nodes leave 6 without a rank
    (("--tp", "2", "--nnodes", "8"), ("--nnodes 8 is more nodes than --tp 2 has GPUs (2)", "6 nodes")),
    # TP 4 × PP 2 = 8 GPUs: 8 ÷ 3 is not whole (vLLM puts world_size // nnodes ranks on each node)
    (("--tp", "4", "--pp", "2", "--nnodes", "3"), ("does not divide the 8 GPUs of --tp 4 × --pp 2",)),
    # vLLM 0.6.3's mp executor has no multi-node mode (0.11.0's config/parallel.py has no nnodes)
    (("--tp", "2", "--nnodes", "2", "--distributed-executor-backend", "mp", "--engine-version", "0.6.3"),
     ("vLLM 0.6.3's multiprocessing executor runs on one node",)),
    # SGLang's plan does not read --enforce-eager (SGLang has its own --nnodes: tests/cli/test_sglang_names.py)
    (("--engine", "sglang", "--tp", "2", "--enforce-eager"), ("--enforce-eager is a vLLM flag",)),
])
def test_impossible_topologies_are_refused_in_one_line(args, words):
    msg = refused("plan", MODEL, "--gpu", "H100", *args)
    assert all(w in msg for w in words) and "\n" not in msg, msg


def test_the_console_entry_exits_2_without_a_traceback():
    argv = ["plan", MODEL, "--gpu", "H100", "--tp", "2", "--nnodes", "8"]
    p = subprocess.run([sys.executable, "-m", "kvledger.cli.main", *argv], capture_output=True, text=True)
    assert p.returncode == 2 and "Traceback" not in p.stderr and p.stderr.startswith("error: --nnodes 8"), p.stderr


@pytest.mark.parametrize("args", [("--tp", "4", "--pp", "2", "--nnodes", "2"), ("--tp", "2", "--nnodes", "2"),
                                  ("--tp", "2", "--nnodes", "2", "--distributed-executor-backend", "ray",
                                   "--engine-version", "0.6.3")])
def test_possible_topologies_still_plan(args):
    assert run("--gpu", "H100", *args).exit_code == 0


def test_mi250x_plans_one_gcd():
    # one GCD: 65,520 MiB = 63.98 GiB (not the package's 127.71 GiB)
    r = run("--gpu", "MI250X")
    assert r.exit_code == 0 and "device total 63.98 GiB" in r.output and "one GCD" in r.output


@pytest.mark.parametrize("gpu,version,warned", [
    ("B200", "0.6.3", True),  # sm100: first release built for it is 0.9.0 (default wheel on CUDA 12.8)
    ("B200", "0.8.5", True), ("B200", "0.9.0", False),
    ("rtx-5090", "0.8.5", True),  # sm120 likewise
    ("H100", "0.6.3", False),  # sm90 is in every release planned
])
def test_versions_whose_wheels_lack_the_gpu_arch_are_warned_not_refused(gpu, version, warned):
    r = run("--gpu", gpu, "--engine-version", version, "--max-model-len", "8192")
    assert r.exit_code == 0, r.output
    line = f"note: vLLM {version} ships no kernels for"
    assert (line in r.output) is warned, r.output
    if warned:
        assert "first release built for" in r.output and "0.9.0" in r.output


@pytest.mark.parametrize("engine,gpu,version", [("sglang", "rtx-5090", "0.4.1"), ("trtllm", "B200", "0.13")])
def test_sglang_and_trtllm_versions_without_blackwell_kernels_are_warned(engine, gpu, version):
    # engine_gpu_support: SGLang's first PyPI install with sm100/sm120 kernels is 0.5.2, TensorRT-LLM's B200 support
    # starts at 0.17.0; the summary shows the note, as vLLM's.
    r = run("--gpu", gpu, "--engine", engine, "--engine-version", version, "--max-model-len", "8192")
    assert r.exit_code == 0, r.output
    assert "ships no kernels for" in r.output and version in r.output


def test_sglang_graph_flags_reach_the_plan_and_its_json():
    # SGLang's own spellings: reserve 512 + 1.5 × 8,192 + 2 × 1,024 + 464 (58 prefill graph sizes × 8 MiB) + 512
    # = 15,824 MiB on the H200 (143,771 MiB) → round(127,947 / 143,771, 3) = 0.89; the JSON's settings carry the cap
    # in cuda_graph_max_batch_size (TensorRT-LLM's key, kept stable)
    from cli_run import cli_json

    d = cli_json("plan", "meta-llama/Llama-3.3-70B-Instruct", "--gpu", "h200-sxm", "--engine", "sglang", "--tp", "4",
                 "--cuda-graph-max-bs", "1024", "--json")
    assert (d["memory"]["fraction"], d["settings"]["cuda_graph_max_batch_size"]) == (0.89, 1024)
    d = cli_json("plan", "meta-llama/Llama-3.3-70B-Instruct", "--gpu", "h200-sxm", "--engine", "sglang", "--tp", "4",
                 "--disable-cuda-graph", "--json")
    assert (d["memory"]["fraction"], d["settings"]["no_cuda_graph"]) == (0.907, True)
    # --disable-piecewise-cuda-graph (SGLang's name before 0.5.14) takes the 464 MiB out alone: 14,336 MiB → 0.9;
    # the settings' JSON names it, and leaves it out while not given (the JSON of earlier plans is unchanged)
    d = cli_json("plan", "meta-llama/Llama-3.3-70B-Instruct", "--gpu", "h200-sxm", "--engine", "sglang", "--tp", "4",
                 "--disable-piecewise-cuda-graph", "--json")
    assert (d["memory"]["fraction"], d["settings"]["disable_prefill_cuda_graph"]) == (0.9, True)
    d = cli_json("plan", "meta-llama/Llama-3.3-70B-Instruct", "--gpu", "h200-sxm", "--engine", "sglang", "--tp", "4",
                 "--json")
    assert "disable_prefill_cuda_graph" not in d["settings"]
