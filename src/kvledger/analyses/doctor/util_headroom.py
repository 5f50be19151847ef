"""What raising --gpu-memory-utilization could still give the KV cache, where the capacity options do not step it
(the log's utilization is already within 0.05 of the 0.95 they stop at): an answer to "should we raise it?", at most the
memory outside vLLM's budget less the CUDA graphs captured there.

vLLM 0.19.0 (``v1/worker/gpu_worker.py``): the KV budget is ``total × gpu_memory_utilization`` less weights,
activation peak and non-torch memory; with ``VLLM_MEMORY_PROFILER_ESTIMATE_CUDAGRAPHS`` off (0.19's default) the
CUDA graphs are captured after the KV cache is allocated, in the memory outside that budget ("Graph capturing finished
… took X GiB"), which also holds the CUDA context and the allocator's slack. So the most a higher utilization can move
to KV is ``total × (1 − utilization)`` less that graph pool: an upper bound, not what vLLM would start with. Where
the log keeps vLLM's DEBUG line (``compile_or_warm_up_model``: "… `--kv-cache-memory=N` (X GiB) to fully utilize gpu
memory. Current kv cache memory in use is Y GiB."), N − Y is vLLM's own measure of it (the memory free at start-up less
every non-KV term and a 150 MiB buffer, less the cache in use), and the note gives that, saying which source it used.
"""

from __future__ import annotations

from typing import Any

from kvledger.accounting.plan import Plan
from kvledger.accounting.vllm_rules import parse_version, subtracts_cudagraphs
from kvledger.evidence.vllm_log import VllmLog
from kvledger.units import GiB

__all__ = ["headroom_note"]


def _graphs_outside(log: VllmLog, base: Plan) -> tuple[int, str]:
    """The CUDA graph pool the log prints when it lies outside the budget (B), and its citation; (0, "") otherwise."""
    st = log.startup
    outside = (not st.cudagraph_estimate_applied if st.cudagraph_estimate_applied is not None
               else not subtracts_cudagraphs(parse_version(base.memory.engine_version)))
    if not outside or not st.cudagraph_actual_bytes:
        return 0, ""
    line = st.lines.get("cudagraph_actual_bytes")
    at = f", line {line}" if line else ""
    return st.cudagraph_actual_bytes, (f", {st.cudagraph_actual_bytes / GiB:.2f} GiB of it the CUDA graphs captured "
                                       f"after the KV cache was sized{at}")


def _vllm_measure(log: VllmLog, m: Any) -> str | None:
    """The headroom vLLM's own DEBUG line measures (module docstring), in words with its figures; None without it."""
    st = log.startup
    limit, in_use = st.kv_memory_to_gpu_limit_bytes, st.kv_memory_in_use_bytes
    if limit is None or in_use is None:
        return None
    gain = max(limit - in_use, 0)
    blocks = gain // m.bytes_per_block
    line = st.lines.get("kv_memory_to_gpu_limit_bytes")
    return (f"vLLM's own DEBUG line {line} (gpu_worker.py) measures it: '--kv-cache-memory={limit}' ({limit / GiB:.2f} "
            "GiB) would fully use the memory free at start-up after the weights, activation peak, non-torch memory, "
            f"CUDA graphs and a 150 MiB buffer, against {in_use / GiB:.2f} GiB of KV cache in use, so raising it gives "
            f"the KV cache {gain / GiB:.2f} GiB = {blocks:,} blocks (+{blocks / m.num_gpu_blocks:.1%} on "
            f"{m.num_gpu_blocks:,}; source: that line, not the ledger's bound")


def headroom_note(log: VllmLog, base: Plan, util: float, total_bytes: int) -> str:
    """The note for a utilization the options do not raise: the memory outside the budget, what of it could go to KV
    (GiB, blocks and the share of the pool: vLLM's DEBUG measure where the log has it, else the ledger's upper bound),
    against FP8 KV's doubling."""
    outside = total_bytes * (1.0 - util)
    graphs, said = _graphs_outside(log, base)
    gain = max(outside - graphs, 0.0)
    m = base.memory
    blocks = int(gain // m.bytes_per_block)
    bound = (f"at most {gain / GiB:.2f} GiB = {blocks:,} blocks (+{blocks / m.num_gpu_blocks:.1%} on "
             f"{m.num_gpu_blocks:,})")
    measured = _vllm_measure(log, m)
    head = (f"--gpu-memory-utilization is not raised past {util:.2f} (the options step it by 0.05 up to 0.95): "
            f"{util:.2f} leaves {outside / GiB:.2f} GiB of the {total_bytes / GiB:.2f} GiB device outside vLLM's "
            f"budget{said}; {'the rest' if said else 'it'} also holds the CUDA context and the allocator's slack")
    if measured is not None:
        body = f" (the ledger's upper bound: {bound}); {measured})"
    elif not log.startup.lines:  # no start-up read (simulate's pool, a metrics-only log): nothing to name as missing
        body = f", so raising it gives the KV cache {bound}"
    else:
        body = (f", so raising it gives the KV cache {bound}: an upper bound (source: the ledger; the log has no vLLM "
                "DEBUG '--kv-cache-memory=… to fully utilize gpu memory' line, which VLLM_LOGGING_LEVEL=DEBUG prints "
                "and which measures it)")
    return head + body + ("" if base.settings.kv_cache_dtype.startswith("fp8") else
                          ", against twice the blocks for --kv-cache-dtype fp8")
