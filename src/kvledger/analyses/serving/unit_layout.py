"""One replica's GPUs in the engine's words, as every simulated command names them: ``TP 8``, ``TP 8 × PP 2``
(vLLM's pipeline stages, ``sim_pp.py``), ``DP 8 × TP 1`` (vLLM's DP ranks, each its own TP group: ``sim_dp.py``) or
``DP attention 8 in TP 8`` (SGLang's ranks inside the one TP group). ``cost --simulate``'s sources, the SLO-capacity
search's probe note and ``goodput --simulate --target``'s probe table say the same words for one run (the table
inferred DP ranks from the GPU count, so it read TP 8 × PP 2 as "DP 2 × TP 8")."""

from __future__ import annotations

from typing import Any

__all__ = ["unit_layout"]


def unit_layout(setup: Any) -> str:
    """``setup`` (a ``sim_setup.SimSetup``): its step cost's DP layout where it has one (``layout_text``), else
    ``TP n``, then ``× PP n`` with pipeline stages."""
    cost = setup.cost
    lay = cost.layout_text(setup.tp) if hasattr(cost, "layout_text") else f"TP {setup.tp}"
    pp = getattr(cost, "pp", 1)
    return f"{lay} × PP {pp}" if pp > 1 else lay
