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

from dataclasses import dataclass
from typing import Any

import numpy as np

from kvledger.accounting.stepcost import StepShape
from kvledger.analyses.serving.notes import ITL_BUDGET
from kvledger.ledgers.boundary import IDLE_STEP_WORDS
from kvledger.ledgers.columns import columns_from
from kvledger.units import fmt_duration

__all__ = ["MIN_BUDGET", "chunk_step_s", "itl_budget_note", "itl_budget_words", "ItlBudget", "itl_budget",
           "itl_budget_at_lightest", "lightest_probe", "itl_unreachable", "idle_cause", "retell_idle_note"]

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


@dataclass
class ItlBudget:
    """The token-budget analysis of one run whose requests missed an ITL limit (``itl_budget``): ``missed`` of its
    ``num_requests`` missed ``itl_key`` ≤ ``limit_s``; a step carrying a prefill chunk of up to ``budget`` tokens (of
    the ``longest`` prompt) takes ``step_s``; ``fits``: the largest halving of the budget whose such step,
    ``fits_step_s``, is under the limit (None: none down to ``MIN_BUDGET``); ``max_num_seqs``: the run's;
    ``decode_step_s``: a step of one decode of the ``longest`` context alone, the step time at batch 1 (None: not
    priced)."""

    missed: int
    num_requests: int
    itl_key: str
    limit_s: float
    budget: int
    longest: int
    step_s: float
    fits: int | None
    fits_step_s: float | None
    max_num_seqs: int
    decode_step_s: float | None = None

    def blocks(self, target: float) -> bool:
        """Whether the ITL misses alone keep the run's attainment (good ÷ all requests) below ``target``: at most
        (all − missed) ÷ all are good, compared as the boundary search compares (``attainment >= target`` meets)."""
        return self.num_requests > 0 and (self.num_requests - self.missed) / self.num_requests < target

    def fix(self) -> str:
        """The budget that keeps such a step under the limit, in words (the flags vLLM needs for it)."""
        if self.fits is None:
            return (f"no budget down to {MIN_BUDGET} tokens keeps such a step under the limit here: a faster step "
                    "(more TP, another GPU) or prefill apart from decode (kvledger disagg) is what can")
        cap = (f" with --max-num-seqs {self.fits} or fewer (vLLM refuses a budget below max_num_seqs, "
               f"{self.max_num_seqs:,} here: config/scheduler.py)" if self.fits < self.max_num_seqs else "")
        return (f"--max-num-batched-tokens {self.fits}{cap} caps such a step at {fmt_duration(self.fits_step_s)}, "
                "under the limit")

    def step_words(self) -> str:
        return (f"a step that carries a prefill chunk of up to max_num_batched_tokens {self.budget:,} tokens ("
                + (f"the last chunk of the longest prompt, {self.longest:,} tokens" if self.longest >= self.budget
                   else f"here the longest prompt, {self.longest:,} tokens, in one chunk")
                + f") takes {fmt_duration(self.step_s)} in this step cost")

    def words(self, where: str) -> str:
        """The capacity warning (prefix ``ITL_BUDGET``); ``where``: which run, in words."""
        head = (f"{ITL_BUDGET}{where}, {self.missed:,} requests missed {self.itl_key} ≤ {fmt_duration(self.limit_s)}: "
                f"{self.step_words()}, and every request decoding in it waits that long, at any load. ")
        if self.fits is None:
            return head + self.fix()[0].upper() + self.fix()[1:]
        return head + (f"{self.fix()}; long prompts then take more steps to their first token (TTFT grows): search "
                       f"--max-num-batched-tokens {self.fits},{self.budget} ranks both on this SLO")


def lightest_probe(sb: Any) -> tuple[float, Any] | None:
    """(rate, goodput) of the lightest probe of a request-rate search ``sb`` (``sim_boundary.SimBoundary``) run to its
    end; None on another axis or without one."""
    full = sorted((pr.value, k) for k, pr in enumerate(sb.probes) if pr.stopped_early is None)
    if sb.axis != "request_rate" or not full:
        return None
    return full[0][0], sb.goodputs[full[0][1]]


def itl_budget_at_lightest(sb: Any, slo: Any) -> ItlBudget | None:
    """``itl_budget`` of the lightest probe of ``sb`` run to its end (``lightest_probe``); None otherwise."""
    low = lightest_probe(sb)
    if low is None:
        return None
    gp = low[1]
    return itl_budget(sb.first_run, slo, gp.num_missed.get("itl", 0), gp.num_requests)


def itl_budget_note(sb: Any, slo: Any) -> str | None:
    """The warning for a request-rate search ``sb`` under ``slo`` whose lightest probe run to its end still has ITL
    misses (``itl_budget``); None otherwise."""
    found = itl_budget_at_lightest(sb, slo)
    return None if found is None else found.words(f"at {lightest_probe(sb)[0]:.4g} req/s, the lightest load probed")


def itl_unreachable(sb: Any, slo: Any, target: float) -> str | None:
    """Why a request-rate search ``sb`` that found no rate meeting ``target`` is ITL unreachable: at the lightest load
    probed the ITL misses alone exceed what the target allows (``ItlBudget.blocks``) under a token budget whose
    full-chunk step is over the limit; None otherwise (then the search's own "SLO not met" reason stands).

    Exactness: the budget alone never makes a limit unreachable at every load: a request's decode shares a step with
    another's prefill only where their times overlap, and as the rate falls the scaled gaps part them, so the misses
    the budget causes fall toward none (azure-conv's first 2,000 under Llama-3.1-70B TP 4, 0.10.1, itl ≤ 100 ms: 58.6 %
    at 1 req/s, 93.1 % at 0.125: it is ranked, with the warning). What stays at any load are arrivals the trace gives
    one time, which every rate keeps together (Mooncake's millisecond stamps: 265 ties among its first 300), so the
    claim is made only where the search already found no rate down to its lightest probe meeting the target, and
    there the ITL misses alone keep the attainment below it."""
    found = itl_budget_at_lightest(sb, slo)
    if found is None or not found.blocks(target):
        return None
    return (f"at {lightest_probe(sb)[0]:.3g} req/s, the lightest load probed, {found.missed:,} of "
            f"{found.num_requests:,} requests missed {found.itl_key} ≤ {fmt_duration(found.limit_s)}, more than the "
            f"{(1 - target) * found.num_requests:,.0f} a {target:.0%} target allows: {found.step_words()}, "
            f"{found.step_s / found.limit_s:.1f}× the limit, and every request decoding in it waits that long; "
            f"{found.fix()}")


def idle_cause(sb: Any, slo: Any) -> str | None:
    """Why the lightest load probed by ``sb`` still misses, where the token budget is the cause: words that replace
    ``boundary.IDLE_STEP_WORDS`` ("the step time itself is over the limit"), which are wrong there. The budget is the
    cause where ``itl_budget_at_lightest`` finds a full-chunk step over the ITL limit, ITL is the only limit missed, and
    the step at batch 1 (one decode of the longest context, ``ItlBudget.decode_step_s``) is under it; the misses stay
    at that load through arrivals the trace gives one time (scaling the rate keeps them together), counted from the
    run's own arrivals. None otherwise: the old words stand (a step at batch 1 over the limit, another limit missed)."""
    found, low = itl_budget_at_lightest(sb, slo), lightest_probe(sb)
    if (found is None or found.decode_step_s is None or found.decode_step_s > found.limit_s
            or {m for m, k in low[1].num_missed.items() if k} != {"itl"}):
        return None
    gaps = np.diff(np.sort(columns_from(sb.first_run.run).arrival_s))
    ties = int(np.count_nonzero(gaps == 0))
    why = (f"{ties:,} of the {gaps.size:,} arrival gaps are 0, requests the trace gives one time, which arrive "
           "together at any rate" if ties else "requests still overlap")
    return (f": the step time at batch 1 is under the limit (one decode of the longest context, "
            f"{fmt_duration(found.decode_step_s)}), but {found.step_words()}, and every request decoding in it waits "
            f"that long; {why}, so no lower load meets it: {found.fix()}")


def retell_idle_note(sb: Any, slo: Any) -> None:
    """Where the token budget is why the lightest load misses (``idle_cause``), the boundary search's note says so in
    place of ``boundary.IDLE_STEP_WORDS``; its other notes are kept as they are."""
    cause = idle_cause(sb, slo)
    if cause is not None:
        sb.boundary.notes = [n.replace(IDLE_STEP_WORDS, cause) for n in sb.boundary.notes]


def itl_budget_words(run: Any, slo: Any, missed: int, where: str) -> str | None:
    """The warning for the simulated run ``run`` in which ``missed`` requests missed the ITL limit (``itl_budget``);
    ``where``: which run, in words; None where it does not apply."""
    found = itl_budget(run, slo, missed, 0)
    return None if found is None else found.words(where)


def itl_budget(run: Any, slo: Any, missed: int, num_requests: int) -> ItlBudget | None:
    """The analysis for the simulated run ``run`` (``sim_ledgers.SimulatedRun``, of ``num_requests`` requests) in which
    ``missed`` requests missed the ITL limit of ``slo`` while a step carrying a full-budget prefill chunk takes longer
    than the limit (vLLM, chunked prefill, an ITL limit on each request's largest gap or a percentile of its gaps);
    None otherwise."""
    if (not missed or slo.itl_s is None or slo.itl_stat == "mean" or run is None
            or getattr(run.setup.plan.memory, "engine", "vllm") != "vllm"):
        return None
    cfg = run.setup.config
    if not cfg.enable_chunked_prefill or cfg.batching != "continuous":
        return None
    budget, limit, cost = cfg.max_num_batched_tokens, slo.itl_s, run.setup.cost
    longest = min(int(columns_from(run.run).num_prompt_tokens.max()), cfg.max_model_len)
    step = chunk_step_s(cost, budget, longest)
    if step <= limit:
        return None
    fits = next((b for b in _halvings(budget) if b <= longest and chunk_step_s(cost, b, longest) <= limit), None)
    return ItlBudget(missed, num_requests, slo.itl_key, limit, budget, longest, step, fits,
                     None if fits is None else chunk_step_s(cost, fits, longest), cfg.max_num_seqs,
                     cost.step_time_s(StepShape(num_decode_seqs=1, decode_kv_tokens=longest)))


def _halvings(budget: int) -> list[int]:
    """``budget`` halved down to ``MIN_BUDGET``: budget / 2, budget / 4, …, largest first."""
    out, b = [], budget // 2
    while b >= MIN_BUDGET:
        out.append(b)
        b //= 2
    return out
