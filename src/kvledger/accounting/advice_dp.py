"""A data-parallel plan's advice: its figures count one DP rank's pool, so the verdict says so with the ranks' total,
and each fix says the GPUs its deployment takes and what its figures come to over the ranks.

A fix keeps the plan's DP size and changes what it names: ``--tp T`` (with or without another change) runs each of
vLLM's DP ranks at TP T, so T × DP GPUs, and under SGLang's DP attention the same DP ranks inside a TP group of T
GPUs, attention TP T ÷ DP each (``dp_attention.dp_gpus``); every other fix keeps the GPUs. A fix the engine refuses
under DP (SGLang's DP size not dividing the new TP: ``dp_attention.check_data_parallel``) is not re-planned, so not
offered.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import TYPE_CHECKING

from kvledger.accounting.advice_types import Advice, Option
from kvledger.accounting.dp_attention import attention_tp, dp_gpus, dp_size

if TYPE_CHECKING:
    from kvledger.accounting.plan import Plan

__all__ = ["dp_advice"]

_TP_FIX = re.compile(r"--tp (\d+)\b")
"""A fix that changes the TP size begins so (advice.py, advice_combo.py: "--tp 4", "--tp 2 -q fp8")."""


def dp_advice(p: Plan, adv: Advice) -> Advice:
    """``adv`` for a DP plan: the verdict's first words count one rank's pool, with the ranks' total at the contexts
    it names, and each fix says its GPUs and its figure over the ranks; ``adv`` itself at DP 1."""
    d = getattr(p, "data_parallel", None)
    if d is None:
        return adv
    if adv.message.startswith("fits: "):
        said = {p.memory.max_model_len, *(p.settings.contexts or ())}  # the contexts the verdict names
        total = "".join(f", {d.ranks} × {r.per_rank:,} = {r.total:,} {r.context_tokens:,}-token requests in all"
                        for r in d.requests if r.context_tokens in said)
        head = f"fits (per DP rank: each of the {d.ranks} ranks has its own pool{total}): "
        adv = replace(adv, message=head + adv.message.removeprefix("fits: "))
    return replace(adv, options=tuple(_on_ranks(p, o) for o in adv.options))


def _on_ranks(p: Plan, o: Option) -> Option:
    """The fix ``o`` with the GPUs its deployment takes and its whole requests over the plan's DP ranks."""
    m = _TP_FIX.match(o.action)
    s = p.settings.model_copy(update={"tp": int(m.group(1))}) if m else p.settings
    dp = dp_size(s)
    how = (f"TP {s.tp}, {dp} DP ranks of attention TP {attention_tp(s)}" if s.engine == "sglang"
           else f"{dp} DP ranks × TP {s.tp}")
    ranks = (f"{dp_gpus(s)} GPUs ({how}), the figures one rank's: {dp} × {o.max_requests:,} = "
             f"{dp * o.max_requests:,} requests in all")
    return replace(o, detail=f"{o.detail}; {ranks}", ranks=ranks)
