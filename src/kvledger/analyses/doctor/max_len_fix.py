"""The --max-model-len a start-up refused for max_model_len can take, as a number, derived as vLLM's check does.

vLLM's start-up check passes a max_model_len L when one request of L needs no more blocks than the pool gives requests
(``v1/core/kv_cache_utils.py : _check_enough_kv_cache_memory``; its error prints "the estimated maximum model length
is N", the largest L that passes, ``_estimate_max_model_len_from_groups``). From 0.29.0 the check reserves the block
pool's null block ("Reserve the null block BlockPool permanently holds back", in ``check_enough_kv_cache_memory`` and
``get_kv_cache_configs``; absent in 0.28.0): a pool of b blocks of B tokens passes L ≤ (b − 1) × B for a model whose
layers all keep full attention. Before 0.29 the check passes b × B, but a request that long never gets its last block
(the null block is not the requests'), so the fix is (b − 1) × B there too. V0 refuses L above block_size ×
num_gpu_blocks and has no null block (``llm_engine.py``: "larger than the maximum number of tokens that can be stored
in KV cache (N)").
"""

from __future__ import annotations

import re
from typing import Any

from kvledger.accounting.advice_len import NULL_BLOCK_CHECK_FROM  # the first release whose check reserves it

__all__ = ["NULL_BLOCK_CHECK_FROM", "max_len_fix", "override_started"]

_ESTIMATE = re.compile(r"the estimated maximum model length is (\d+)")
_V0_CAP = re.compile(r"maximum number of tokens that can be stored in KV cache \((\d+)\)")


def max_len_fix(ctx: Any) -> str:
    """"(--max-model-len N: how N follows from the log)" for the log's start-up, "" when the log gives no pool size:
    vLLM's own estimate where its error prints one, V0's printed capacity, else the pool the log prints (V1 "GPU KV
    cache size: T tokens", V0 "# GPU blocks: b")."""
    log, st = ctx.log, ctx.log.startup
    for f in log.failures:
        if m := _ESTIMATE.search(f.text):
            return (f"(--max-model-len {m.group(1)}: vLLM's own estimate of the longest that fits, line {f.line_no}"
                    f"{_first_group_caveat(ctx, int(m.group(1)))})")
        if m := _V0_CAP.search(f.text):
            return (f"(--max-model-len {m.group(1)}: the tokens the KV cache holds, line {f.line_no}; V0 refuses a "
                    "max_model_len above block_size × num_gpu_blocks)")
    size, src = _block_size(ctx)
    if st.engine_generation == "v0" and st.num_gpu_blocks:
        n = st.num_gpu_blocks * size
        return (f"(--max-model-len {n}: {st.num_gpu_blocks:,} blocks, line {st.lines.get('num_gpu_blocks')}, × "
                f"{size} tokens a block ({src}): V0 keeps no null block)")
    if not st.kv_cache_tokens or st.kv_cache_tokens < 2 * size:
        return ""
    where = f"line {st.lines.get('kv_cache_tokens')}"
    p = ctx.model_plan
    groups = len(p.layout.groups) if p is not None and p.layout is not None else 1
    blocks = st.kv_cache_tokens // size * groups  # the log prints blocks // groups × block_size
    if groups > 1:
        from kvledger.accounting.advice_len import estimate_len

        n = estimate_len(p, blocks - 1)
        if not n:
            return ""
        return (f"(--max-model-len {n}: the longest whose start-up demand fits {blocks - 1:,} usable blocks: the "
                f"{st.kv_cache_tokens:,}-token pool on {where} is {blocks:,} blocks over {groups} KV cache groups, "
                "less vLLM's null block)")
    n = (blocks - 1) * size
    older = ""
    if _older(ctx):
        older = (f"; this release's check would pass {blocks * size:,}, but a request that long never gets its last "
                 "block")
    return (f"(--max-model-len {n}: the {st.kv_cache_tokens:,}-token pool on {where} is {blocks:,} blocks of {size} "
            f"tokens ({src}); less vLLM's null block, {blocks - 1:,} × {size} = {n:,}, what vLLM's start-up check "
            f"passes from 0.29 for a model whose layers all keep full attention{older})")


def _first_group_caveat(ctx: Any, est: int) -> str:
    """vLLM 0.14–0.18 with several KV cache groups: its estimate counts the first group alone
    (``accounting.vllm_check_demand``), so a request that long may need more blocks than the pool holds: the length
    that runs on the plan's pool; "" otherwise."""
    from kvledger.accounting.advice_len import estimate_len
    from kvledger.accounting.vllm_check_demand import first_group_only, first_group_words
    from kvledger.accounting.vllm_rules import version_tuple

    p = ctx.model_plan
    v = version_tuple(ctx.log.version) if ctx.log.version else None
    if p is None or not first_group_only(v, p.layout):
        return ""
    run = estimate_len(p)
    if not run or run >= est:
        return ""
    return (f"; {first_group_words(p.layout, ctx.log.version)}, so a request that long needs more blocks than the "
            f"pool holds and is never scheduled: on the plan's {p.memory.usable_blocks:,} usable blocks {run:,} runs")


def _block_size(ctx: Any) -> tuple[int, str]:
    """(tokens per block, where it comes from): the log's, the plan's, else vLLM's default 16."""
    st, p = ctx.log.startup, ctx.model_plan
    if st.block_size:
        return st.block_size, f"block_size on line {st.lines.get('block_size')}"
    if p is not None:
        return p.memory.block_size, "the plan's block size"
    return 16, "vLLM's default block size"


def _older(ctx: Any) -> bool:
    """The log's vLLM is a release before ``NULL_BLOCK_CHECK_FROM`` (False when it prints none)."""
    from kvledger.accounting.vllm_rules import version_tuple

    v = version_tuple(ctx.log.version) if ctx.log.version else None
    return v is not None and v < NULL_BLOCK_CHECK_FROM


def override_started(ctx: Any) -> str:
    """A V1 start-up before 0.21 whose log prints a max concurrency below 1 under the user's --num-gpu-blocks-override:
    vLLM started, since its start-up check judged max_model_len on the profiled memory and applied the override after
    (``accounting.advice_len.OVERRIDE_IN_CHECK_FROM``), but a request that long never finishes; "" otherwise (from
    0.21 the check uses the override, so a log of such a start-up prints the check's error instead)."""
    from kvledger.accounting.vllm_override_check import OVERRIDE_IN_CHECK_FROM, check_ignores_override
    from kvledger.accounting.vllm_rules import version_tuple

    st = ctx.log.startup
    c, override = st.max_concurrency, st.num_gpu_blocks_override
    if st.engine_generation != "v1" or not override or c is None or c >= 1:
        return ""
    version = ctx.settings["engine_version"]
    if not check_ignores_override(version_tuple(version)):
        return ""
    p = ctx.model_plan
    held = (f" (the ledger's {p.memory.check_num_gpu_blocks:,} blocks)"
            if p is not None and p.memory.check_num_gpu_blocks is not None else "")
    return (f"vLLM {version} started although one request of max_model_len needs more blocks than "
            f"--num-gpu-blocks-override {override:,} gives (max concurrency {c:.2f}x, line "
            f"{st.lines.get('max_concurrency')}): this release checks max_model_len against the profiled memory"
            f"{held} and applies the override after it (v1/core/kv_cache_utils.py; from "
            f"{'.'.join(map(str, OVERRIDE_IN_CHECK_FROM))} the check uses the override and refuses such a start-up). "
            "A request that long is preempted when the pool runs dry and restarts (v1/core/sched/scheduler.py "
            "Scheduler.schedule), so it never finishes. Fixes: a larger --num-gpu-blocks-override (or none), or "
            f"--max-model-len at most the pool's tokens {max_len_fix(ctx)}".rstrip() + ".")
