"""One system prompt every request starts with (``--shared-prefix-tokens N``), as shared prefix segments.

A trace without prefix ids (Azure, a lengths-only CSV) or a synthetic workload says nothing about prompt content, so
no two prompts share a cached block. With a shared system prompt of N tokens, every request's first min(N, prompt)
tokens are the same text. The prompt lengths stay the workload's own: the system prompt is part of the prompt.

Representation: a request whose prompt has at least N tokens carries ``prefix_segments = (SHARED_PREFIX_ID,)`` and
``segment_tokens = N`` (one segment of N tokens, as ``synthetic.SharedPrefix`` groups are). Its shareable tokens are
then exactly N (``RequestSpec.num_shareable_tokens``), so vLLM's hash cache, which keys full blocks only
(``prefix_keys.shareable_block_keys``), shares exactly ⌊N/B⌋ blocks of B tokens, and SGLang's radix cache and the
prefix-aware router share the N tokens. A request whose prompt is shorter than N (its whole prompt a prefix of the
system prompt) is left unshared: the chained keys start from the segment size, so no segment size could give it
the long requests' keys without a segment per block; such prompts' reuse is left out (an under-count, stated in
docs/reference.md).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from kvledger.dynamics.engine.request import RequestSpec
from kvledger.errors import InputError

__all__ = ["SHARED_PREFIX_ID", "with_shared_prefix", "shared_prefix_info", "shared_prefix_refusal",
           "check_trace_shared_prefix"]

#: the segment id of the one shared system prompt (any int: no other segment id is in the same workload)
SHARED_PREFIX_ID = 0


def shared_prefix_refusal(what: str) -> str:
    """The paragraph refusing ``--shared-prefix-tokens`` for a workload that names its own prefixes (``what``)."""
    return (f"--shared-prefix-tokens models one system prompt shared by requests whose trace says nothing of their "
            f"content, but {what} already names which prompts share which prefixes, and the two cannot be "
            "composed: drop --shared-prefix-tokens (that workload's own prefix ids are simulated), or give a trace "
            "without prefix ids (e.g. azure-conv, a lengths-only CSV) or a synthetic workload (--prompt-lengths)")


def with_shared_prefix(specs: list[RequestSpec], tokens: int, name: str) -> list[RequestSpec]:
    """``specs`` with the first ``tokens`` tokens of every prompt of at least ``tokens`` tokens shared (module doc);
    a shorter prompt unchanged. ``name``: the workload, for the refusal.

    Raises:
        InputError: ``tokens`` not an integer ≥ 1, or a request already naming prefix segments (Mooncake hash ids).
    """
    if isinstance(tokens, bool) or not isinstance(tokens, int) or tokens < 1:
        raise InputError(f"--shared-prefix-tokens must be a whole number of tokens ≥ 1, got {tokens!r}")
    if any(s.prefix_segments for s in specs):
        raise InputError(shared_prefix_refusal(f"the workload {name} (its hash ids)"))
    seg = (SHARED_PREFIX_ID,)
    return [replace(s, prefix_segments=seg, segment_tokens=tokens) if s.num_prompt_tokens >= tokens else s
            for s in specs]


def check_trace_shared_prefix(trace: str, tokens: int | None, num_requests: int, seed: int) -> None:
    """Up front, where a command runs the trace later (``search``: before any candidate): ``tokens`` (None: no
    ``--shared-prefix-tokens``) refused for ``trace`` by the check ``with_shared_prefix`` makes on the requests
    simulate, goodput, cost and report draw (its first ``num_requests``; Mooncake's hash ids: refused).

    Raises:
        InputError: as ``with_shared_prefix``; UnknownNameError / InputError: an unknown trace, as ``load_trace``.
    """
    if tokens is None:
        return
    from kvledger.dynamics.workload.traces import load_trace

    with_shared_prefix(load_trace(trace, num_requests=num_requests, rate=1.0, seed=seed), tokens, trace)


def shared_prefix_info(specs: Any, tokens: int) -> dict[str, Any]:
    """The workload description's entries: the tokens, and how many requests are long enough to share them."""
    return {"shared_prefix_tokens": tokens,
            "shared_prefix_requests": sum(1 for s in specs if s.prefix_segments)}
