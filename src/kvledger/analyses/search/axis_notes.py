"""The search's notes on an axis the user fixed that some candidates cannot honour: ``--enable-expert-parallel`` at TP
1, which vLLM ignores (``simulate`` and ``plan`` say the same of one setup); and on the DP axis, how its candidates
are simulated and what they are not tried with."""

from __future__ import annotations

from kvledger.analyses.search.spec import Axes, default_tps

__all__ = ["axis_notes"]


def axis_notes(model_name: str, axes: Axes) -> list[str]:
    """``--enable-expert-parallel`` with a MoE model searched at TP 1: the plan's own note
    (``accounting.expert_parallel.expert_parallel_notes``), and that those candidates run without it (with DP ranks
    they run with it); the DP candidates' note (``_dp_note``); [] otherwise."""
    dp = _dp_note(axes)
    if axes.expert_parallel != (True,):
        return dp
    from kvledger.accounting.expert_parallel import expert_parallel_notes
    from kvledger.accounting.settings import make_settings
    from kvledger.catalog.models import load_model

    model = load_model(model_name)
    tps = list(axes.tps) if axes.tps else default_tps(model.num_kv_heads)
    if not model.is_moe or 1 not in tps:
        return dp
    only = ("every candidate is at TP 1, so none runs with expert parallelism" if set(tps) == {1} else
            "the TP 1 candidates run without it (those at TP > 1 with it)")
    if dp:
        only = "the TP 1 candidates without DP ranks run without it (those at TP > 1 or with DP ranks with it)"
    at_tp1 = make_settings(tp=1, enable_expert_parallel=True)
    return [f"{note}: {only}" for note in expert_parallel_notes(model, at_tp1)] + dp


def _dp_note(axes: Axes) -> list[str]:
    """How the DP candidates (``--data-parallel-size`` above 1) were simulated, priced and bounded; [] without."""
    ranks = [n for n in axes.data_parallel_sizes if n > 1]
    if not ranks:
        return []
    return [f"data parallel {', '.join(map(str, ranks))}: each such candidate is vLLM's DP ranks of TP GPUs with "
            "--enable-expert-parallel (DP × TP GPUs per unit, rented on one instance or per GPU), simulated in "
            "lock-step as `kvledger simulate --data-parallel-size N --enable-expert-parallel` simulates them (each "
            "rank its own scheduler and KV pool, every step as long as the slowest rank's; analyses/serving/"
            "sim_dp.py), its capacity bound the ranks' dense-side work ÷ N (analyses/serving/work_bounds.py); not "
            "tried with --offload tiers, which the lock-step simulation does not serve from"]
