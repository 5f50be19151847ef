"""An ITL SLO that no load can meet while one step may carry a prefill chunk the size of the token budget.

vLLM V1 schedules the running requests' decodes and the waiting requests' prefill chunks in one step under
``max_num_batched_tokens`` (``v1/core/sched/scheduler.py::schedule``, read in 0.10.1 and 0.19.0: the running requests
first, then new ones while the budget lasts; a prompt longer than the budget goes in budget-sized chunks). Every request
decoding in a step that carries a chunk waits for the whole step, so its inter-token gap is that step's time whatever
the load: Llama-3.1-70B at TP 4 on H100 (vLLM 0.10.1, azure-conv, ``itl ≤ 100 ms``) attains 58.6 % at 1 req/s and
99.3 % only at 0.016 req/s with the default 8,192-token budget (a full step ≈ 0.5 s), 99 % up to 4.19 req/s with
``--max-num-batched-tokens 1024``. An SLO capacity that the ITL limit sets this way says nothing about the GPU's load;
the warning names the step time and the budget that keeps each step under the limit.
"""

from __future__ import annotations

from typing import Any

from kvledger.accounting.stepcost import StepShape
from kvledger.analyses.serving.notes import ITL_BUDGET
from kvledger.ledgers.columns import columns_from
from kvledger.units import fmt_duration

__all__ = ["MIN_BUDGET", "chunk_step_s", "itl_budget_note", "itl_budget_words"]

MIN_BUDGET = 256
"""The smallest budget the warning proposes (halving from the one simulated), tokens: a threshold of this check."""


def chunk_step_s(cost: Any, budget: int, longest: int) -> float:
    """The step time, s, of a step that carries one prefill chunk of ``budget`` − 1 tokens (the decode beside it takes
    the last), the last chunk of a ``longest``-token prompt (the most attention a chunk of that size scores), or that
    whole prompt where it is shorter, beside one decode of as long a context: the longest gap a decoding request sees
    under this budget."""
    c = max(1, min(budget - 1, longest))
    p = max(0, longest - c)
    return cost.step_time_s(StepShape(num_prefill_tokens=c, num_prefill_seqs=1, prefill_kv_tokens=p + c,
                                      prefill_attn_pairs=c * p + c * (c + 1) / 2, num_decode_seqs=1,
                                      decode_kv_tokens=longest))


def itl_budget_note(sb: Any, slo: Any) -> str | None:
    """The warning for a request-rate search ``sb`` (``sim_boundary.SimBoundary``) under ``slo`` whose lightest probe
    run to its end still has ITL misses (``itl_budget_words``); None otherwise."""
    full = sorted((pr.value, k) for k, pr in enumerate(sb.probes) if pr.stopped_early is None)
    if sb.axis != "request_rate" or not full:
        return None
    missed = sb.goodputs[full[0][1]].num_missed.get("itl", 0)
    return itl_budget_words(sb.first_run, slo, missed, f"at {full[0][0]:.4g} req/s, the lightest load probed")


def itl_budget_words(run: Any, slo: Any, missed: int, where: str) -> str | None:
    """The warning for the simulated run ``run`` (``sim_ledgers.SimulatedRun``) in which ``missed`` requests missed the
    ITL limit of ``slo`` (``where``: which run, in words) while a step carrying a full-budget prefill chunk takes longer
    than the limit (vLLM, chunked prefill, an ITL limit on each request's largest gap or a percentile of its gaps);
    None otherwise."""
    if (not missed or slo.itl_s is None or slo.itl_stat == "mean" or run is None
            or getattr(run.setup.plan.memory, "engine", "vllm") != "vllm"):
        return None
    cfg = run.setup.config
    if not cfg.enable_chunked_prefill or cfg.batching != "continuous":
        return None
    budget, limit = cfg.max_num_batched_tokens, slo.itl_s
    longest = min(int(columns_from(run.run).num_prompt_tokens.max()), cfg.max_model_len)
    step = chunk_step_s(run.setup.cost, budget, longest)
    if step <= limit:
        return None
    fits = next((b for b in _halvings(budget) if b <= longest and chunk_step_s(run.setup.cost, b, longest) <= limit),
                None)
    head = (f"{ITL_BUDGET}{where}, {missed:,} requests missed "
            f"{slo.itl_key} ≤ {fmt_duration(limit)}: a step that carries a prefill chunk of up to "
            f"max_num_batched_tokens {budget:,} tokens ("
            + (f"the last chunk of the longest prompt, {longest:,} tokens" if longest >= budget else
               f"here the longest prompt, {longest:,} tokens, in one chunk")
            + f") takes {fmt_duration(step)} in this step cost, and every request decoding in it waits that long, at "
            "any load. ")
    if fits is None:
        return head + (f"No budget down to {MIN_BUDGET} tokens keeps such a step under the limit here: a faster "
                       "step (more TP, another GPU) or prefill apart from decode (kvledger disagg) is what can")
    seqs = cfg.max_num_seqs
    cap = (f" with --max-num-seqs {fits} or fewer (vLLM refuses a budget below max_num_seqs, {seqs:,} here: "
           "config/scheduler.py)" if fits < seqs else "")
    return head + (f"--max-num-batched-tokens {fits}{cap} caps such a step at "
                   f"{fmt_duration(chunk_step_s(run.setup.cost, fits, longest))}, under the limit; long prompts then "
                   "take more steps to their first token (TTFT grows): search --max-num-batched-tokens "
                   f"{fits},{budget} ranks both on this SLO")


def _halvings(budget: int) -> list[int]:
    """``budget`` halved down to ``MIN_BUDGET``: budget / 2, budget / 4, …, largest first."""
    out, b = [], budget // 2
    while b >= MIN_BUDGET:
        out.append(b)
        b //= 2
    return out
