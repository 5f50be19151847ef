"""SGLang's --mem-fraction-static fix: the smallest fraction that holds one max_model_len request, re-planned.

SGLang's KV pool is free memory before the weights load × mem_fraction_static − the weights and the load's other
terms (``mem_cache/kv_cache_configurator.py::_profile_available_bytes``), so a low fraction leaves no pool; the fix
raises it, never above SGLang's own default at this GPU and TP (``arg_groups/memory_hook.py::
handle_gpu_memory_settings``: what it reserves for activations and CUDA graphs) unless the value given was above it.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING

from kvledger.accounting import notes as N
from kvledger.accounting.advice_len import blocks_at
from kvledger.accounting.advice_types import Option
from kvledger.units import GiB

if TYPE_CHECKING:
    from kvledger.accounting.plan import Plan

__all__ = ["mem_fraction_option", "FRACTION_STEPS", "fp8_kv_flag"]

FRACTION_STEPS = 3
"""Fractions re-planned from the first estimate up, 0.01 apart (as for vLLM's --gpu-memory-utilization): the terms
that move with the fraction (a Mamba pool's share) may need a step more."""


def mem_fraction_option(p: Plan, replan: Callable[..., Plan | None], at_len: Callable[[Plan], tuple[float, int]]
                        ) -> list[Option]:
    """The smallest --mem-fraction-static (to 0.01) that holds one max_model_len request: (the deductions other than
    the reserve + that request's tokens) ÷ free memory before the load, rounded up, re-planned; capped at SGLang's own
    default unless the given value was above it, and saying so when the default itself fits. None for other engines,
    a given KV budget, or when no fraction up to the cap fits."""
    m = p.memory
    if m.fraction_name != "mem_fraction_static" or m.kv_free or m.available_given or m.requested_bytes <= 0:
        return []
    own = replan(mem_fraction_static=None)
    default = own.memory.fraction if own else None
    given = p.settings.mem_fraction_static
    cap = 1.0 if default is None or (given is not None and given > default) else default
    others = sum(d.bytes for d in m.deductions if d.name != N.SGLANG_RESERVE)
    need = blocks_at(p, m.max_model_len) * m.bytes_per_block + others
    first = math.ceil(need / m.requested_bytes * 100 - 1e-9) / 100
    default_fits = own is not None and given is not None and default > m.fraction and at_len(own)[1] >= 1
    for f in (round(first + k / 100, 2) for k in range(FRACTION_STEPS)):
        if f <= m.fraction or f > cap or (default_fits and f >= default):
            continue
        q = replan(mem_fraction_static=f)
        if q and at_len(q)[1] >= 1:
            c, n = at_len(q)
            return [Option(f"--mem-fraction-static {f:g}", c, n, _why(q, f) + (_default_clause(own, at_len)
                                                                                if default_fits else ""),
                           q.memory.max_model_len)]
    if default_fits and own is not None:
        c, n = at_len(own)
        return [Option(f"--mem-fraction-static {default:g}", c, n, f"SGLang's own default at this GPU and TP (leave "
                       f"the flag out); {_why(own, default)}", own.memory.max_model_len)]
    return []


def _why(q: Plan, f: float) -> str:
    reserve = sum(d.bytes for d in q.memory.deductions if d.name == N.SGLANG_RESERVE)
    return (f"SGLang then keeps back (1 − {f:g}) × free before load = {reserve / GiB:.2f} GiB for activations and CUDA "
            f"graphs, leaving {q.memory.available_kv_bytes / GiB:.2f} GiB for the KV cache "
            "(kv_cache_configurator.py _profile_available_bytes)")


def _default_clause(own: Plan, at_len: Callable[[Plan], tuple[float, int]]) -> str:
    c, n = at_len(own)
    return (f"; SGLang's own default here, {own.memory.fraction:g} (leave the flag out), holds {n:,} concurrent "
            f"{own.memory.max_model_len:,}-token request{'' if n == 1 else 's'} ({c:,.2f}x)")


def fp8_kv_flag(p: Plan) -> str:
    """The FP8 KV flag in the plan's engine's spelling: SGLang names its FP8 KV formats fp8_e4m3 and fp8_e5m2 (the
    e4m3 one, as ``search``'s SGLang launch line writes it, or fp8_e5m2 in a release whose choices lack e4m3: before
    0.4.1.post6, ``kv_dtype_choices``); the others take fp8."""
    if p.settings.engine != "sglang":
        return "--kv-cache-dtype fp8"
    from kvledger.accounting.kv_dtype_choices import sglang_cache_dtypes

    choices = sglang_cache_dtypes(p.settings.engine_version)[0]
    return "--kv-cache-dtype " + ("fp8_e4m3" if "fp8_e4m3" in choices else "fp8_e5m2")
