"""The launch lines of an engine whose TP group spans nodes: one line per node, as vLLM and SGLang start one."""

from __future__ import annotations

import shlex
from typing import Any

__all__ = ["on_nodes"]


def _join(words: list[str]) -> str:
    return " ".join(shlex.quote(w) for w in words)


def on_nodes(vllm: list[str], sglang: list[str], p: dict[str, Any]) -> tuple[str, str, str]:
    """(vLLM lines, SGLang lines, note) of an engine whose TP group spans ``p["nnodes"]`` nodes: one line per node.

    vLLM from 0.11.1 (``VLLM_NNODES_FROM``): ``--nnodes N --node-rank R --master-addr``, the nodes past 0 with
    ``--headless`` (``entrypoints/cli/serve.py``: a node with ``node_rank_within_dp > 0`` runs only the multiproc
    executor's workers; ``engine/arg_utils.py`` puts world_size ÷ nnodes ranks on each, and with DP ranks infers each
    node's ``data_parallel_size_local`` and first DP rank from ``--node-rank``, read in 0.19.0); before it, Ray across
    the nodes. SGLang: ``--nnodes N --node-rank R --dist-init-addr`` on every node."""
    from kvledger.accounting.vllm_custom_ar import VLLM_NNODES_FROM
    from kvledger.accounting.vllm_rules import version_tuple

    n = p["nnodes"]
    sg = "\n".join(f"node {r}: " + _join(sglang + ["--nnodes", str(n), "--node-rank", str(r), "--dist-init-addr",
                                                    "HEAD_IP:5000"]) for r in range(n))
    what = "the DP × TP ranks span" if p.get("data_parallel_size", 1) > 1 else "the TP group spans"
    where = f"{what} {n} nodes (HEAD_IP: node 0's address)"
    if (version_tuple(p.get("engine_version") or "") or VLLM_NNODES_FROM) < VLLM_NNODES_FROM:
        return (_join(vllm + ["--distributed-executor-backend", "ray"]), sg,
                f"{where}: start a Ray cluster over them first (ray start --head on node 0, ray start --address "
                "HEAD_IP:6379 on the others), then run the vLLM line on node 0")
    vl = "\n".join(f"node {r}: " + _join(vllm + ["--nnodes", str(n), "--node-rank", str(r), "--master-addr",
                                                  "HEAD_IP"] + (["--headless"] if r else [])) for r in range(n))
    past = "their DP ranks' engine cores, no API server" if p.get("data_parallel_size", 1) > 1 else "workers only"
    return vl, sg, f"{where}: one line per node, the nodes past 0 headless ({past})"
