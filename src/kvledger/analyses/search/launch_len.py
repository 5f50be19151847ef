"""The --max-model-len a candidate's launch line carries when the model's default may not start.

A plan whose range's low end holds under one request of max_model_len (``max_concurrency_low`` < 1) may be refused
by vLLM at start-up. The launch line then carries the longest max_model_len that starts even at that low end — the
estimate ``kvledger plan``'s --max-model-len remedy gives (``advice_len.estimate_len_low``), rounded down to a multiple
of 1,024 tokens (of the block size below 1,024) — when the model's default was not asked for by --max-model-len and
the trace's longest request (prompt + output, every row of the file) is within it. The simulation keeps the default:
the KV pool vLLM sizes does not depend on max_model_len, and max_model_len only caps or rejects requests longer than
it, of which the trace has none, so the run at the lowered value is the same run. Otherwise (a longer request, a
synthetic workload whose longest is not known, a --max-model-len given) the launch line keeps the plan's value and
the candidate's caveat says what would start.
"""

from __future__ import annotations

from typing import Any

__all__ = ["LEN_STEP", "low_end_len", "launch_len_figures", "launch_len_note", "low_end_caveat"]

LEN_STEP = 1024
"""A lowered --max-model-len is rounded down to a multiple of this (of the block size when below it), tokens."""


def low_end_len(plan: Any) -> int | None:
    """The longest max_model_len one request of which fits even at the low end of ``plan``'s memory range
    (``advice_len.estimate_len_low``, as ``kvledger plan``'s remedy), rounded down to a multiple of ``LEN_STEP`` (of the
    block size below it); None when the plan has no such estimate or it rounds to nothing."""
    from kvledger.accounting.advice_len import estimate_len, estimate_len_low

    est_low = estimate_len_low(plan, estimate_len(plan))
    if not est_low:
        return None
    step = LEN_STEP if est_low >= LEN_STEP else plan.memory.block_size
    return est_low // step * step or None


def launch_len_figures(spec: Any, plan: Any, figures: dict[str, Any]) -> dict[str, Any]:
    """What to add to a candidate's plan figures (``screen.plan_figures``) when its range's low end holds under one
    max_model_len request: ``max_model_len_low_end`` (``low_end_len``), ``longest_request_tokens`` (the trace's; None
    for a synthetic workload) and, when the launch line may carry it, ``launch_max_model_len``; {} otherwise."""
    if figures.get("max_concurrency_low") is None or (safe := low_end_len(plan)) is None:
        return {}
    longest = None
    if spec.synthetic is None:
        from kvledger.dynamics.workload.traces import trace_longest_request

        longest = trace_longest_request(spec.trace)
    out: dict[str, Any] = {"max_model_len_low_end": safe, "longest_request_tokens": longest}
    if spec.max_model_len is None and longest is not None and longest <= safe < figures["max_model_len"]:
        out["launch_max_model_len"] = safe
    return out


def launch_len_note(p: dict[str, Any]) -> str | None:
    """Why the launch line's --max-model-len is below the model's default (plan figures ``p``), or None when it is
    not."""
    if "launch_max_model_len" not in p:
        return None
    return (f"--max-model-len {p['launch_max_model_len']:,}, lowered from the model's default {p['max_model_len']:,}: "
            f"one {p['max_model_len']:,}-token request fits at the plan's figure but not at its memory range's low end "
            f"({p['max_concurrency_low']:.2f}x), where vLLM would refuse to start; {p['launch_max_model_len']:,} is "
            f"the longest that fits there (vLLM's max_model_len estimate at the range's low end, as kvledger plan's "
            f"--max-model-len remedy computes it, rounded down to a multiple of {LEN_STEP:,}) and the trace's "
            f"longest request is {p['longest_request_tokens']:,} tokens. The simulation "
            f"ran at {p['max_model_len']:,} and is the same run at {p['launch_max_model_len']:,}: the KV pool does not "
            "depend on max_model_len, which only caps or rejects longer requests, and the trace has none")


def low_end_caveat(p: dict[str, Any]) -> str | None:
    """The caveat of a plan whose range's low end holds under one max_model_len request and whose launch line keeps
    it (``launch_len_figures`` could not lower it), with what would start and why it was kept; None otherwise."""
    if p.get("max_concurrency_low") is None or "launch_max_model_len" in p:
        return None
    line = (f"one {p['max_model_len']:,}-token request fits at the plan's figure but not at its range's low end "
            f"({p['max_concurrency_low']:.2f}x): vLLM may refuse to start (a lower --max-model-len")
    safe, longest = p.get("max_model_len_low_end"), p.get("longest_request_tokens")
    if safe is None:
        return line + ")"
    line += f": {safe:,} starts even there"
    if longest is not None and longest > safe:
        return line + f", but the trace's longest request is {longest:,} tokens)"
    return line + ")"
