"""The simulator's mutable per-request state (vLLM's ``Request`` fields, kept only while a request is active)."""

from __future__ import annotations

from kvledger.dynamics.workload import RequestSpec
from kvledger.records import RequestRecord

__all__ = ["SimRequest", "WAITING", "RUNNING", "PREEMPTED", "FINISHED", "rejected_record"]

WAITING, RUNNING, PREEMPTED, FINISHED = "waiting", "running", "preempted", "finished"


class SimRequest:
    """One request inside one replica.

    vLLM v1 vocabulary: the request has ``num_tokens = num_prompt_tokens + num_generated``
    known tokens; each step computes some of them (``num_computed_tokens`` catches up with
    ``num_tokens``) and a step that brings ``num_computed_tokens`` to ``num_tokens`` samples
    one new token. Preemption (recompute) sets ``num_computed_tokens`` back to 0.

    Token times are kept compactly as *runs* of consecutive engine steps in which the
    request emitted one token each (``runs`` of ``(first_step, end_step)``, end exclusive,
    plus the open run starting at ``run_start``); the replica turns them into times at the end.
    """

    __slots__ = (
        "uid", "spec", "arrival_s", "num_prompt_tokens", "num_output_tokens",
        "num_computed_tokens", "num_generated", "num_tokens", "status", "num_preemptions", "num_cached_tokens",
        "runs", "run_start", "blocks", "num_registered", "keys", "node", "private_tokens",
        "tree_tokens", "covered_tokens",
    )

    def __init__(self, uid: int, spec: RequestSpec) -> None:
        self.uid = uid
        self.spec = spec
        self.arrival_s = spec.arrival_s
        self.num_prompt_tokens = spec.num_prompt_tokens
        self.num_output_tokens = spec.num_output_tokens
        self.num_computed_tokens = 0
        self.num_generated = 0
        self.num_tokens = spec.num_prompt_tokens  # known tokens: prompt + generated (kept in step with num_generated)
        self.status = WAITING
        self.num_preemptions = 0
        self.num_cached_tokens: int | None = None  # prefix-cache hit at first admission, tokens
        self.runs: list[tuple[int, int]] = []
        self.run_start = -1
        # paged KV manager state
        self.blocks: list[int] = []
        self.num_registered = 0
        self.keys: list[int] | None = None
        # radix KV manager state
        self.node = None
        self.private_tokens = 0
        self.tree_tokens = 0
        self.covered_tokens = 0

    @property
    def remaining_output_tokens(self) -> int:
        """Tokens still to generate, tokens."""
        return self.num_output_tokens - self.num_generated

    def __repr__(self) -> str:
        return (f"SimRequest({self.spec.request_id!r}, computed={self.num_computed_tokens}, "
                f"generated={self.num_generated}/{self.num_output_tokens}, {self.status})")


def rejected_record(spec: RequestSpec, max_model_len: int) -> RequestRecord:
    """The record of a request refused at input validation: prompt + output longer than max_model_len."""
    total = spec.num_prompt_tokens + spec.num_output_tokens
    msg = (f"rejected: prompt ({spec.num_prompt_tokens}) + output ({spec.num_output_tokens}) = {total} tokens "
           f"exceeds max_model_len={max_model_len} (vLLM refuses such a request at input validation)")
    return RequestRecord(spec.request_id, spec.arrival_s, spec.num_prompt_tokens, 0, finish_s=spec.arrival_s,
                         num_cached_tokens=None, num_preemptions=0, error=msg)
