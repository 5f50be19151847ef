"""A DP + EP plan's lever when it does not fit: a lower --max-num-batched-tokens, which shrinks the profile run's MoE
rows DP-fold.

Under vLLM's data parallelism with expert parallelism the default all2all backend gathers every DP rank's
max_num_batched_tokens profile rows into each GPU's MoE layers (``vllm_dp_moe``), so the kept fused-MoE workspace and
the gathered hidden states grow with DP × max_num_batched_tokens; a lower token budget frees that memory for the KV
cache, at the price of fewer tokens per step (longer prompts prefill in more chunks).

vLLM's limits on the value (``config/scheduler.py::SchedulerConfig.verify_max_model_len``, read in 0.19.0 and 0.33.0):
it must be ≥ max_num_seqs ("must be greater than or equal to max_num_seqs"), and below max_model_len only with
chunked prefill on (V1's default; the plan has no flag to turn it off). No multiple rule applies to it there. Where
--max-num-seqs is unset, vLLM ≥0.10.1 lowers its default to a smaller given budget (``vllm_seqs_default``), so the
floor is 1 token there, else the plan's max_num_seqs. The largest value in [floor, the plan's - 1] that holds one
max_model_len request is found by bisection over re-plans (the profile terms grow with the token budget), not guessed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kvledger.accounting.advice_types import Option
from kvledger.accounting.vllm_rules import parse_version
from kvledger.accounting.vllm_seqs_default import SEQS_FOLLOW_BUDGET_FROM
from kvledger.errors import InputError
from kvledger.units import GiB

if TYPE_CHECKING:
    from kvledger.accounting.plan import Plan

__all__ = ["max_num_batched_tokens_fix", "dp_budget_note", "DP_BUDGET_NOTE"]

DP_BUDGET_NOTE = "DP + EP token budget:"
"""How ``dp_budget_note`` begins (the plan summary shows it beside the DP ranks' lines)."""

SCHEDULER_RULE = "config/scheduler.py::SchedulerConfig.verify_max_model_len, vLLM 0.19.0 and 0.33.0"
"""Where vLLM refuses a token budget below max_num_seqs and (without chunked prefill) below max_model_len."""


def _fits_at(p: Plan, build: Callable, tokens: int) -> Plan | None:
    """The plan re-planned at ``tokens`` when one max_model_len request fits there, else None."""
    s = p.settings.model_copy(update={"contexts": (p.memory.max_model_len,), "max_num_batched_tokens": tokens})
    try:
        q = build(p.model, p.gpu, s, with_roofline=False, with_advice=False)
    except InputError:
        return None
    row = q.row_at(q.memory.max_model_len)
    return q if row and row.max_requests >= 1 else None


def _activation(p: Plan) -> float:
    return next((d.bytes for d in p.memory.deductions if d.name == "activation peak"), 0.0)


def max_num_batched_tokens_fix(p: Plan, build: Callable) -> list[Option]:
    """The largest --max-num-batched-tokens (≥ max_num_seqs, below the plan's) that makes one max_model_len request
    fit a vLLM DP + EP plan whose MoE profile rows are DP × the token budget; none for other plans, a given
    activation peak or available memory, or when even max_num_seqs tokens do not fit."""
    m, s = p.memory, p.settings
    dp = getattr(p, "data_parallel", None)
    if (s.engine != "vllm" or dp is None or not dp.moe_profile_tokens or m.available_given
            or s.activation_peak_bytes is not None):
        return []
    follows = s.max_num_seqs is None and parse_version(m.engine_version) >= SEQS_FOLLOW_BUDGET_FROM
    lo, hi = 1 if follows else m.max_num_seqs, m.max_num_batched_tokens - 1
    best = _fits_at(p, build, lo) if lo <= hi else None
    if best is None:
        return []
    while lo < hi:  # invariant: lo fits; the largest fitting value is in [lo, hi]
        mid = (lo + hi + 1) // 2
        q = _fits_at(p, build, mid)
        if q is None:
            hi = mid - 1
        else:
            lo, best = mid, q
    row = best.row_at(best.memory.max_model_len)
    rows_was, rows = dp.moe_profile_tokens, best.data_parallel.moe_profile_tokens
    chunked = (f"; prompts above {lo:,} tokens prefill in chunks (chunked prefill, on by default in V1)"
               if lo < m.max_model_len else "")
    how = f"DP {dp.ranks} × {lo:,} = {rows:,}" if rows == dp.ranks * lo else f"{rows:,}"  # chunked: min(T, 256)
    moe = (f"the profile run's MoE layers run {rows_was:,} → {how} rows" if rows != rows_was else
           f"the profile run's MoE rows stay {rows:,} (its all2all backend chunks them), its other terms shrink")
    detail = (f"{moe}; activation peak {_activation(p) / GiB:.2f} → "
              f"{_activation(best) / GiB:.2f} GiB, {best.memory.available_kv_bytes / GiB:.2f} GiB for the KV cache; "
              f"the largest value that holds one {m.max_model_len:,}-token request (re-planned; one more token does "
              f"not), {_seqs_words(m.max_num_seqs, best.memory.max_num_seqs)}{chunked}")
    return [Option(f"--max-num-batched-tokens {lo}", row.max_concurrency, row.max_requests, detail,
                   best.memory.max_model_len)]


def _seqs_words(was: int, now: int) -> str:
    """How the value meets vLLM's max_num_seqs rule: at or above the plan's max_num_seqs, or lowering its default."""
    if now == was:
        return f"≥ max_num_seqs {was:,} as vLLM requires ({SCHEDULER_RULE})"
    return (f"with --max-num-seqs unset vLLM ≥0.10.1 lowers max_num_seqs {was:,} → {now:,} to it "
            f"(engine/arg_utils.py), so at most {now:,} requests run at once")


def dp_budget_note(p: Plan, build: Callable) -> tuple[str, ...]:
    """A vLLM DP + EP plan that fits with fewer max_model_len requests than max_num_seqs while its MoE profile rows are
    DP × the token budget: one note with what a smaller budget, max(budget ÷ DP, max_num_seqs) (the rows one rank's
    budget gathers, within vLLM's max_num_seqs rule), frees and the concurrency it gains; () otherwise. The verdict
    stays: the plan keeps its budget."""
    m, s, dp = p.memory, p.settings, getattr(p, "data_parallel", None)
    row = p.row_at(m.max_model_len)
    if (s.engine != "vllm" or dp is None or not dp.moe_profile_tokens or m.available_given or row is None
            or s.activation_peak_bytes is not None or not 1 <= row.max_requests < m.max_num_seqs
            or dp.moe_profile_tokens != dp.ranks * m.max_num_batched_tokens):
        return ()
    t = m.max_num_batched_tokens
    lower = max(t // dp.ranks, m.max_num_seqs)
    q = _fits_at(p, build, lower) if lower < t else None
    r = q.row_at(q.memory.max_model_len) if q else None
    if q is None or r is None or r.max_concurrency <= row.max_concurrency:
        return ()
    return (f"{DP_BUDGET_NOTE} the profile run's MoE layers gather DP {dp.ranks} × {t:,} = "
            f"{dp.moe_profile_tokens:,} rows at --max-num-batched-tokens {t:,} (the fused-MoE workspace and gathered "
            f"hidden states, in the activation peak {_activation(p) / GiB:.2f} GiB); at max({t:,} ÷ {dp.ranks}, "
            f"max_num_seqs {m.max_num_seqs:,}) = {lower:,} they gather DP {dp.ranks} × {lower:,} = "
            f"{q.data_parallel.moe_profile_tokens:,} rows, activation peak {_activation(q) / GiB:.2f} GiB, so "
            f"{m.num_gpu_blocks:,} → {q.memory.num_gpu_blocks:,} KV blocks and {row.max_concurrency:.2f}× → "
            f"{r.max_concurrency:.2f}× concurrent {m.max_model_len:,}-token requests per rank ({row.max_requests:,} → "
            f"{r.max_requests:,} whole, below max_num_seqs {m.max_num_seqs:,} either way; re-planned); prompts above "
            f"{lower:,} tokens would then prefill in more chunks. The plan keeps --max-num-batched-tokens {t:,}",)
