"""The search's notes on an axis the user fixed that some candidates cannot honour: ``--enable-expert-parallel`` at TP
1, which vLLM ignores (``simulate`` and ``plan`` say the same of one setup)."""

from __future__ import annotations

from kvledger.analyses.search.spec import Axes, default_tps

__all__ = ["axis_notes"]


def axis_notes(model_name: str, axes: Axes) -> list[str]:
    """``--enable-expert-parallel`` with a MoE model searched at TP 1: the plan's own note
    (``accounting.expert_parallel.expert_parallel_notes``), and that those candidates run without it; [] otherwise."""
    if axes.expert_parallel != (True,):
        return []
    from kvledger.accounting.expert_parallel import expert_parallel_notes
    from kvledger.accounting.settings import make_settings
    from kvledger.catalog.models import load_model

    model = load_model(model_name)
    tps = list(axes.tps) if axes.tps else default_tps(model.num_kv_heads)
    if not model.is_moe or 1 not in tps:
        return []
    only = ("every candidate is at TP 1, so none runs with expert parallelism" if set(tps) == {1} else
            "the TP 1 candidates run without it (those at TP > 1 with it)")
    at_tp1 = make_settings(tp=1, enable_expert_parallel=True)
    return [f"{note}: {only}" for note in expert_parallel_notes(model, at_tp1)]
