"""The fits verdict's figures when --max-num-seqs binds: what the engine runs at once comes first, the KV figure second.

vLLM's scheduler admits at most ``max_num_seqs`` running requests whatever the KV pool holds
(vllm/v1/core/sched/scheduler.py: ``if len(self.running) == self.max_num_running_reqs: break``), so the first
number a reader meets is min(KV-limited requests, max_num_seqs); the KV-limited figure follows, named as such.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from kvledger.accounting.advice_types import Option

__all__ = ["capped_at_max", "context_words", "few_words", "seqs_options", "at_len"]


def _reqs(n: int, tokens: int) -> str:
    return f"{n:,} concurrent {tokens:,}-token request{'' if n == 1 else 's'}"


def context_words(r: Any, as_few: str) -> str:
    """One asked context's figure: the requests that run at once, then (when max_num_seqs binds) what the KV holds;
    ``as_few`` is the range's low-end clause (" (as few as N…)") or ""."""
    decode = "" if r.decode_requests is None else f" (≈{r.decode_requests:,} while decoding)"
    if r.running_cap >= r.max_requests:
        return _reqs(r.max_requests, r.context_tokens) + decode + as_few
    low = as_few.removeprefix(" (").removesuffix(")")
    return (f"{_reqs(r.running_cap, r.context_tokens)} run at once (max_num_seqs={r.running_cap:,}; the KV cache "
            f"holds {r.max_requests:,}{decode}{', ' + low if low else ''})")


def capped_at_max(at_max: str, row: Any, tokens: int) -> str:
    """The max_model_len figure ``at_max`` (``window_capacity.at_max_words``, which opens with the KV-limited
    requests) led by what runs at once when max_num_seqs binds there; ``at_max`` unchanged otherwise."""
    if row is None or row.running_cap >= row.max_requests:
        return at_max
    return (f"{_reqs(row.running_cap, tokens)} run at once (max_num_seqs={row.running_cap:,}, the engine's limit; "
            f"the rest wait); the KV cache holds {at_max}")


def few_words(runs: int, kv_requests: int, seqs: int, low: int) -> str:
    """The fits line's low-concurrency clause: ``runs`` = min(``kv_requests``, ``seqs``) requests at max_model_len
    run at once, under ``low`` (kvledger's threshold for listing fixes, said as such); the binding limit named
    (max_num_seqs where ``seqs`` < ``kv_requests``)."""
    if seqs >= kv_requests:
        return f"; only {runs:,} at once at max_model_len ({_below(low)}): each fix below raises it"
    return (f"; only {runs:,} run at once at max_model_len ({_below(low)}), the limit set by max_num_seqs={seqs:,} "
            f"(the KV cache holds {kv_requests:,}): each fix below raises it")


def _below(low: int) -> str:
    """What the threshold ``low`` is, said where it is printed: kvledger's own (``advice.LOW_CONCURRENCY``), not an
    engine's."""
    return f"under {low:,}, kvledger lists fixes"


def at_len(q: Any) -> tuple[float, int]:
    """(the engine's × at max_model_len, the whole requests that run there: while decoding with windowed layers)."""
    r = q.row_at(q.memory.max_model_len)
    return (r.max_concurrency, r.decode_requests if r.decode_requests is not None else r.max_requests) if r else (
        0.0, 0)


def seqs_options(retry: Callable[..., Any], runs: int, kv_requests: int, seqs: int) -> list[Option]:
    """Where max_num_seqs (``seqs``) binds below what the KV cache holds at max_model_len (``kv_requests``): the
    ``--max-num-seqs`` that lets those run, re-planned (``retry(**update)``, None when it cannot): vLLM's profile run
    samples max_num_seqs dummy requests (``advice_seqs``), so a larger max_num_seqs can leave fewer blocks; kept only
    if min(its KV-bound requests, ``kv_requests``) > ``runs``. [] where max_num_seqs does not bind."""
    if kv_requests <= seqs or (q := retry(max_num_seqs=kv_requests)) is None:
        return []
    c, k = at_len(q)
    if min(k, kv_requests) <= runs:
        return []
    return [Option(f"--max-num-seqs {kv_requests:,}", c, min(k, kv_requests), "the scheduler runs at most "
                   "max_num_seqs requests whatever the KV cache holds (vLLM v1/core/sched/scheduler.py); the KV cache "
                   f"holds {k:,} there", q.memory.max_model_len)]
