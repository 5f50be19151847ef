"""The simulator's mutable per-request state (vLLM's ``Request`` fields, kept only while a request is active)."""

from __future__ import annotations

from typing import Any

from kvledger.dynamics.engine.request import RequestSpec
from kvledger.records import RequestRecord

__all__ = ["SimRequest", "WAITING", "RUNNING", "PREEMPTED", "FINISHED", "rejected_record", "accept", "refused",
           "admit_due"]

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
        "tree_tokens", "covered_tokens", "shared_prefix_boundary",
    )

    def __init__(self, uid: int, spec: RequestSpec, max_model_len: int | None = None) -> None:
        self.uid = uid
        self.spec = spec
        self.arrival_s = spec.arrival_s
        self.num_prompt_tokens = spec.num_prompt_tokens
        out = spec.num_output_tokens
        if max_model_len is not None and spec.num_prompt_tokens + out > max_model_len:
            out = max_model_len - spec.num_prompt_tokens  # served with its output capped (see ``accept``)
        self.num_output_tokens = out
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
        self.shared_prefix_boundary = 0  # vLLM's junction: where a Mamba prefill chunk stops (mamba_prefix.py), tokens

    @property
    def remaining_output_tokens(self) -> int:
        """Tokens still to generate, tokens."""
        return self.num_output_tokens - self.num_generated

    def __repr__(self) -> str:
        return (f"SimRequest({self.spec.request_id!r}, computed={self.num_computed_tokens}, "
                f"generated={self.num_generated}/{self.num_output_tokens}, {self.status})")


def accept(uid: int, spec: RequestSpec, max_model_len: int, cap_output: bool,
           max_req_len: int | None = None) -> SimRequest | RequestRecord:
    """A request at input validation: the SimRequest to serve, or the record of its rejection.

    ``cap_output`` (vLLM v1, checked in 0.33): only a prompt of ``max_model_len`` tokens or more is
    rejected (``v1/engine/input_processor.py : InputProcessor._validate_prompt_len``); a longer
    request is served and stops at ``max_model_len`` tokens (``get_max_tokens`` clamps
    ``max_tokens`` to ``max_model_len − prompt``; ``v1/core/sched/utils.py : check_stop``), so its
    output is capped. Otherwise (V0's OpenAI server) prompt + output > ``max_model_len`` is rejected.
    ``max_req_len`` (SGLang 0.5.23, ``EngineConfig.sglang_max_req_len``): after that check the scheduler
    aborts a prompt ≥ ``max_req_len − 5`` tokens (``managers/utils.py : validate_input_length``) and caps
    ``max_new_tokens`` at ``max_req_len − prompt − 1`` (``scheduler.py : init_req_max_new_tokens``).
    """
    p, total = spec.num_prompt_tokens, spec.num_prompt_tokens + spec.num_output_tokens
    if (p >= max_model_len) if cap_output else (total > max_model_len):
        return rejected_record(spec, max_model_len, cap_output)
    if max_req_len is not None:
        if p >= max_req_len - 5:
            return RequestRecord(spec.request_id, spec.arrival_s, p, 0, finish_s=spec.arrival_s, num_cached_tokens=None,
                                 num_preemptions=0, error=f"rejected: prompt ({p} tokens) ≥ SGLang's max_req_input_len"
                                 f"={max_req_len - 5} (max_req_len − 5; managers/utils.py validate_input_length)")
        return SimRequest(uid, spec, max_req_len - 1)
    return SimRequest(uid, spec, max_model_len if cap_output else None)


def refused(prompt, output, max_model_len: int, cap_output: bool, max_req_len: int | None = None):
    """Whether ``accept`` refuses a request of ``prompt`` and ``output`` tokens (ints, or numpy arrays: then one bool
    per request), by the same rule: ``cap_output`` a prompt ≥ ``max_model_len``, else prompt + output past it; with
    SGLang's ``max_req_len`` also a prompt ≥ ``max_req_len − 5``. For a workload's count before it runs (a capacity
    search: ``analyses.serving.rejections``); ``accept`` keeps its own scalar test on the simulator's hot path."""
    out = (prompt >= max_model_len) if cap_output else (prompt + output > max_model_len)
    return out if max_req_len is None else out | (prompt >= max_req_len - 5)


def rejected_record(spec: RequestSpec, max_model_len: int, cap_output: bool = False) -> RequestRecord:
    """The record of a request refused at input validation (see ``accept``)."""
    total = spec.num_prompt_tokens + spec.num_output_tokens
    if cap_output:
        msg = (f"rejected: prompt ({spec.num_prompt_tokens} tokens) ≥ max_model_len={max_model_len} (vLLM refuses "
               "such a prompt at input validation)")
    else:
        msg = (f"rejected: prompt ({spec.num_prompt_tokens}) + output ({spec.num_output_tokens}) = {total} tokens "
               f"exceeds max_model_len={max_model_len} (vLLM refuses such a request at input validation)")
    return RequestRecord(spec.request_id, spec.arrival_s, spec.num_prompt_tokens, 0, finish_s=spec.arrival_s,
                         num_cached_tokens=None, num_preemptions=0, error=msg)


def admit_due(arr: Any, bound_s: float, uid: int, cfg: Any, think_s: float,
              out: list) -> tuple[list[tuple[int, int, SimRequest]], int]:
    """Pop every arrival of ``arr`` (``cluster.Arrivals``) due at or before ``bound_s``, in order: each one ``accept``
    refuses goes to ``out`` as (uid, its rejection) and, from a closed-loop user, sends that user's next request
    after ``think_s``; the rest come back as (uid, user, request) to be placed by the caller, with the next uid."""
    admitted = []
    while arr.next_time() <= bound_s:
        spec, user = arr.pop()
        req = accept(uid, spec, cfg.max_model_len, cfg.caps_output, cfg.sglang_max_req_len)
        if req.__class__ is not SimRequest:
            out.append((uid, req))
            if user >= 0:
                arr.send(spec.arrival_s + think_s, user)
        else:
            admitted.append((uid, user, req))
        uid += 1
    return admitted, uid
