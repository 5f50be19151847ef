"""``--num-gpu-blocks-override`` larger than the GPU can hold: vLLM allocates the override's blocks whatever the
memory profile found: it zero-fills num_blocks × bytes per block after the profile (``torch.zeros``; read in
``worker/cache_engine.py : CacheEngine._allocate_kv_cache`` of V0 0.5.5, 0.6.0 and 0.9.0,
``v1/worker/gpu_model_runner.py : GPUModelRunner._allocate_kv_cache_tensors`` of 0.28.0 and ``v1/worker/utils.py :
allocate_kv_cache``, one backing buffer, of 0.29.0); from 0.21
the start-up check also plans against override × bytes per block (``v1/core/kv_cache_utils.py``: "Reflect that in
``available_memory``"), so it no longer stops such an override. The memory the allocation can take is at most what the
device total leaves after the plan's deductions (weights, activation peak, non-torch memory): the budget's KV bytes
plus the part of the device outside ``gpu_memory_utilization``. Past it the allocation fails with CUDA out of memory;
between the budget and it, vLLM starts with the KV cache reaching into the memory the budget left free."""

from __future__ import annotations

from typing import TYPE_CHECKING

from kvledger.accounting.advice_types import Advice
from kvledger.accounting.vllm_rules import version_tuple
from kvledger.units import GiB

if TYPE_CHECKING:
    from kvledger.accounting.plan import Plan

__all__ = ["override_out_of_memory", "override_over_budget_note"]


def _allocation_site(version: str) -> str:
    """Where the release zero-fills its KV cache: the reads named in the module docstring (V0 before 0.8; V1's
    model runner up to 0.28; ``v1/worker/utils.py`` from 0.29)."""
    ver = version_tuple(version) or (0, 0, 0)
    if ver < (0, 8, 0):
        return "worker/cache_engine.py CacheEngine._allocate_kv_cache, read in 0.5.5, 0.6.0 and 0.9.0"
    if ver < (0, 29, 0):
        return "v1/worker/gpu_model_runner.py GPUModelRunner._allocate_kv_cache_tensors, read in 0.28.0"
    return "v1/worker/utils.py allocate_kv_cache, read in 0.29.0"


def _asked_and_free(p: Plan) -> tuple[int, int] | None:
    """The override's KV bytes and the most the device leaves after the deductions, B (per GPU); None where the rule
    does not apply (not vLLM, no override, a pool given as bytes, no block size)."""
    m = p.memory
    if m.engine != "vllm" or not p.settings.num_gpu_blocks_override or m.available_given or m.bytes_per_block <= 0:
        return None
    return m.num_gpu_blocks * m.bytes_per_block, m.available_kv_bytes + m.gpu_total_bytes - m.requested_bytes


def override_out_of_memory(p: Plan) -> Advice | None:
    """vLLM with an override whose blocks need more than the device has left after the deductions: the KV cache's
    allocation fails (does not fit, with the override that fits); None otherwise (other engines, no override)."""
    m, sizes = p.memory, _asked_and_free(p)
    if sizes is None or sizes[0] <= sizes[1]:
        return None
    asked, free = sizes
    most = max(0, free // m.bytes_per_block)
    msg = (f"does not fit: --num-gpu-blocks-override {m.num_gpu_blocks:,} asks {asked / GiB:.2f} GiB of KV cache "
           f"({m.num_gpu_blocks:,} × {m.bytes_per_block:,} B a block), and the device total "
           f"{m.gpu_total_bytes / GiB:.2f} GiB less the deductions leaves at most {free / GiB:.2f} GiB "
           f"(the budget's {m.available_kv_bytes / GiB:.2f} GiB + the "
           f"{(m.gpu_total_bytes - m.requested_bytes) / GiB:.2f} GiB outside {m.fraction_name} {m.fraction}); vLLM "
           f"{m.engine_version} zero-fills the override's blocks whatever the profile found (torch.zeros of "
           f"num_blocks × bytes per block, {_allocation_site(m.engine_version)}) and runs out of CUDA memory; short by "
           f"{(asked - free) / GiB:.2f} GiB (CUDA graphs captured after the allocation, where the plan leaves them "
           f"out, need more). At most "
           f"--num-gpu-blocks-override {most:,} can be allocated, {max(0, m.available_kv_bytes // m.bytes_per_block):,}"
           f" within the budget")
    return Advice("override_out_of_memory", msg, asked - free, None, ())


def override_over_budget_note(p: Plan) -> str | None:
    """A note where the override's blocks fit the device but not the budget: the KV cache takes memory
    ``gpu_memory_utilization`` left free (None otherwise)."""
    m, sizes = p.memory, _asked_and_free(p)
    if sizes is None or not max(0, m.available_kv_bytes) < sizes[0] <= sizes[1]:
        return None
    asked, free = sizes
    return (f"--num-gpu-blocks-override {m.num_gpu_blocks:,} takes {asked / GiB:.2f} GiB of KV cache, "
            f"{(asked - m.available_kv_bytes) / GiB:.2f} GiB more than the {m.fraction_name} {m.fraction} budget "
            f"leaves ({m.available_kv_bytes / GiB:.2f} GiB): vLLM allocates the override's blocks whatever the profile "
            f"found, into the memory the budget left free (at most {free / GiB:.2f} GiB after the deductions)")
