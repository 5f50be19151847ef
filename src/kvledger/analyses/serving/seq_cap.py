"""An overloaded open loop whose running batch sat at max_num_seqs while the KV cache had room: the cap, not the GPU's
memory, held the load, and raising --max-num-seqs is the first lever.

The simulator keeps no per-step count of running requests in its summary, so the batch is read off the records: the
requests past their first token and not finished (decoding), time-weighted over the span the overload was read on
(the median to the last arrival, ``queue_growth``). A request also runs while its prompt is prefilled, before its first
token, so this count is a lower bound on the running batch: when it sits at the cap, the batch did. Llama-3.1-8B on
an H100, azure-conv at 40 req/s, --max-num-seqs 16: 3,000 requests arrive at 39.4 req/s and finish at 6.9 with the KV
cache at most 6.7 % used, 16 requests decoding almost throughout.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from kvledger.analyses.serving.notes import OVERLOAD_ADVICE_SIMULATE
from kvledger.analyses.serving.pool_holds import PoolHolds, pool_holds
from kvledger.jsonable import to_jsonable
from kvledger.ledgers.columns import columns_from

__all__ = ["SEQ_CAP_SHARE", "KV_ROOM", "SeqCap", "seq_cap", "with_seq_cap"]

SEQ_CAP_SHARE = 0.9
"""The requests decoding average at least this share of max_num_seqs × replicas over the overload's span: the batch
sat at the cap (a threshold of this check, not fitted)."""
KV_ROOM = 0.8
"""… while the KV usage stayed under this share of the usable blocks at its highest: the KV cache had room."""


@dataclass(frozen=True)
class SeqCap:
    """The evidence that max_num_seqs held the batch (module doc); ``running_*`` count the whole deployment.

    Attributes:
        max_num_seqs: the cap per replica; replicas: how many.
        running_mean, running_max: requests decoding (first token → finish), time-weighted mean and most, between
            the median and the last arrival (a lower bound on the running batch).
        kv_usage_mean, kv_usage_max: the run's KV usage (held blocks ÷ usable, the simulator's summary).
        kv_pool_requests: requests of the run's mean length (``request_tokens_mean``, prompt + output means) one
            replica's KV pool holds (``pool_holds``): usable blocks × block size ÷ that length, rounded down, or under
            vLLM's hybrid KV cache manager usable blocks ÷ ``kv_pool_request_blocks``, the blocks one holds while
            decoding as plan counts them (``kv_pool_rule`` says how).
        note: the sentence that says so.
    """

    __json__ = ("max_num_seqs", "replicas", "running_mean", "running_max", "kv_usage_mean", "kv_usage_max",
                "kv_pool_requests", "kv_pool_tokens", "request_tokens_mean", "kv_pool_request_blocks", "kv_pool_rule",
                "note")
    __json_optional__ = ("kv_pool_request_blocks", "kv_pool_rule")
    max_num_seqs: int
    replicas: int
    running_mean: float
    running_max: int
    kv_usage_mean: float
    kv_usage_max: float
    kv_pool_requests: int
    kv_pool_tokens: int
    request_tokens_mean: float
    kv_pool_request_blocks: int | None = None
    kv_pool_rule: str | None = None
    note: str = ""

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


def _decoding(run: Any, a: float, b: float) -> tuple[float, int]:
    """(time-weighted mean, most) of the requests past their first token and not finished over [a, b] (times as the
    records'); one never finished counts to the end."""
    cols = columns_from(run)
    first = cols.first_token_s[np.isfinite(cols.first_token_s)]
    end = np.where(np.isfinite(cols.finish_s), cols.finish_s, np.inf)[np.isfinite(cols.first_token_s)]
    mean = float(np.clip(np.minimum(end, b) - np.maximum(first, a), 0.0, None).sum()) / (b - a)
    starts, ends = np.sort(first), np.sort(end)
    at = np.concatenate(([a], starts[(starts >= a) & (starts <= b)]))  # the count rises only at a first token
    most = np.searchsorted(starts, at, side="right") - np.searchsorted(ends, at, side="right")
    return mean, int(most.max())


def seq_cap(setup: Any, result: Any, overload: Any) -> SeqCap | None:
    """The SeqCap of a run whose ``overload`` (``overloads.QueueGrowth``) the max_num_seqs cap made (module doc), None
    otherwise. ``setup``: its ``SimSetup``; ``result``: its ``SimResult``."""
    if getattr(overload, "kind", None) != "queue_growth":
        return None
    cfg, reps, kv = setup.config, setup.replicas, result.summary.kv_usage or {}
    cap = cfg.max_num_seqs * reps
    t0 = float(np.nanmin(columns_from(result.records).arrival_s))
    mean, most = _decoding(result.records, t0 + overload.t_mid_s, t0 + overload.t_last_s)
    if mean < SEQ_CAP_SHARE * cap or kv.get("max", 1.0) >= KV_ROOM:
        return None
    wl = setup.workload_info
    length = float(wl.get("prompt_tokens_mean", 0.0)) + float(wl.get("output_tokens_mean", 0.0))
    holds = pool_holds(setup, length)
    if holds is None or holds.requests <= cfg.max_num_seqs:
        return None
    c = SeqCap(cfg.max_num_seqs, reps, mean, most, float(kv.get("mean", 0.0)), float(kv["max"]), holds.requests,
               holds.token_slots, length, holds.blocks_per_request, holds.rule or None)
    return replace(c, note=_note(c, holds))


def _note(c: SeqCap, holds: PoolHolds) -> str:
    per = "" if c.replicas == 1 else f" per replica, {c.max_num_seqs * c.replicas:,} over {c.replicas:,} replicas"
    return (f"max_num_seqs is the limit: from the median to the last arrival the requests decoding (first token to "
            f"finish, a lower bound on the running batch) averaged {c.running_mean:,.1f} and peaked at "
            f"{c.running_max:,} — the cap is {c.max_num_seqs:,}{per} — while the KV cache was at most "
            f"{c.kv_usage_max:.1%} used (mean {c.kv_usage_mean:.1%}): the engine ran as many requests as the cap lets "
            "it and queued the rest with KV to spare. Raise --max-num-seqs: one replica's KV pool holds about "
            f"{c.kv_pool_requests:,} requests of this run's mean length ({_division(c, holds)}), and `goodput "
            "--simulate … --target 0.9 --axis max_num_seqs` finds the value that meets an SLO")


def _division(c: SeqCap, holds: PoolHolds) -> str:
    """The division behind ``kv_pool_requests``, in this note's words where it is token slots ÷ the mean."""
    if holds.blocks_per_request is None:
        return f"{c.kv_pool_tokens:,} token slots ÷ {c.request_tokens_mean:,.0f} tokens, the prompt and output means"
    return holds.why()


def with_seq_cap(overload: Any, setup: Any, result: Any) -> Any:
    """``overload`` with its ``seq_cap`` and that sentence in its note, before the advice, which then leads with
    raising --max-num-seqs; unchanged where the cap did not hold the batch (``seq_cap``)."""
    c = seq_cap(setup, result, overload)
    if c is None:
        return overload
    head = overload.note.removesuffix(OVERLOAD_ADVICE_SIMULATE).rstrip(": ")
    return replace(overload, seq_cap=c, note=f"{head}. {c.note}; or lower the rate (--rate/--rate-scale) or add "
                                             "replicas")
