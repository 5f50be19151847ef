"""The null-block edge in a simulated run: vLLM before 0.29 starts where one max_model_len request needs every block of
the pool (its start-up check counts block 0, the null block, which ``block_pool.py`` never hands to a request:
``accounting.advice_startup_len``), though such a request is never scheduled; and further past the usable blocks
where the release's check counts fewer blocks than a request takes (the first KV cache group alone in 0.14–0.18, no
padding slot before 0.14: ``accounting.vllm_check_demand``). The simulator runs that pool
(``EngineConfig.startup_counts_null_block``) where no request of the workload would reach the edge, with a warning;
where one would, it refuses the run naming that request (it would wait forever, and so would the run).

A request reaches the edge when it is admitted (its prompt below max_model_len where the output is capped at it, else
prompt + output within it) and the tokens it computes need more blocks than the usable ones: prompt + output − 1
(the last sampled token is never computed: ``scheduler.py``), its output capped at max_model_len − prompt."""

from __future__ import annotations

from typing import Any

from kvledger.accounting.vllm_check_demand import check_count_words
from kvledger.accounting.vllm_rules import version_tuple
from kvledger.errors import DoesNotFitError

__all__ = ["null_block_edge_notes"]


def _lengths(workload: Any) -> tuple[list[str], Any, Any] | None:
    """(ids, prompt tokens, output tokens) of every request known before the run (a list, columns, a closed loop's
    list); None for sessions or a generator."""
    from kvledger.dynamics.workload.closed_loop import ClosedLoop
    from kvledger.dynamics.workload.columns import WorkloadColumns

    reqs = workload.requests if isinstance(workload, ClosedLoop) else workload
    if isinstance(reqs, WorkloadColumns):
        rows = range(len(reqs.num_prompt_tokens)) if reqs.id_rows is None else reqs.id_rows
        return [f"{reqs.id_prefix}{i}" for i in rows], reqs.num_prompt_tokens, reqs.num_output_tokens
    if isinstance(reqs, (list, tuple)):
        return ([r.request_id for r in reqs], [r.num_prompt_tokens for r in reqs],
                [r.num_output_tokens for r in reqs])
    return None


def null_block_edge_notes(config: Any, workload: Any, plan: Any) -> list[str]:
    """[] off the edge; at it, the warning that the run goes ahead because no request reaches it. ``plan``: the
    ``Plan`` the config was sized from (its vLLM release, and why its check lets the request past the usable blocks).

    Raises:
        DoesNotFitError: a request that would reach the edge (the first named, with its tokens and blocks, and how
            many do), or a workload whose lengths are not known before the run (sessions).
    """
    usable, mml = config.num_usable_blocks, config.max_model_len
    if not config.startup_counts_null_block or config.blocks_needed(mml) <= usable:
        return []
    engine_version = plan.memory.engine_version
    runs = usable * config.block_size if config.blocks_for_tokens is None else None
    why = check_count_words(plan.layout, version_tuple(engine_version), engine_version)
    why = why.replace(f"vLLM {engine_version}'s start-up check", "its start-up check") if why else (
        "its start-up check counts the null block before 0.29")
    edge = (f"vLLM {engine_version} starts with this pool, but a request that computes more tokens than its "
            f"{usable:,} usable blocks hold is never scheduled ({why}; max_model_len {mml:,} needs "
            f"{config.blocks_needed(mml):,} blocks)")
    fix = f"; --max-model-len {runs} runs every request" if runs else "; lower --max-model-len"
    known = _lengths(workload)
    if known is None:
        raise DoesNotFitError(f"{edge}, and this workload's request lengths are not known before the run (sessions), "
                              f"so the simulator cannot tell that none is that long{fix}")
    hits = []
    for rid, p, o in zip(*known):
        p, o = int(p), int(o)
        if p >= mml if config.caps_output else p + o > mml:
            continue  # refused by the engine before it needs a block
        computed = min(p + o, mml) - 1
        if config.blocks_needed(computed) > usable:
            hits.append((rid, p, o, computed))
    if hits:
        rid, p, o, c = hits[0]
        raise DoesNotFitError(f"{edge}: request {rid!r} ({p:,} prompt + {o:,} output tokens) computes {c:,} tokens, "
                              f"{config.blocks_needed(c):,} blocks, so it would wait forever ({len(hits):,} of "
                              f"{len(known[0]):,} requests would){fix}")
    return [f"warning: {edge}; no request of this workload computes that many tokens, so the run is simulated as "
            f"vLLM {engine_version} serves it{fix.replace('; ', '; to be safe, ')}"]
