"""Custom all-reduce turned off by the engine (vLLM's --nnodes mode) or by --disable-custom-all-reduce is said once in
the non-torch term's source: off, and why, with the topology's own verdict named as overridden — never "on" and then
"off" in the same cell."""

from __future__ import annotations

import json

from cli_run import run_cli

L70 = ("plan", "meta-llama/Llama-3.1-70B-Instruct", "--gpu", "H100", "--tp", "8")


def _non_torch_source(*extra: str) -> str:
    d = json.loads(run_cli(*L70, *extra, "--json").stdout)
    return next(x["source"] for x in d["memory"]["deductions"] if x["name"] == "non-torch memory")


def test_nnodes_mode_says_off_once():
    # TP 8 × PP 2 on 2 nodes: each TP group sits in one node (the topology allows it), but vLLM 0.19's --nnodes 2 mode
    # (multiprocessing across nodes, 0.11.1–0.26) disables it for every group
    v19 = ("--engine-version", "0.19.0")
    src = _non_torch_source("--pp", "2", "--nnodes", "2", *v19)
    assert "custom all-reduce on" not in src and src.count("custom all-reduce off") == 1
    assert ("custom all-reduce off: vLLM's --nnodes 2 (multiprocessing across nodes) disables it for every group "
            "(config/parallel.py ParallelConfig._verify_args, 0.11.1, 0.19.0 and 0.26.0), where the topology alone "
            "would allow it (TP 8, one node, all-to-all links): 0 MiB of its buffers less") in src
    verbose = run_cli(*L70, "--pp", "2", "--nnodes", "2", "--verbose", *v19).stdout
    assert "custom all-reduce on (TP 8" not in verbose
    # 0.33.0's ParallelConfig has no such rule (custom_all_reduce.py decides per TP group): on, one node
    src = _non_torch_source("--pp", "2", "--nnodes", "2", "--engine-version", "0.33.0")
    assert "custom all-reduce off" not in src and "custom all-reduce on (TP 8, one node" in src


def test_disable_flag_says_off_once():
    src = _non_torch_source("--disable-custom-all-reduce")
    assert "custom all-reduce on" not in src and src.count("custom all-reduce off") == 1
    assert "custom all-reduce off (--disable-custom-all-reduce), where the topology alone would allow it" in src
