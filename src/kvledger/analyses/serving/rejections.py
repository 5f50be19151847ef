"""Requests the engine refuses before they run, counted on a capacity search's workload, and the "no capacity" answer.

A request refused at input validation (``dynamics.engine.request_state.accept``: vLLM V1 a prompt ≥ max_model_len,
V0 and SGLang prompt + output past it) is never good, so it counts against the attainment at every load: with
``r`` of ``N`` requests refused no rate reaches more than (N − r) / N. Every probe of a search replays the same
requests (only their gaps are rescaled), so the count is read once off the workload, by the engine's own rule
(``request_state.refused``), without simulating. When that ceiling is below the target, max_model_len — not the SLO,
the load or the GPUs — is why no rate meets it, and the answer says so first.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from kvledger.dynamics.engine.request_state import refused
from kvledger.dynamics.workload.columns import WorkloadColumns
from kvledger.errors import NoAnswerError
from kvledger.jsonable import to_jsonable

__all__ = ["Rejections", "count_rejections", "no_capacity_error"]

_RULE = "counted on the probes' workload by the engine's rule (kvledger.dynamics.engine.request_state.refused)"


@dataclass(frozen=True)
class Rejections:
    """The requests of a search's workload that the engine refuses, and what would serve them.

    Attributes:
        num_rejected: requests refused at input validation, count (the same in every probe).
        num_requests: requests per probe, count.
        max_model_len: the engine's max_model_len, tokens.
        rule: which requests it refuses, in words.
        longest_prompt_tokens: the workload's longest prompt, tokens.
        longest_request_tokens: its longest prompt + output, tokens: a max_model_len that serves every request whole.
        least_max_model_len: the least max_model_len that refuses none, tokens (vLLM V1: the longest prompt + 1, the
            outputs past it capped; otherwise the longest prompt + output).
        pool_max_req_len: SGLang's max_req_len where its KV pool, not max_model_len, sets it (pool tokens − 1 <
            max_model_len − 1: ``EngineConfig.sglang_pool_caps_context``), tokens; None otherwise. Then raising
            --max-model-len serves no more requests: the pool must grow.
        model_limit_tokens: the longest max_model_len the engine starts with for this model's config
            (``accounting.max_model_len.engine_config_len``: a longer --max-model-len is refused unless
            ``allow_long_env`` is set), tokens; None where the plan takes a longer one (--allow-long-max-model-len).
        num_past_model_limit: requests refused even at ``model_limit_tokens``, count: no --max-model-len the engine
            accepts serves them.
        allow_long_env: the engine's switch for a longer max_model_len (``max_model_len.ALLOW_LONG_ENV``).
    """

    __json__ = ("num_rejected", "num_requests", "max_model_len", "rule", "longest_prompt_tokens",
                "longest_request_tokens", "least_max_model_len", "pool_max_req_len", "model_limit_tokens",
                "num_past_model_limit", "allow_long_env", "attainment_ceiling", "source")
    num_rejected: int
    num_requests: int
    max_model_len: int
    rule: str
    longest_prompt_tokens: int
    longest_request_tokens: int
    least_max_model_len: int
    source: str = _RULE
    pool_max_req_len: int | None = None
    model_limit_tokens: int | None = None
    num_past_model_limit: int = 0
    allow_long_env: str = ""

    @property
    def attainment_ceiling(self) -> float:
        """The most attainment any load can reach, (N − rejected) ÷ N: a rejected request is never good."""
        return (self.num_requests - self.num_rejected) / self.num_requests

    def blocks(self, target: float) -> bool:
        """Whether the rejected requests alone keep every load under ``target`` (their share > 1 − target)."""
        return self.num_rejected > 0 and self.attainment_ceiling < target

    def text(self, target: float) -> str:
        """What the refusals do to the search; where they alone miss ``target``, that and the fix, first."""
        n, total = self.num_rejected, self.num_requests
        head = (f"{n:,} of the {total:,} requests per probe ({n / total:.1%}) are rejected before they run ("
                f"{self.rule}, max_model_len here {self.max_model_len:,}; {self.source}), and a rejected request "
                f"counts as missing the SLO, so attainment is at most {self.attainment_ceiling:.1%} at any load")
        fix = self.fix_words()
        if self.blocks(target):
            cause = ("SGLang's KV pool (its max_req_len), not the SLO or the load," if self.pool_max_req_len is not None
                     else "max_model_len, not the SLO or the GPUs,")
            return f"{head}, below the {target:.0%} target: {cause} is why no load meets it — {fix}"
        return f"{head}: {fix}"

    def fix_words(self) -> str:
        """The --max-model-len that serves every request, and the least that rejects none, in words; where SGLang's
        KV pool caps max_req_len (``pool_max_req_len``), the pool that serves them instead (tp_worker.py's
        max_req_len = pool tokens − 1, and a prompt ≥ max_req_len − 5 is aborted: a pool of the longest prompt + 6
        tokens admits every prompt, of the longest prompt + output + 1 serves every request whole)."""
        if self.pool_max_req_len is not None:
            return (f"SGLang's KV pool, not max_model_len, caps max_req_len at {self.pool_max_req_len:,} tokens, so "
                    f"raising --max-model-len serves no more: a pool of at least {self.longest_prompt_tokens + 6:,} "
                    f"tokens admits every prompt, {self.longest_request_tokens + 1:,} serves every request whole — "
                    "raise --mem-fraction-static, use more GPUs (--tp) or a GPU with more memory (`kvledger plan "
                    "--engine sglang` prints the pool), or use a workload whose requests fit")
        if self.model_limit_tokens is not None and self.longest_request_tokens > self.model_limit_tokens:
            return self._past_limit_words()
        return (f"raise --max-model-len to at least {self.longest_request_tokens:,} (the workload's longest prompt + "
                "output"
                + (f"; {self.least_max_model_len:,}, its longest prompt + 1, is the least that rejects none, the "
                   "outputs past it capped" if self.least_max_model_len < self.longest_request_tokens else "")
                + "; `kvledger plan --max-model-len` checks that it fits), or use a workload whose requests fit")

    def _past_limit_words(self) -> str:
        """The fix where the whole longest request is past the model's own limit (``model_limit_tokens``): a
        --max-model-len above it is refused at start-up (the engine's config check), so it is not offered."""
        lim, past = self.model_limit_tokens, self.num_past_model_limit
        limit = (f"the {lim:,} tokens the model's config supports (the engine refuses a longer --max-model-len "
                 f"unless {self.allow_long_env}, past what the model was trained for)")
        if not past:  # vLLM V1 caps the outputs: the longest prompt + 1 fits under the limit
            return (f"raise --max-model-len to at least {self.least_max_model_len:,} (the workload's longest prompt + "
                    f"1: the least that rejects none, the outputs past it capped; its longest prompt + output, "
                    f"{self.longest_request_tokens:,}, is past {limit}), or use a workload whose requests fit")
        more = (f"raising --max-model-len to {lim:,} serves {self.num_rejected - past:,} of them; "
                if self.max_model_len < lim and past < self.num_rejected else "")
        return (f"{more}{past:,} need more than {limit}, so no --max-model-len it starts with serves them: use a "
                "model with a longer context, or a workload whose requests fit")

    def to_dict(self) -> dict[str, Any]:
        return to_jsonable(self)


def _lengths(workload: Any) -> tuple[np.ndarray, np.ndarray]:
    """(prompt tokens, output tokens) of each request of a simulation's workload (a list of specs, columns, or a
    closed loop's requests)."""
    reqs = getattr(workload, "requests", workload)
    if isinstance(reqs, WorkloadColumns):
        return np.asarray(reqs.num_prompt_tokens, np.int64), np.asarray(reqs.num_output_tokens, np.int64)
    if not hasattr(reqs, "__len__"):  # a session loop draws its turns as it runs: no list to count before it runs
        return np.empty(0, np.int64), np.empty(0, np.int64)
    n = len(reqs)
    return (np.fromiter((r.num_prompt_tokens for r in reqs), np.int64, n),
            np.fromiter((r.num_output_tokens for r in reqs), np.int64, n))


def count_rejections(setup: Any) -> Rejections | None:
    """The requests of ``setup``'s workload (a ``SimSetup``) its engine refuses; None when it refuses none."""
    cfg = setup.config
    prompt, output = _lengths(setup.workload)
    if not prompt.size:
        return None
    caps, max_req = cfg.caps_output, cfg.sglang_max_req_len
    n = int(np.count_nonzero(refused(prompt, output, cfg.max_model_len, caps, max_req)))
    if not n:
        return None
    if max_req is not None:
        rule = "prompt + output > max_model_len, or a prompt ≥ SGLang's max_req_len − 5"
    else:
        rule = "a prompt ≥ max_model_len" if caps else "prompt + output > max_model_len"
    longest_prompt, longest = int(prompt.max()), int((prompt + output).max())
    limit, env = _model_limit(getattr(setup, "plan", None))
    at_limit = None if max_req is None else min(limit or 0, (cfg.num_gpu_blocks - 1) * cfg.block_size) - 1  # SGLang's
    past = 0 if limit is None else int(np.count_nonzero(refused(prompt, output, limit, caps, at_limit)))
    return Rejections(n, int(prompt.size), cfg.max_model_len, rule, longest_prompt, longest,
                      longest_prompt + 1 if caps and max_req is None else longest,
                      pool_max_req_len=max_req if cfg.sglang_pool_caps_context else None,
                      model_limit_tokens=limit, num_past_model_limit=past, allow_long_env=env)


def _model_limit(plan: Any) -> tuple[int | None, str]:
    """(the longest max_model_len the plan's engine starts with for its model, tokens; the engine's switch for a
    longer one), or (None, "") with no plan, where --allow-long-max-model-len is given, or for an engine that never
    refuses a longer one (TensorRT-LLM)."""
    from kvledger.accounting.max_model_len import ALLOW_LONG_ENV, engine_config_len

    s = getattr(plan, "settings", None)
    if s is None or s.allow_long_max_model_len or s.engine not in ALLOW_LONG_ENV:
        return None, ""
    return engine_config_len(plan.model, s.engine, s.engine_version)[0], ALLOW_LONG_ENV[s.engine]


def no_capacity_error(rejections: Rejections | None, lowest: float, target: float, slo_text: str,
                      idle_edge: Any = None, idle_missed: str = "") -> NoAnswerError:
    """The answer of a rate search in which no rate down to ``lowest`` req/s meets ``target``: the input was valid,
    the deployment has no SLO capacity (exit status 1, README). Refusals that alone keep every rate under the target
    are said first, with their fix (``payload["rejections"]``); otherwise the SLO's levers: ``idle_missed``
    (``boundary.missed_words`` of the lowest-rate probe) says which limit the requests missed near idle, where more
    replicas cannot help, and then replicas are not offered as a lever."""
    if rejections is not None and rejections.blocks(target):
        return NoAnswerError("no SLO capacity: " + rejections.text(target),
                             {"rejections": rejections.to_dict(), "lowest_rate_req_per_s": lowest})
    if idle_edge is not None:  # ``idle_edge.IdleEdge``: met only within sampling noise even near idle
        return NoAnswerError(f"{idle_edge.note} ({slo_text})", {"idle_edge": idle_edge.to_dict()})
    levers = ("lower --target, or price the run at its own load with --at-offered-load" if idle_missed else
              "loosen the SLO, lower --target, add GPUs (--tp, --replicas), or price the run at its own load with "
              "--at-offered-load")
    return NoAnswerError(f"no request rate down to {lowest:g} req/s has {target:.0%} of requests within the SLO "
                         f"({slo_text}) on this deployment{idle_missed}; there is no capacity to price: {levers}"
                         + (f"; note: {rejections.text(target)}" if rejections else ""))
