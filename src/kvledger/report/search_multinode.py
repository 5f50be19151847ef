"""The no-winner line's clause when nothing fits one node: search's TP axis stops where the caller's ``--tp`` does
(default 1, 2, 4, 8), so a model whose weights need more GPUs than one node holds (DeepSeek-V3 on H100) gets no
candidate unless asked for a layout across nodes; the clause says so and names the flags that ask. And the fix for
"does not fit" rejections: which term overflows, the weights alone or the weights with the engine's own memory."""

from __future__ import annotations

import math
from typing import Any

from kvledger.units import GiB

__all__ = ["multinode_words", "no_fit_words", "nodes_for"]


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
        if e.get("reason") == "does not fit" and "gpu_memory_utilization" in (e.get("plan") or {}) and e.get("tp"):
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


def _no_fit_kind(e: dict[str, Any]) -> tuple[bool, str] | None:
    """(the weights alone overflow, the numbers) for a "does not fit" entry with plan figures: the budget is
    gpu_memory_utilization × the GPU's CUDA total, the need that budget less available_kv_bytes (the deductions' sum:
    weights, activation peak, non-torch memory, CUDA graphs); None without figures or a catalog GPU."""
    from kvledger.catalog.gpus import get_gpu
    from kvledger.errors import KvLedgerError

    p = e.get("plan") or {}
    if e.get("reason") != "does not fit" or p.get("weight_bytes_per_gpu") is None or "gpu_memory_utilization" not in p:
        return None  # SGLang's plan (search --engine sglang): its budget is a share of the memory free before load
    try:
        total = get_gpu(e["gpu_id"]).memory_bytes
    except (KvLedgerError, KeyError):
        return None
    u, w = p["gpu_memory_utilization"], p["weight_bytes_per_gpu"]
    budget = u * total
    against = f"against gpu_memory_utilization {u:g} × {total / GiB:.2f} GiB = {budget / GiB:.2f} GiB per GPU"
    if w > budget:
        return True, f"{e['id']}: weights {w / GiB:,.2f} GiB per GPU {against}"
    need = budget - p["available_kv_bytes"]
    return False, (f"{e['id']}: weights {w / GiB:,.2f} GiB + activation peak, non-torch memory and CUDA graphs "
                   f"{(need - w) / GiB:,.2f} GiB = {need / GiB:,.2f} GiB {against}")


def no_fit_words(rejected: list[dict[str, Any]]) -> str:
    """The fix for the "does not fit" rejections, naming the term that overflows with the widest candidate's numbers
    (the nearest to fitting): the weights alone, or the weights with the activation peak and non-torch memory."""
    kinds: dict[bool, tuple[int, str]] = {}
    for e in sorted(rejected, key=lambda e: e.get("tp") or 1):
        k = _no_fit_kind(e)
        if k is not None:
            kinds[k[0]] = (kinds.get(k[0], (0, ""))[0] + 1, k[1])
    if not kinds:
        return "more TP or bigger GPUs: the weights and the engine's own memory leave no KV cache"
    words = []
    if True in kinds:
        words.append(f"more TP or bigger GPUs: the weights alone do not fit ({kinds[True][0]} of them; the widest "
                     f"{kinds[True][1]})")
    if False in kinds:
        words.append(f"more TP, bigger GPUs or a higher --gpu-memory-utilization: the weights fit but not with the "
                     f"activation peak and non-torch memory ({kinds[False][0]} of them; the widest {kinds[False][1]})")
    return "; ".join(words)
