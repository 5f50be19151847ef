"""What ``simulate`` says of the engine it ran beyond the simulator's own settings: the prefix caching the launch has
when the simulator runs without it (a hybrid layout whose reuse is not modelled, or a workload with no shared
prefix), and how many requests it held at once (running and waiting, from the records)."""

from __future__ import annotations

from typing import Any

__all__ = ["launch_prefix_caching", "batch_occupancy"]


def launch_prefix_caching(plan: Any, config: dict[str, Any]) -> dict[str, Any]:
    """``{"prefix_caching_at_launch": True}`` when vLLM launches with prefix caching on (given, or its default for the
    model) but the simulation ran it off; ``{}`` otherwise.

    The pool is the plan's, laid out as vLLM lays it out with prefix caching on (for a Mamba hybrid its "align" mode
    sets the block size: Qwen3-Next-80B at TP 4 on H100, 8,184 blocks of 320 tokens, against 9,629 of 272 without),
    so the engine line says the launch's setting and that its reuse was not simulated, rather than "off"; the
    recommended ``vllm serve`` line then needs no --no-enable-prefix-caching to match the simulated pool."""
    if plan is None or config.get("enable_prefix_caching") or plan.memory.engine != "vllm":
        return {}
    if plan.settings.enable_prefix_caching is False:
        return {}
    from kvledger.accounting.vllm_block_choice import mamba_rule
    from kvledger.accounting.vllm_rules import LATEST, parse_version

    rule = mamba_rule(plan.model, plan.settings, parse_version(plan.settings.engine_version or LATEST), plan.gpu.arch)
    on = rule.enable_prefix_caching if rule is not None else plan.layout is not None
    return {"prefix_caching_at_launch": True} if on else {}


def batch_occupancy(records: list[Any], engine_running_max: int | None, replicas: int) -> dict[str, Any] | None:
    """How many requests the run held at once, from its records (``RequestRecord``: arrival, first token, finish, s),
    time-weighted over the run's span (first arrival → last finish), and the largest:

    - ``running``: requests past their first token and not finished (decoding: each holds its KV in the pool — the
      figure to set beside plan's concurrency);
    - ``waiting``: requests arrived without a first token yet (queued, or prefilling: vLLM counts a prefilling
      request as running, so this is an upper bound on its waiting queue);
    - ``engine_running_max``: the largest running batch one replica counted at its steps (prefills included); None
      where that count is only a lower bound (SGLang's arrival stretches).

    Means are request-seconds ÷ span seconds, requests; with several replicas, totals over them. None when no request
    finished."""
    done = [r for r in records if r.error is None and r.finish_s is not None and r.first_token_s is not None]
    if not done:
        return None
    t0, t1 = min(r.arrival_s for r in done), max(r.finish_s for r in done)
    span = t1 - t0
    out: dict[str, Any] = {"span_s": span, "replicas": replicas, "engine_running_max": engine_running_max}
    for key, pairs in (("running", [(r.first_token_s, r.finish_s) for r in done]),
                       ("waiting", [(r.arrival_s, r.first_token_s) for r in done])):
        busy = sum(b - a for a, b in pairs)
        out[key] = {"mean": busy / span if span > 0 else float(len(pairs)), "max": _most_at_once(pairs)}
    return out


def _most_at_once(pairs: list[tuple[float, float]]) -> int:
    """The most intervals [start, end) open at one time (an end at t closes before a start at t opens), count."""
    events = sorted([(b, -1) for a, b in pairs if b > a] + [(a, 1) for a, b in pairs if b > a])
    most = now = 0
    for _, d in events:
        now += d
        most = max(most, now)
    return most
