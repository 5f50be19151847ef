"""The profile run's lever on a plan that does not fit: fewer --max-num-seqs, when vLLM's dummy sampler sets the peak.

vLLM's profile run samples ``max_num_seqs`` dummy requests (V0 ``worker/model_runner.py::profile_run`` with every
sampling feature on; V1 ``gpu_model_runner.py::_dummy_sampler_run`` over min(max_num_seqs, max_num_batched_tokens)),
so where that sampler, not the forward, sets the activation peak, a smaller ``max_num_seqs`` frees memory for the KV
cache, at the price of fewer requests running at once. vllm#10517's 45K start-up on an RTX 3090 under 0.6.4 is such a
case (tests/accounting/test_vllm_history.py). Each candidate is re-planned, not guessed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from kvledger.accounting.advice_startup_len import check_refuses
from kvledger.errors import InputError
from kvledger.units import GiB

if TYPE_CHECKING:
    from kvledger.accounting.plan import Plan

__all__ = ["SEQS_TRIES", "max_num_seqs_fix"]

SEQS_TRIES = (128, 64, 32, 16, 8)
"""--max-num-seqs values tried, largest first: the first that holds one max_model_len request is offered."""


def max_num_seqs_fix(p: Plan, build: Callable) -> list[tuple[str, float, int, str, int]]:
    """(action, engine concurrency, whole requests, detail, max_model_len) for the largest --max-num-seqs in
    SEQS_TRIES below the plan's that makes one max_model_len request fit; none for other engines, a given activation
    peak or available memory, or when the sampler does not set the peak (then no value helps)."""
    m, s = p.memory, p.settings
    if s.engine != "vllm" or m.available_given or s.activation_peak_bytes is not None:
        return []
    for n in (k for k in SEQS_TRIES if k < m.max_num_seqs):
        try:
            q = build(p.model, p.gpu, s.model_copy(update={"contexts": (m.max_model_len,), "max_num_seqs": n}),
                      with_roofline=False, with_advice=False)
        except InputError:
            return []
        row = q.row_at(q.memory.max_model_len)
        if row and row.max_requests >= 1 and not check_refuses(q):  # vLLM 0.14–0.16's PP check passes too
            act = next((d.bytes for d in m.deductions if d.name == "activation peak"), 0.0)
            new = next((d.bytes for d in q.memory.deductions if d.name == "activation peak"), 0.0)
            return [(f"--max-num-seqs {n}", row.max_concurrency, row.max_requests,
                     f"the profile run samples max_num_seqs dummy requests: activation peak {act / GiB:.2f} → "
                     f"{new / GiB:.2f} GiB, {q.memory.available_kv_bytes / GiB:.2f} GiB for the KV cache; at most "
                     f"{n} requests run at once", q.memory.max_model_len)]
    return []
