"""The no-winner line's clause when nothing fits one node: search's TP axis stops where the caller's ``--tp`` does
(default 1, 2, 4, 8), so a model whose weights need more GPUs than one node holds (DeepSeek-V3 on H100) gets no
candidate unless asked for a layout across nodes; the clause says so and names the flags that ask."""

from __future__ import annotations

import math
from typing import Any

from kvledger.units import GiB

__all__ = ["multinode_words", "nodes_for"]


def nodes_for(need: int, per_node: int) -> int:
    """The nodes of ``per_node`` GPUs to suggest for a model whose weights alone need ``need`` GPUs: enough to hold
    them, at least 2, rounded up to a power of two so that TP = nodes × per_node stays a power of two (attention heads
    divide by it; 3 nodes of 8 would be TP 24)."""
    nodes = max(2, math.ceil(need / per_node))
    return 1 << (nodes - 1).bit_length()


def multinode_words(rejected: list[dict[str, Any]]) -> str:
    """"; ..." for each GPU whose widest "does not fit" candidate fills a whole node (``node_size.gpus_per_node``):
    the GPUs its weights alone need (weight_bytes_model ÷ (gpu_memory_utilization × the GPU's memory), rounded up) and
    the flags that try TP across the nodes those GPUs fill (``nodes_for``); "" where a wider TP fits in one node or
    nothing says a node's size."""
    from kvledger.accounting.node_size import gpus_per_node
    from kvledger.catalog.gpus import get_gpu

    widest: dict[str, dict[str, Any]] = {}
    for e in rejected:
        if e.get("reason") == "does not fit" and e.get("plan") and e.get("tp"):
            if e["gpu_id"] not in widest or e["tp"] > widest[e["gpu_id"]]["tp"]:
                widest[e["gpu_id"]] = e
    out = []
    for gpu_id, e in widest.items():
        gpu = get_gpu(gpu_id)
        node = gpus_per_node(gpu)
        if node is None or e["tp"] < node[0]:
            continue
        p, n = e["plan"], node[0]
        usable = p["gpu_memory_utilization"] * gpu.memory_bytes
        need = math.ceil(p["weight_bytes_model"] / usable)
        k = nodes_for(need, n)
        out.append(f"; {gpu_id}: the widest tried, TP {e['tp']}, fills one {n}-GPU node ({node[1]}), and the weights "
                   f"alone ({p['weight_bytes_model'] / GiB:,.2f} GiB) need {need} GPUs at {p['gpu_memory_utilization']}"
                   f" × {gpu.memory_bytes / GiB:.2f} GiB: search tries a layout across nodes only when asked, --tp "
                   f"{k * n} (one TP group on {k} nodes, launched with --nnodes {k}) with --gpu-usd-per-hour to price "
                   f"it (no price row sells a multi-node cluster); it has no pipeline-parallel axis (kvledger plan "
                   f"--pp {k} --tp {n} checks PP {k} × TP {n})")
    return "".join(out)
