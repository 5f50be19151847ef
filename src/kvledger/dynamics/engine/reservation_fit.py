"""Whether a request's reservation at admission can ever fit the KV pool, checked before any simulation (a request
that cannot would wait for ever and the simulator would stall on it).

* ``kv_allocation='contiguous'`` reserves ``max_model_len`` worth of blocks per request (``PagedKVManager.admit``):
  :func:`check_contiguous_fit` refuses settings whose pool is shorter than that, whatever the requests.
* static batching reserves a request's whole sequence (prompt + output). Without a sliding-window rule that is at most
  max_model_len's blocks, which the engine's own start-up check (``EngineConfig._check_pool``) already fits; with
  vLLM's per-step sliding-window rule the sliding layers hold the whole sequence too, so a long request can need more
  blocks than the pool: :func:`check_static_fit` refuses a workload holding one.

Each refusal names the reservation, the pool and the longest sequence (or max_model_len) whose reservation fits."""

from __future__ import annotations

from typing import Any

import numpy as np

from kvledger.errors import InputError
from kvledger.units import GiB

__all__ = ["ContiguousTooLargeError", "StaticTooLongError", "check_contiguous_fit", "check_static_fit",
           "reservation_blocks"]


class ContiguousTooLargeError(InputError):
    """One request's contiguous reservation (max_model_len tokens) needs more KV blocks than the pool holds: the
    contiguous baseline cannot admit any request (exit 2: the settings, not the model, are at fault; the paged policy
    runs them).

    Attributes:
        max_model_len: the reservation, tokens.
        need_blocks: blocks it takes, blocks.
        usable_blocks: blocks requests can hold, blocks.
        fit_len: the largest max_model_len whose reservation fits, tokens (0: none does).
        bytes_per_block: bytes of one block over all layers, B; None when not known (no GiB in the message).
    """

    def __init__(self, max_model_len: int, need_blocks: int, usable_blocks: int, fit_len: int,
                 bytes_per_block: float | None = None) -> None:
        self.max_model_len, self.need_blocks, self.usable_blocks = max_model_len, need_blocks, usable_blocks
        self.fit_len, self.bytes_per_block = fit_len, bytes_per_block
        super().__init__(self.reason() + "; " + self.remedy())

    def with_bytes(self, bytes_per_block: float) -> ContiguousTooLargeError:
        """The same refusal with the blocks' sizes in GiB."""
        return ContiguousTooLargeError(self.max_model_len, self.need_blocks, self.usable_blocks, self.fit_len,
                                       bytes_per_block)

    def _gib(self, blocks: int) -> str:
        return "" if self.bytes_per_block is None else f" ({blocks * self.bytes_per_block / GiB:,.2f} GiB)"

    def reason(self) -> str:
        """The facts: the reservation and the pool, in one clause."""
        return (f"contiguous KV allocation reserves max_model_len ({self.max_model_len:,} tokens) per request at "
                f"admission, {self.need_blocks:,} KV blocks{self._gib(self.need_blocks)}, more than the pool's "
                f"{self.usable_blocks:,} usable blocks{self._gib(self.usable_blocks)}, so not one request could be "
                "admitted")

    def remedy(self) -> str:
        """What to do: a max_model_len whose reservation fits, or the paged policy."""
        lower = (f"lower max_model_len to ≤ {self.fit_len:,} tokens (--max-model-len {self.fit_len}) or "
                 if self.fit_len else "")
        return (f"{lower}use paged KV allocation (the default, --kv-allocation paged: blocks taken as tokens are "
                "computed)")


def reservation_blocks(cfg: Any, num_tokens: int) -> int:
    """Blocks an admission reserving ``num_tokens`` at once (contiguous: max_model_len; static: the whole sequence)
    takes, as ``PagedKVManager.admit`` counts them: the larger of the per-step rule's admission and holding counts
    with a sliding-window rule, ``blocks_for_tokens`` with a custom rule, else ceil(tokens / block_size); blocks."""
    rule = cfg.step_blocks
    if rule is not None:
        return max(rule.admission(num_tokens), rule.held_after(0, num_tokens))
    return cfg.blocks_needed(num_tokens)


def check_contiguous_fit(cfg: Any) -> None:
    """Raise :class:`ContiguousTooLargeError` when ``cfg`` allocates contiguously and one reservation of its
    max_model_len needs more blocks than ``cfg.num_usable_blocks``; nothing otherwise (paged settings included)."""
    if cfg.kv_allocation != "contiguous":
        return
    usable, need = cfg.num_usable_blocks, reservation_blocks(cfg, cfg.max_model_len)
    if need > usable:
        raise ContiguousTooLargeError(cfg.max_model_len, need, usable, _longest_fitting(cfg))


def _longest_fitting(cfg: Any) -> int:
    """The most tokens (≤ max_model_len) one reservation can hold in ``cfg``'s usable blocks, tokens (0: none)."""
    lo, hi, usable = 0, cfg.max_model_len, cfg.num_usable_blocks
    while lo < hi:  # the reservation grows with its tokens: the largest that fits, by bisection
        mid = (lo + hi + 1) // 2
        lo, hi = (mid, hi) if reservation_blocks(cfg, mid) <= usable else (lo, mid - 1)
    return lo


class StaticTooLongError(InputError):
    """Static batching on a sliding-window layout: one request's whole-sequence reservation needs more blocks than the
    pool holds, so it could never be admitted (exit 2).

    Attributes:
        which: the request, in words ("a request of max_model_len", "the longest request (prompt + output N tokens)").
        need_blocks: blocks its reservation takes, blocks.
        usable_blocks: blocks requests can hold, blocks.
        fit_len: the largest max_model_len whose reservation fits, tokens (0: none does).
    """

    def __init__(self, which: str, need_blocks: int, usable_blocks: int, fit_len: int) -> None:
        self.which, self.need_blocks, self.usable_blocks, self.fit_len = which, need_blocks, usable_blocks, fit_len
        super().__init__(self.reason() + "; " + self.remedy())

    def reason(self) -> str:
        """The facts: the reservation and the pool, in one clause."""
        return ("static batching reserves a request's whole sequence at admission, and with the sliding-window layout "
                f"the sliding layers hold all of it too: {self.which} needs {self.need_blocks:,} KV blocks, more than "
                f"the pool's {self.usable_blocks:,} usable blocks, so it could never be admitted")

    def remedy(self) -> str:
        """What to do: a max_model_len whose reservation fits, or continuous batching."""
        return (f"lower max_model_len to ≤ {self.fit_len:,} tokens (--max-model-len {self.fit_len}: longer requests "
                "are then capped or rejected as the engine does) or use continuous batching (the default)")


def check_static_fit(cfg: Any, lengths: tuple[Any, Any] | None) -> None:
    """Raise :class:`StaticTooLongError` when ``cfg`` batches statically and a request of ``lengths`` (its prompt and
    output tokens, two sequences; as the engine accepts it: output capped at max_model_len where the settings cap it,
    a rejected request holding nothing) would reserve more blocks than the usable ones; nothing otherwise. None: the
    requests are not known before the run (sessions, a generator), so a request of max_model_len, the longest the
    engine accepts, is held to the pool."""
    if cfg.batching != "static" or cfg.step_blocks is None:
        return  # every accepted request's blocks fit: the start-up check fitted max_model_len's
    usable, L = cfg.num_usable_blocks, cfg.max_model_len
    if reservation_blocks(cfg, L) <= usable:
        return
    p, o = ([L - 1], [1]) if lengths is None else lengths  # None: the longest the engine accepts, L tokens
    p, o = np.asarray(p, dtype=np.int64), np.asarray(o, dtype=np.int64)
    seq = np.where(p >= L, 0, np.minimum(p + o, L)) if cfg.caps_output else np.where(p + o > L, 0, p + o)
    i = int(np.argmax(seq)) if len(seq) else 0
    if not len(seq) or reservation_blocks(cfg, int(seq[i])) <= usable:
        return
    fit, n = _longest_fitting(cfg), int(seq[i])
    which = "a request of max_model_len" if lengths is None else f"the longest request (prompt + output {n:,} tokens)"
    raise StaticTooLongError(which, reservation_blocks(cfg, n), usable, fit)
