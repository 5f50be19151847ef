"""SGLang's arrival stretch and the compiled core (native.py, stretch_core.c): what ``sglang_stretch._SGLangStretch``
hands the core, and the core's loop called.

The C functions are translations of the stretch's methods (the same steps, the same float operations in the same
order), so every figure is the same either way (tests/dynamics/test_native_core.py runs both).
"""

from __future__ import annotations

from functools import partial

from kvledger.accounting.sglang_steps import GraphPaddedStepCost
from kvledger.accounting.stepcost import step_pricer
from kvledger.dynamics.engine.request_state import SimRequest, accept
from kvledger.dynamics.engine.sglang_scheduler import CLIP_MAX_NEW_TOKENS
from kvledger.dynamics.fast import open_native
from kvledger.dynamics.fast.stretch_times import plain_decode_terms

__all__ = ["prefill_price", "decode_terms_of", "run_loop"]


def prefill_price(cost, prices) -> tuple:
    """(a prefill step's price, its roofline plain form for the core or None): a step with a prefill is priced by
    ``GraphPaddedStepCost``'s wrapped model as it is (no padding), so the form is that model's."""
    price = step_pricer(cost, prices)
    padded = type(cost) is GraphPaddedStepCost and price == cost.step_time_of
    return price, open_native.plain_price(*((cost.inner, cost.price_of) if padded else (cost, price)))


def decode_terms_of(cost, prices):
    """The decode price's plain form for the core, per batch size: CUDA-graph padding included where the step cost
    pads (``GraphPaddedStepCost.decode_padded_terms``), else ``stretch_times.plain_decode_terms``."""
    if type(cost) is GraphPaddedStepCost and prices.decode_list == cost.decode_steps_list:
        return partial(_padded_form, cost)
    return plain_decode_terms


def run_loop(run, rep, spec_at, arrivals, i: int, total: int, out) -> int:
    """``run_arrivals``' loop by the core (``sglang_run``: ``decode_until`` and ``arrive`` in turn); returns the next
    arrival index and marks the replica unsteady where the arrivals' step is a general step."""
    i, general = run.core.sglang_run(run, spec_at, arrivals, i, total, out, accept, SimRequest, run.price, run.plain,
                                     rep.prefill_time, run.limits, CLIP_MAX_NEW_TOKENS, run.terms_of)
    if general:
        rep.steady = False  # the arrivals' step is a general step
    return i


def _padded_form(cost: GraphPaddedStepCost, forms: dict, prices, alive: int):
    """``decode_steps_list``'s plain form at SGLang's padded batch (gemm, g, bw, padding tokens), memoised in ``forms``
    (the compiled decode loop's ``terms_of``); None where the wrapped model has none."""
    terms = forms[alive] = cost.decode_padded_terms(alive)
    return terms
