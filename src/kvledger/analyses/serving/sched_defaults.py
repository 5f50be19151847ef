"""The scheduler limits a vLLM engine sets itself from the flags given — what the plan's usage-context defaults do
not say: the budget with chunked prefill off, V1's forced chunked prefill up to 0.11.0, and V0's own defaults when
the V0 engine runs on a release whose default is V1 (``--batching vllm_v0`` on 0.8–0.10, ``VLLM_USE_V1=0``).

Rules from ``engine/arg_utils.py`` and ``config.py :: SchedulerConfig`` of the versions named in
``kvledger.accounting.vllm_rules`` (``default_batch_limits``, ``v1_forces_chunked_prefill``).
"""

from __future__ import annotations

from typing import Any

from kvledger.accounting import vllm_rules as R
from kvledger.accounting.chunked_budget import chunked_off_budget, forced_on_note

__all__ = ["scheduler_overrides", "NO_EFFECT"]

#: the words of a note on an engine flag the release ignores (every command that prints a simulated run's sources
#: carries such a note: ``sim_ledgers.SimulatedRun.source_lines``)
NO_EFFECT = "has no effect in vLLM"
V0_OUTPUT_LAG = (0, 6, 0)  # V0's async output processor (use_async_output_proc, config.py; absent in 0.5.5)
V0_REMOVED = (0, 11, 0)  # the V0 engine's last release is 0.10.x


def scheduler_overrides(a: Any, plan: Any, user_mnbt: int | None) -> tuple[dict[str, Any], list[str]]:
    """EngineConfig fields (``enable_chunked_prefill``, ``max_num_batched_tokens``, ``max_num_seqs``, V0's
    ``async_output_proc``) the engine's own rules set for these flags, and a note for each. ``a``: the simulate
    request's arguments (``batching``, ``enable_chunked_prefill``, ``max_num_seqs``, ``enforce_eager``); ``plan``: its
    memory plan; ``user_mnbt``: the budget the user gave (None: the engine's default)."""
    out, notes = _limits(a, plan, user_mnbt)
    m = plan.memory
    ver = R.parse_version(m.engine_version) if m.engine == "vllm" else None
    if (ver is not None and out.get("batching", a.batching) == "vllm_v0" and V0_OUTPUT_LAG <= ver < V0_REMOVED
            and not a.enforce_eager):
        out["async_output_proc"] = True
        notes.append(f"V0's async output processor on (vLLM 0.6.0–0.10 without --enforce-eager; {m.engine_version}: "
                     "engine/llm_engine.py step): a request's last token is processed during the next step, so the "
                     "request holds its seat and blocks one step longer and is decoded once more (core/scheduler.py)")
    return out, notes


def _limits(a: Any, plan: Any, user_mnbt: int | None) -> tuple[dict[str, Any], list[str]]:
    """``scheduler_overrides`` but V0's output processor: the budget, chunking and batching rules."""
    m = plan.memory
    out: dict[str, Any] = {}
    notes: list[str] = []
    ver = R.parse_version(m.engine_version) if m.engine == "vllm" else None
    if ver is not None and a.batching == "vllm_v0" and R.era(ver) != "v0":
        return _v0_engine(a, plan, ver, user_mnbt)
    if ver is not None and a.batching is None and R.era(ver) == "v0":
        return _v0_release(a, plan)
    if (ver is not None and a.enable_chunked_prefill is False and a.batching in (None, "continuous")
            and R.v1_forces_chunked_prefill(ver)):
        out["enable_chunked_prefill"] = True
        notes.append(forced_on_note(m.engine_version, m.max_num_batched_tokens))
        return out, notes
    if a.enable_chunked_prefill is False and user_mnbt is None:
        out["max_num_batched_tokens"], note = chunked_off_budget(m.max_model_len, m.max_num_batched_tokens)
        notes.append(note)
    return out, notes


def _sliding(plan: Any) -> bool:
    """Whether the planned model has a sliding-window layer, as the plan's budget reads it (vLLM's
    ``get_sliding_window() is not None``)."""
    return any(getattr(layer, "window_tokens", 0) for layer in plan.model.layers)


def _v0_release(a: Any, plan: Any) -> tuple[dict[str, Any], list[str]]:
    """A release before 0.8 runs the V0 engine with V0's defaults (``engine/arg_utils.py`` of 0.5–0.7: chunked prefill
    off up to a 32K context, ``use_long_context``; prefix caching off): with both off, V0's default scheduler, the
    ``vllm_v0`` rule; with either on (given, or chunked above 32K), V1's mixed steps, the closest rule modelled."""
    m = plan.memory
    long_context = R.v0_long_context_chunked(m.max_model_len, _sliding(plan))
    chunked = a.enable_chunked_prefill if a.enable_chunked_prefill is not None else long_context
    caching = bool(a.enable_prefix_caching)
    said = (f"chunked prefill {'on' if chunked else 'off'}"
            + ("" if a.enable_chunked_prefill is not None else
               f" (V0's default: on only above a 32K context without a sliding window, max_model_len "
                  f"{m.max_model_len:,})")
            + f", prefix caching {'on (as given)' if caching else 'off'}")
    out: dict[str, Any] = {"enable_chunked_prefill": chunked, "enable_prefix_caching": caching}
    if not chunked and not caching:
        out["batching"] = "vllm_v0"
        how = "replayed by V0's default scheduler, prefill-first (--batching vllm_v0; --batching continuous for V1's)"
    else:
        out["batching"] = "continuous"
        how = ("replayed by V1's mixed steps, the closest rule modelled (V0's "
               + ("chunked-prefill scheduler" if chunked else "prefix caching") + " is not)")
    return out, [f"vLLM {m.engine_version} ran the V0 engine (V1 became the default in 0.8), {said} "
                 f"(engine/arg_utils.py EngineArgs of 0.5–0.7): {how}"]


def _v0_engine(a: Any, plan: Any, ver: tuple[int, int, int], user_mnbt: int | None
               ) -> tuple[dict[str, Any], list[str]]:
    """V0's defaults on a V1-default release (``R.default_batch_limits(..., v0_engine=True)``): chunked prefill off
    up to a 32K context or with a sliding window, budget max(max_model_len, 2048), 256 sequences."""
    m = plan.memory
    out: dict[str, Any] = {}
    sliding = _sliding(plan)
    _, seqs, why = R.default_batch_limits(ver, int(plan.gpu.memory_bytes), plan.gpu.name, m.max_model_len, sliding,
                                          v0_engine=True)
    chunked = a.enable_chunked_prefill
    if chunked is None:
        chunked = R.v0_long_context_chunked(m.max_model_len, sliding)
    out["enable_chunked_prefill"] = chunked
    parts = []
    if user_mnbt is None:
        out["max_num_batched_tokens"] = 2048 if chunked else max(m.max_model_len, 2048)  # 0.9.0 SchedulerConfig
        parts.append(f"max_num_batched_tokens {out['max_num_batched_tokens']:,}")
    if a.max_num_seqs is None:
        out["max_num_seqs"] = seqs
        parts.append(f"max_num_seqs {seqs}")
    elif a.max_num_seqs != seqs:  # given (a flag, or the run's record): the default below is not what runs
        parts.append(f"max_num_seqs {a.max_num_seqs} as given, not V0's {seqs}")
    note = (f"V0 engine on vLLM {m.engine_version} (--batching vllm_v0, VLLM_USE_V1=0): V0's own defaults, not the "
            f"V1 usage-context ones — chunked prefill {'on' if chunked else 'off'}"
            + (f", {', '.join(parts)}" if parts else "") + f" ({why}; engine/arg_utils.py _set_default_args_v0)")
    return out, [note]
