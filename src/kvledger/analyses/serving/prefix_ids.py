"""Whether a simulated workload names shared prefixes (prefix ids), and ``simulate``'s note when it does not: with
prefix caching on, a workload without Mooncake ``hash_ids`` or shared-prefix segments cannot hit the cache, so its
0 % hit rate is a property of the trace, not of the engine or the traffic it stands for."""

from __future__ import annotations

from typing import Any

from kvledger.dynamics.workload.closed_loop import ClosedLoop
from kvledger.dynamics.workload.columns import WorkloadColumns

__all__ = ["has_prefix_ids", "no_prefix_ids_note", "with_prefix_ids_note", "shared_prefix_unused_note"]


def has_prefix_ids(workload: Any) -> bool:
    """Whether any request of an open- or closed-loop workload names prefix segments (Mooncake ``hash_ids`` or a
    synthetic shared prefix); a columnar workload never does (``load_trace_columns`` leaves segmented traces)."""
    specs = workload.requests if hasattr(workload, "requests") else workload
    return not isinstance(specs, WorkloadColumns) and any(spec.prefix_segments for spec in specs)


def no_prefix_ids_note(setup: Any) -> str | None:
    """``simulate``'s note when prefix caching is on but an open- or closed-loop workload names no prefix ids (no
    Mooncake ``hash_ids``, no shared-prefix segments): its hit rate is 0 by construction. None otherwise (sessions
    share their earlier turns). ``setup``: a ``sim_setup.SimSetup``."""
    if not setup.config.enable_prefix_caching or not isinstance(setup.workload, (list, WorkloadColumns, ClosedLoop)):
        return None
    if has_prefix_ids(setup.workload):
        return None
    if (n := setup.workload_info.get("shared_prefix_tokens")) is not None:  # every prompt shorter than the prefix
        return (f"--shared-prefix-tokens {n:,}: no prompt of this workload reaches {n:,} tokens, and a prompt shorter "
                "than the shared prefix is left unshared, so no two prompts share a cached block")
    return (f"prefix caching is on, but the workload ({setup.workload_info.get('trace', 'given requests')}) carries "
            "no prefix ids (no hash ids or shared-prefix segments), so no two prompts share a cached block: the "
            "prefix-cache hit rate is 0 by construction, not a measure of this traffic's reuse (a trace with hash "
            "ids, e.g. mooncake, simulates reuse)")


def with_prefix_ids_note(setup: Any) -> tuple[dict[str, Any], list[str]]:
    """(the workload description, its notes) of ``setup`` for ``simulate``'s document: ``prefix_ids: false`` and the
    note added when :func:`no_prefix_ids_note` applies."""
    note = no_prefix_ids_note(setup) or shared_prefix_unused_note(setup)
    if note is None or "shared_prefix_tokens" in setup.workload_info:
        return setup.workload_info, [*setup.notes, *([note] if note else [])]
    return {**setup.workload_info, "prefix_ids": False}, [*setup.notes, note]


def shared_prefix_unused_note(setup: Any) -> str | None:
    """Why a ``--shared-prefix-tokens N`` run reuses none of it though prompts reach N, else None: prefix caching off
    (the system prompt is prefilled for every request), or, under vLLM's block-granular cache, N below one block
    (vLLM hashes and caches only full blocks: ``kv_cache_utils.py::hash_request_tokens``; SGLang's radix tree reuses
    any token)."""
    n, cfg = setup.workload_info.get("shared_prefix_tokens"), setup.config
    if n is None or not setup.workload_info.get("shared_prefix_requests"):
        return None
    if not cfg.enable_prefix_caching:
        return (f"--shared-prefix-tokens {n:,} with prefix caching off: no prompt reuses the shared prefix, every "
                "request prefills it again (--enable-prefix-caching to reuse it)")
    if cfg.prefix_caching_policy != "sglang" and n < cfg.block_size:
        return (f"--shared-prefix-tokens {n:,} is shorter than one {cfg.block_size}-token KV block: vLLM caches only "
                "full blocks, so no prompt reuses it")
    return None
