"""Fixes of two changes for a plan that does not fit: a smaller tensor-parallel degree than the smallest that fits
alone, with FP8 weights or FP8 KV (a fresh user's trial: Llama-3.1-70B on H100 was offered --tp 4 and a bigger GPU,
where --tp 2 with FP8 weights holds the full 131,072-token context — half the GPUs). Each is re-planned."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from kvledger.accounting.advice_types import Option
from kvledger.accounting.dp_attention import dp_gpus
from kvledger.units import GiB

if TYPE_CHECKING:
    from kvledger.accounting.plan import Plan

__all__ = ["fewer_gpu_options", "TP_STEPS"]

#: the tensor-parallel degrees a fix tries, in order (``advice``'s TP fixes too)
TP_STEPS = (2, 4, 8, 16)


def _changes(p: Plan, fp8_weights_why: str, fp8_kv_why: str) -> tuple[list[tuple[str, dict[str, Any], str]],
                                                                       tuple[str, dict[str, Any], str] | None]:
    """The FP8 changes the plan has not made, one at a time (weights, vLLM's --quantization fp8; KV), and both
    together where both are open (None otherwise)."""
    singles = []
    if p.settings.quantization is None:  # vLLM only: the other engines' plans refuse it (None from the re-plan)
        singles.append(("-q fp8", {"quantization": "fp8"}, fp8_weights_why))
    if not p.settings.kv_cache_dtype.startswith("fp8"):
        singles.append(("--kv-cache-dtype fp8", {"kv_cache_dtype": "fp8"}, fp8_kv_why))
    pair = (("-q fp8 --kv-cache-dtype fp8", {"quantization": "fp8", "kv_cache_dtype": "fp8"},
             "both: FP8 weights and FP8 KV") if len(singles) == 2 else None)
    return singles, pair


def fewer_gpu_options(p: Plan, replan: Callable[..., Plan | None], at_len: Callable[[Plan], tuple[float, int]],
                      tp_alone: int | None, fp8_weights_why: str, fp8_kv_why: str) -> list[Option]:
    """The smallest TP above the plan's and below ``tp_alone`` (the smallest that fits with no other change; None:
    none does) at which an FP8 change fits one max_model_len request, each such change as ``--tp T <change>``; [] when
    none does. ``replan(**settings)`` re-plans with the changes (None: refused); ``at_len`` gives the engine's
    concurrency figure and whole requests at max_model_len. Both FP8 changes together are offered only where
    neither alone fits. The GPUs compared are the TP groups' (``dp_attention.dp_gpus``: TP × DP for vLLM's DP
    ranks)."""
    singles, pair = _changes(p, fp8_weights_why, fp8_kv_why)

    def gpus(tp: int) -> int:  # the GPUs at that TP: × DP for vLLM's DP ranks
        return dp_gpus(p.settings.model_copy(update={"tp": tp}))

    def option(tp: int, change: tuple[str, dict[str, Any], str]) -> Option | None:
        action, update, why = change
        q = replan(tp=tp, **update)
        if q is None or at_len(q)[1] < 1:
            return None
        c, n = at_len(q)
        fewer = f"; {gpus(tp)} GPUs where TP alone needs {gpus(tp_alone)}" if tp_alone else ""
        ep = f" --ep-size {tp}" * (q.settings.ep_size == tp)  # SGLang's EP = TP, carried by the re-plan (advice._try)
        return Option(f"--tp {tp}{ep} {action}", c, n, f"{why}; {q.memory.available_kv_bytes / GiB:.2f} GiB KV per "
                      f"GPU{fewer}", q.memory.max_model_len)

    for tp in TP_STEPS:
        if tp <= p.settings.tp or (tp_alone is not None and tp >= tp_alone):
            continue
        out = [o for o in (option(tp, ch) for ch in singles) if o is not None]
        if not out and pair is not None:
            out = [o for o in (option(tp, pair),) if o is not None]
        if out:
            return out
    return []
